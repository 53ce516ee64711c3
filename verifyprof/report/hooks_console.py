"""``verifyprof hooks``: which hook targets the installed packages have, as a table."""

from __future__ import annotations

import sys
from typing import Any

from rich.markup import escape

from verifyprof.report.layout import Col, Console, fitted_table


def print_hooks(spec: str, statuses: list[Any], console: Console | None = None) -> None:
    """Hook targets by state. Targets missing because their package is not installed fold into one
    line per package; the table lists the rest."""
    console = console or Console()
    not_installed: dict[str, int] = {}
    listed = []
    for status in statuses:
        package = _missing_package(status)
        if package:
            not_installed[package] = not_installed.get(package, 0) + 1
        else:
            listed.append(status)
    if listed:
        columns = [
            Col("state", "text"),
            Col("target", "name"),
            Col("ranges", "text"),
            Col("detail", "name"),
        ]
        rows = [
            [
                s.state,
                s.target,
                ", ".join(s.ranges),
                "(below)" if s.state == "missing" else s.detail,
            ]
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
        console.print(
            fitted_table(console, columns, rows, styles=[style.get(s.state) for s in listed])
        )
        for status in (
            s for s in listed if s.state == "missing"
        ):  # why, and what to do: whole, wrapped, never cut
            console.print(
                f"[red]missing[/red] {escape(status.target)}: {escape(status.detail)}",
                highlight=False,
            )
    for package, n in sorted(not_installed.items()):
        what = "target" if n == 1 else "targets"
        console.print(
            f"[red]{n} {what} not checked[/red]: the package {package!r} is not installed in this"
            f" Python ({escape(_python())}); a program's own module? give the program after --,"
            " e.g. -- python script.py",
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


def _missing_package(status: Any) -> str | None:
    """The top-level package whose absence made ``status`` missing (None: some other reason)."""
    if status.state not in ("missing", "absent"):
        return None
    detail = str(status.detail)
    marker = "No module named "
    if marker not in detail:
        return None
    module = detail.split(marker, 1)[1].strip().strip("'\"").split("'")[0]
    top = module.split(".")[0]
    target_top = str(status.target).split(":")[0].split(".")[0]
    return top if top == target_top else None


def _python() -> str:

    return sys.executable
