"""Rich tables for the terminal. Reads the same dicts as the JSON output, so what a user sees
and what a script parses never disagree."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from verifyprof.contracts import phases


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}" if whole else "-"


def print_breakdown(result: Any, console: Console | None = None, show_zero: bool = False) -> None:
    console = console or Console()
    # the summary and header only: per-step records are for --json and files
    data = {"trace": result.trace_info(), "summary": result.summary()} if hasattr(result, "trace_info") else result
    trace = data["trace"]
    paths = ", ".join(trace["path"])
    console.print(f"[bold]{paths}[/bold]  ({trace['format']}, {trace['kernels']} kernels, devices {[d['device'] for d in trace['devices']]}, ranks {trace['ranks'] or '-'})")
    for warning in trace.get("warnings", []):
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if trace.get("unlinked_ops"):
        console.print(f"[yellow]note:[/yellow] {trace['unlinked_ops']} GPU ops have no launching API call in the trace and belong to no step")
    for group in data["summary"]["groups"]:
        _print_group(console, group, show_zero)
    collectives = data["summary"].get("collectives")
    if collectives:
        table = Table(title="Collectives across ranks (per call)", title_justify="left")
        for col in ("collective", "calls", "devices", "transfer p50 ms", "wait p50 ms", "spread p50 ms", "spread p90 ms", "bytes p50", "busbw p50 GB/s"):
            table.add_column(col, justify="right" if col != "collective" else "left")
        for family, stats in collectives.items():
            table.add_row(family, str(stats["calls"]), str(stats["devices"]), _ms(stats["transfer_ns_p50"]), _ms(stats["wait_ns_p50"]), _ms(stats["spread_ns_p50"]), _ms(stats["spread_ns_p90"]),
                          _bytes(stats.get("bytes_p50")), _gbps(stats.get("busbw_gbps_p50")))
        console.print(table)
        console.print("  busbw: nccl-tests' bus bandwidth over the transfer time (after the last rank joined); bytes: the call's size S as nccl-tests counts it")
    kernels = data["summary"].get("collective_kernels")
    if kernels and not collectives:
        _print_collective_kernels(console, kernels)


def _print_collective_kernels(console: Console, kernels: dict[str, Any]) -> None:
    """One rank's view (no other rank to match against): kernel time includes waiting for peers."""
    table = Table(title="Collective kernels (one rank: not matched across ranks)", title_justify="left")
    for col in ("collective", "kernels", "devices", "kernel p50 ms", "kernel p90 ms", "sized", "bytes p50", "ranks", "busbw >= GB/s"):
        table.add_column(col, justify="right" if col != "collective" else "left")
    for family, stats in kernels.items():
        table.add_row(family, str(stats["kernels"]), str(stats["devices"]), _ms(stats["kernel_ns_p50"]), _ms(stats["kernel_ns_p90"]), str(stats["sized_calls"]),
                      _bytes(stats.get("bytes_p50")), str(stats.get("group_size") or "-"), _gbps(stats.get("kernel_busbw_gbps_p50")))
    console.print(table)
    console.print("  kernel time includes waiting for the other ranks, so busbw from it is a lower bound on the link's bus bandwidth")


