"""Rich tables for the terminal. Reads the same dicts as the JSON output, so what a user sees
and what a script parses never disagree; every table fits the console's width (names shorten,
numbers never: :mod:`verifyprof.report.layout`)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from verifyprof.attribution.kernel_names import short_kernel_name
from verifyprof.contracts import phases, ranges
from verifyprof.contracts.plumbing.text import counted
from verifyprof.report.collectives_console import print_collectives as _print_collectives
from verifyprof.report.console_group import (
    _count,
    _ms,
    _pct,
    _print_group,
)
from verifyprof.report.layout import Col, Console, fitted_table, unpadded


def story_index(groups: list[dict[str, Any]], group: tuple[str, str, str] | None) -> int | None:
    """Index of the summary group the verdict is about (name, variant and mode), else
    :func:`lead_group`."""
    if group is not None:
        for i, g in enumerate(groups):
            if (g["name"], g.get("variant") or "", g.get("mode")) == group:
                return i
        for i, g in enumerate(groups):  # a breakdown JSON written before groups had a mode
            if (g["name"], g.get("variant") or "") == group[:2]:
                return i
    return lead_group(groups)


def lead_group(groups: list[dict[str, Any]]) -> int | None:
    """Index of the group to lead with: the verify steps (verifyprof, SGLang or a user's ranges;
    not a width sweep) with the most steps, else the group with the most steps."""
    if not groups:
        return None
    verify = [
        i
        for i, g in enumerate(groups)
        if ranges.is_phase(g["name"], "verify") and "sweep=1" not in (g.get("variant") or "")
    ]
    pool = verify or range(len(groups))
    return max(pool, key=lambda i: (groups[i]["steps"], -i))


def print_breakdown(
    result: Any,
    console: Console | None = None,
    show_zero: bool = False,
    show_all: bool = False,
    group: tuple[str, str, str] | None = None,
    scope: Any = None,
) -> None:
    """The story's step group first (``group``: name, variant, mode: the group the verdict is
    about; default: the verify steps with most steps), the other step groups as one table
    (``show_all``: a phase table for every group), then the collectives."""
    console = console or Console()
    unpadded(console, lambda: _print_breakdown(result, console, show_zero, show_all, group, scope))


def _print_breakdown(
    result: Any,
    console: Console,
    show_zero: bool,
    show_all: bool,
    group: tuple[str, str, str] | None,
    scope: Any,
) -> None:
    data = {**result.header(), "summary": result.summary()} if hasattr(result, "header") else result
    _print_header(console, data)
    groups = data["summary"]["groups"]
    phase_names = data.get("phases") or (list(groups[0]["phases"]) if groups else [])
    lead = story_index(groups, group)
    if show_all:
        for i, group in enumerate(groups):
            _print_group(console, group, phase_names, show_zero, scope if i == lead else None)
    elif lead is not None:
        _print_group(console, groups[lead], phase_names, show_zero, scope)
        others = [g for i, g in enumerate(groups) if i != lead]
        if others:
            _print_other_groups(console, others, phase_names)
    _print_collectives(console, data["summary"])


def _print_header(console: Console, data: dict[str, Any]) -> None:
    trace = data["trace"]
    paths = ", ".join(trace["path"])
    devices = [d["device"] for d in trace["devices"]]
    console.print(
        f"[bold]{escape(paths)}[/bold]  ({trace['format']},"
        f" {counted(trace['kernels'], 'kernel')}, devices"
        f" {devices}, ranks {trace['ranks'] or '-'})"
    )
    options = data.get("options") or {}
    if options.get("whole_trace"):
        why = options.get("whole_trace_because")
        console.print(
            "steps: one per device spanning the whole trace"
            + (f" ({why}: give --range or --step to choose steps)" if why else " (--whole-trace)"),
            highlight=False,
        )
    elif (
        options.get("range") == ranges.DEFAULT_STEP_REGEX
    ):  # said in words: the regex itself is 127 columns wide
        console.print(
            "steps: the spec_step, draft, verify, accept, draft_extend and decode ranges of"
            " verifyprof, SGLang (TARGET_VERIFY, DECODE, ...) and their usual user spellings (the"
            " default --range)",
            highlight=False,
        )
    elif phase := _step_phase(options.get("range")):
        console.print(
            f"steps: the default ranges (as without --step) and every spelling of {phase}"
            f" (--step {phase})",
            highlight=False,
        )
    elif options.get("range"):  # one line, copyable as given
        console.print(
            f"steps: ranges whose text matches the regex {options['range']}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for warning in trace.get("warnings", []):
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    if trace.get("unlinked_ops"):
        console.print(
            f"[yellow]note:[/yellow] {trace['unlinked_ops']} GPU ops have no launching API call in"
            " the trace and belong to no step"
        )


def _print_other_groups(
    console: Console, groups: list[dict[str, Any]], phase_names: list[str]
) -> None:
    """One row per other group (a name and its attributes): the variants folded into one table."""
    common = _common_attrs(groups)
    rows = []
    for group in groups:
        own = [p for p in phase_names if p not in phases.OTHER] or phase_names  # in the cost
        top = max(own, key=lambda p: group["phases"][p]["mean"])
        share = group["phases"][top]["share"]
        attrs = " ".join(a for a in (group.get("variant") or "").split() if a not in common)
        label = group["name"].removeprefix(ranges.DOMAIN + ".") + (f" [{attrs}]" if attrs else "")
        cost = group.get("cost_ns", group["wall_ns"])["mean"]
        top_cost = min(max(group["phases"][top]["mean"] / cost if cost else share, 0.0), 1.0)
        rows.append(
            [
                label,
                group.get("mode", ""),
                str(group["steps"]),
                _ms(cost),
                _count(group["kernels"]["mean"]),
                _count(group["launches"]["mean"]),
                f"{top} {100 * top_cost:.0f}%",
            ]
        )
    columns = [
        Col("step [attributes]", "label"),
        Col("mode", "text"),
        Col("steps"),
        Col("cost ms"),
        Col("kernels"),
        Col("launches"),
        Col("largest phase", "text"),
    ]
    console.print(
        f"\n[bold]Other steps[/bold] ({counted(len(groups), 'group')}; mean cost per step: its"
        " window less"
        " other steps' GPU work in it; phase % of that cost; --all for a phase table of each)",
        highlight=False,
    )
    console.print(fitted_table(console, columns, rows))
    if common:
        console.print(
            "  attributes left out above, the same in every group that has them:"
            f" {' '.join(sorted(common))}",
            highlight=False,
        )


def _common_attrs(groups: list[dict[str, Any]]) -> set[str]:
    """``key=value`` pairs of most groups, the same in every group that has the key (``bs=1``
    everywhere): noise in a label. A minority key (``sweep=1``) tells groups apart: kept."""
    pairs = [
        dict(a.split("=", 1) for a in (g.get("variant") or "").split() if "=" in a) for g in groups
    ]
    keys = {k for p in pairs for k in p}
    common = set()
    for key in keys:
        values = {p[key] for p in pairs if key in p}
        if len(values) == 1 and 2 * sum(key in p for p in pairs) > len(pairs):
            common.add(f"{key}={values.pop()}")
    return common


WIDE = 100  # a kernels table this wide shows one call's min-max too


def print_kernels(data: dict[str, Any], console: Console | None = None) -> None:
    """``kernels``: the top kernels (``KernelTable.to_json(top)``) with their phase, share, calls
    per step and one call's spread, as ``nsys stats -r cuda_gpu_kern_sum`` gives it."""
    console = console or Console()
    unpadded(console, lambda: _print_kernels(data, console))


