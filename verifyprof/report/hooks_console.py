"""``verifyprof hooks``: which hook targets the installed packages have, as a table."""

from __future__ import annotations

import sys
from typing import Any

from rich.markup import escape

from verifyprof.capture.hooks import api as hook_api
from verifyprof.report.layout import Col, Console, fitted_table


def print_hooks(
    spec: str, statuses: list[Any], console: Console | None = None, program: bool = False
) -> None:
    """Hook targets by state. A preset's targets whose package is not installed here fold into one
    line per package (information: the server may have its own Python); the table lists the rest,
    and below it why each missing target is missing. ``program``: a program was given (its folder
    was looked in)."""
    console = console or Console()
    not_installed: dict[str, int] = {}
    listed = []
    for status in statuses:
        package = hook_api.not_installed(status) if status.state == "absent" else None
        if package:
            not_installed[package] = not_installed.get(package, 0) + 1
        else:
            listed.append(status)
    if listed:
        _print_table(console, spec, listed)
        for status in (s for s in listed if s.state == "missing"):  # whole, wrapped, never cut
            console.print(
                f"[red]missing[/red] {escape(status.target)}: {escape(_why(status, program))}",
                highlight=False,
            )
    for package, n in sorted(not_installed.items()):
        what = "preset target" if n == 1 else "preset targets"
        console.print(
            f"[yellow]{n} {what} not checked[/yellow]: the package {package!r} is not installed in"
            f" this Python ({escape(_python())}), as expected where the server has its own Python",
            highlight=False,
        )
    counts: dict[str, int] = {}
    for status in listed:
        counts[status.state] = counts.get(status.state, 0) + 1
    if not counts:
        return
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    if listed and any(s.state == "absent" for s in listed):
        summary += (
            "  (absent: a name this installed version does not have, expected across versions)"
        )
    console.print(summary, highlight=False)


def _print_table(console: Console, spec: str, listed: list[Any]) -> None:
    columns = [
        Col("state", "text"),
        Col("target", "name"),
        Col("ranges", "text"),
        Col("detail", "name"),
    ]
    rows = [
        [s.state, s.target, ", ".join(s.ranges), "(below)" if s.state == "missing" else s.detail]
        for s in listed
    ]
    style = {
        "patched": "green",
        "pending": "cyan",
        "absent": "dim",
        "missing": "red",
        "unsupported": "red",
    }
    console.print(f"hook targets for {escape(spec)!r} in this Python", highlight=False)
    console.print(fitted_table(console, columns, rows, styles=[style.get(s.state) for s in listed]))


def _why(status: Any, program: bool) -> str:
    """Why a target is missing: its package not installed in words (and where else it was looked
    for), else its detail."""
    package = hook_api.not_installed(status)
    if package is None:
        return str(status.detail)
    if program:
        return (
            f"{package} is neither in the program's folder nor installed in this Python"
            f" ({_python()})"
        )
    return (
        f"{package} is neither in the current folder nor installed in this Python ({_python()});"
        " a program's own module? give the program after --, e.g. -- python script.py"
    )


def _python() -> str:

    return sys.executable