def _print_group(console: Console, group: dict[str, Any], show_zero: bool) -> None:
    median = group["median_step"]
    wall = group["wall_ns"]
    modes = ", ".join(f"{k} {v}" for k, v in group["modes"].items())
    label = escape(f"{group['name']} [{group['variant']}]" if group.get("variant") else group["name"])
    title = (
        f"{label}: {group['steps']} steps on devices {group['devices']} ({modes}); "
        f"wall mean {_ms(wall['mean'])} / p50 {_ms(wall['p50'])} / p90 {_ms(wall['p90'])} ms; "
        f"median step #{median['index']} (device {median['device']}) {_ms(median['wall_ns'])} ms"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("phase")
    table.add_column("median step ms", justify="right")
    table.add_column("%", justify="right")
    table.add_column("mean ms", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p90 ms", justify="right")
    by_rank = group.get("by_rank", {})
    ranks = [r for r in by_rank if r != "-1"]
    if len(ranks) > 1:
        for rank in ranks:
            table.add_column(f"rank {rank} mean", justify="right")
    for phase in phases.ALL:
        stats = group["phases"][phase]
        if not show_zero and stats["mean"] == 0 and median["phases"][phase] == 0:
            continue
        row = [phase, _ms(median["phases"][phase]), _pct(median["phases"][phase], median["wall_ns"]), _ms(stats["mean"]), _ms(stats["p50"]), _ms(stats["p90"])]
        if len(ranks) > 1:
            row += [_ms(by_rank[r]["phases"][phase]) for r in ranks]
        table.add_row(*row)
    table.add_section()
    total_row = ["wall", _ms(median["wall_ns"]), "100.0", _ms(wall["mean"]), _ms(wall["p50"]), _ms(wall["p90"])]
    if len(ranks) > 1:
        total_row += [_ms(by_rank[r]["wall_ns"]["mean"]) for r in ranks]
    table.add_row(*total_row, style="bold")
    console.print(table)
    totals = group.get("totals", {})
    hidden = [
        f"{p} {_ms(totals[p]['mean'])} ms in total, {_ms(totals[p]['mean'] - group['phases'][p]['mean'])} ms of it hidden behind compute"
        for p in totals
        if totals[p]["mean"] - group["phases"][p]["mean"] > 0
    ]
    if hidden:
        console.print("  " + "; ".join(hidden) + " (the table shows exposed time)")
    if "comm" in group:
        comm = group["comm"]
        console.print(
            f"  collectives: {comm['comm_calls']['mean']} calls/step, wait for slowest rank {_ms(comm['comm_wait_ns']['mean'])} ms, "
            f"transfer {_ms(comm['comm_transfer_ns']['mean'])} ms (means per step)"
        )


def short_name(name: str, width: int = 100) -> str:
    """A kernel name a human can scan: no ``void`` or parameters, templates folded past one level."""
    name = name.removeprefix("void ")
    out, angle, paren = [], 0, 0
    for ch in name:  # per character of one name, for display only
        if ch == "(":
            paren += 1
            if paren == 1 and angle == 0:
                break  # parameters say nothing the name does not
        elif ch == ")":
            paren = max(paren - 1, 0)
        elif ch == "<":
            angle += 1
            if angle == 2:
                out.append("<…>")
            if angle > 1:
                continue
        elif ch == ">":
            angle = max(angle - 1, 0)
            if angle >= 1:
                continue
        if angle <= 1:
            out.append(ch)
    text = "".join(out)
    return text if len(text) <= width else text[: width - 1] + "…"


def print_kernels(table: Any, top: int, console: Console | None = None) -> None:
    console = console or Console()
    data = table.to_json(top)
    out = Table(title=f"Top {min(top, data['distinct_kernels'])} of {data['distinct_kernels']} kernels ({data['scope']}; taxonomy {data['taxonomy']})", title_justify="left")
    for col in ("#", "phase", "share %", "total ms", "count", "mean us", "kernel"):
        out.add_column(col, justify="left" if col in ("phase", "kernel") else "right", no_wrap=True, overflow="ellipsis")
    for i, row in enumerate(data["kernels"], start=1):
        style = "yellow" if row["phase"] == "other" else None
        out.add_row(str(i), row["phase"], f"{100 * row['share']:.1f}", _ms(row["total_ns"]), str(row["count"]), f"{row['mean_ns'] / 1e3:.1f}", escape(short_name(row["name"])), style=style)
    console.print(out)
    by_phase = ", ".join(f"{k} {_pct(v, data['total_kernel_ns'])}%" for k, v in data["by_phase"].items())
    console.print(f"kernel time by phase: {by_phase}")
    if "other" in data["by_phase"]:
        console.print("[yellow]kernels in 'other' matched no taxonomy rule: add a rule with --taxonomy FILE (see verifyprof/data/taxonomy.toml)[/yellow]")


def print_hooks(spec: str, statuses: list[Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"hook targets for {escape(spec)!r} in this Python", title_justify="left")
    for col in ("state", "target", "ranges", "detail"):
        table.add_column(col, overflow="fold")
    style = {"patched": "green", "pending": "cyan", "absent": "dim", "missing": "red", "unsupported": "red"}
    for status in statuses:
        table.add_row(status.state, escape(status.target), ", ".join(status.ranges), escape(status.detail), style=style.get(status.state))
    console.print(table)
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status.state] = counts.get(status.state, 0) + 1
    console.print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())) + "  (absent: a name this installed version does not have, expected across versions)")


def print_verdict(text: str | None, console: Console | None = None) -> None:
    """The verdict under the breakdown tables (nothing when the trace has no verify steps)."""
    if text:
        (console or Console()).print(f"[bold]verdict[/bold]: {text}", highlight=False)