def _print_kernels(data: dict[str, Any], console: Console) -> None:
    total = data["total_kernel_ns"]
    shown = len(data["kernels"])
    steps = data.get("step_count") or 0
    per_step = f"; per step of {counted(steps, 'step')}" if steps else ""
    title = (
        f"Top {shown} of {counted(data['distinct_kernels'], 'kernel')} ({data['scope']};"
        f" taxonomy {data['taxonomy']}; % of kernel time{per_step})"
    )
    spread = console.width >= WIDE  # one call's min-max: where the names keep their room
    columns = [Col("#"), Col("phase", "text"), Col("%"), Col("total ms"), Col("calls")]
    columns += [Col("/step")] if steps else []
    columns += [Col("med us")] + ([Col("min-max us")] if spread else [])
    columns.append(Col("kernel", "name"))
    rows = [
        [str(i), row["phase"], f"{100 * row['share']:.1f}", _ms(row["total_ns"]), str(row["count"])]
        + ([f"{row['calls_per_step']:.4g}"] if steps else [])
        + [f"{row['median_ns'] / 1e3:.1f}"]
        + ([f"{row['min_ns'] / 1e3:.1f}-{row['max_ns'] / 1e3:.1f}"] if spread else [])
        + [short_kernel_name(row["name"])]
        for i, row in enumerate(data["kernels"], start=1)
    ]
    styles = ["yellow" if row["phase"] == "other" else None for row in data["kernels"]]
    for warning in data.get("warnings", []):
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    console.print(escape(title), highlight=False)
    console.print(fitted_table(console, columns, rows, styles=styles))
    by_phase = ", ".join(f"{k} {_pct(v, total)}%" for k, v in data["by_phase"].items())
    console.print(f"kernel time by phase: {by_phase}", highlight=False)
    if not spread:
        console.print(f"[dim]one call's min-max: --json, or a terminal {WIDE}+ wide[/dim]")
    if "other" in data["by_phase"]:
        console.print(
            "[yellow]kernels in 'other' matched no taxonomy rule: add a rule with --taxonomy FILE"
            " (see verifyprof/data/taxonomy.toml)[/yellow]"
        )


def print_notes(notes: list[str], console: Console | None = None) -> None:
    """Where an input came from (a capture folder's manifest, say), dim, one line each."""
    out = console or Console()
    for note in notes:
        unpadded(out, lambda n=note: out.print(f"[dim]note: {escape(n)}[/dim]", highlight=False))


def print_verdict(
    text: str | None, scope: str | None = None, console: Console | None = None
) -> None:
    """The verdict under the breakdown tables (nothing when the trace has no verify steps);
    ``scope``: which steps its numbers are (the mean step of which device)."""
    if text:
        about = f" ({escape(scope)})" if scope else ""
        out = console or Console()
        line = f"[bold]verdict[/bold]{about}: {escape(text)}"
        unpadded(out, lambda: out.print(line, highlight=False))


def _step_phase(regex: str | None) -> str | None:
    """The phase whose ``--step`` made ``regex`` (``pipeline.resolve.step_regex``: the default
    ranges plus the phase's own), said in words like the default; None for a ``--range``."""
    if not regex or not regex.startswith(ranges.DEFAULT_STEP_REGEX + "|"):
        return None
    tail = regex[len(ranges.DEFAULT_STEP_REGEX) + 1 :]
    return next((p for p in ranges.PHASES if ranges.phase_regex(p) == tail), None)
