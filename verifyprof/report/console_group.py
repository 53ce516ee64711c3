"""The breakdown's table of one step group (the console's): its steps in one line, the mean,
share, p50 and p90 of each phase, each rank's mean (with the verdict's rank's share beside it,
the numbers the verdict states), and the group's notes. Also the console's number formats."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from verifyprof.contracts.plumbing.text import counted
from verifyprof.report.layout import Col, Console, fits, fitted_table


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}" if whole else "-"


def _count(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _counted(value: float, word: str) -> str:
    """A mean count and its word, plural unless it reads 1."""
    return counted(int(value) if float(value).is_integer() else round(value, 1), word)


def _label(group: dict[str, Any]) -> str:
    return f"{group['name']} [{group['variant']}]" if group.get("variant") else group["name"]


def _print_group(
    console: Console,
    group: dict[str, Any],
    phase_names: list[str],
    show_zero: bool,
    scope: Any = None,
) -> None:
    wall = group["wall_ns"]
    median = group["median_step"]
    _print_group_line(console, group)
    by_rank = group.get("by_rank", {})
    ranks = [r for r in by_rank if r != "-1"]
    rank_cols = ranks if len(ranks) > 1 else []
    mine = str(scope.rank) if scope is not None and scope.devices > 1 else None
    shown = [
        p for p in phase_names if show_zero or group["phases"][p]["mean"] or median["phases"].get(p)
    ]
    rows = [
        [
            p,
            _ms(group["phases"][p]["mean"]),
            f"{100 * group['phases'][p]['share']:.1f}",
            _ms(group["phases"][p]["p50"]),
            _ms(group["phases"][p]["p90"]),
        ]
        + _rank_cells(by_rank, rank_cols, mine, p)
        for p in shown
    ]
    rows.append(
        ["wall", _ms(wall["mean"]), "100.0", _ms(wall["p50"]), _ms(wall["p90"])]
        + _rank_cells(by_rank, rank_cols, mine, None)
    )
    columns = _group_columns(rank_cols, mine)
    if rank_cols and not fits(console, columns, rows):
        own = (f"rank {mine}\n", f"rank {mine} *")  # the verdict's rank's columns
        keep = [i for i, c in enumerate(columns) if i < 5 or c.header.startswith(own)]
        rows = [[row[i] for i in keep] for row in rows]
        columns = [columns[i] for i in keep]
        rank_cols = [mine] if mine in rank_cols else []
        console.print(
            f"  ({counted(len(ranks), 'rank')}: per-rank columns need a wider terminal, or see"
            " --json by_rank" + ("; the verdict's rank shown" if rank_cols else "") + ")",
            highlight=False,
        )
    styles: list[str | None] = [None] * (len(rows) - 1) + ["bold"]
    cost = group.get("cost_ns")
    if cost and cost["mean"] < wall["mean"]:  # pipelined: the window holds other steps' GPU work
        rows.append(
            [
                "cost (wall - other_work)",
                _ms(cost["mean"]),
                f"{100 * cost['mean'] / wall['mean']:.1f}" if wall["mean"] else "-",
                _ms(cost["p50"]),
                _ms(cost["p90"]),
            ]
            + ["" for _ in columns[5:]]
        )
        styles.append("bold")
    table = fitted_table(console, columns, rows, styles=styles)
    console.print(table)
    console.print(
        "  % = mean phase time / mean wall time (the JSON's share); phases sum to the wall time",
        style="dim",
        highlight=False,
    )
    if mine is not None and mine in rank_cols:
        console.print(
            f"  * the verdict's steps: {scope.words()}, not the mean over devices",
            style="dim",
            highlight=False,
        )
    _print_group_notes(console, group)


def _group_columns(rank_cols: list[str], mine: str | None) -> list[Col]:
    """The group table's columns: the phase, its statistics, each rank's mean (and the verdict's
    rank's share: the numbers the verdict states)."""
    columns = [
        Col("phase", "text"),
        Col("mean ms"),
        Col("% of mean\nwall"),
        Col("p50 ms"),
        Col("p90 ms"),
    ]
    for r in rank_cols:
        columns.append(Col(f"rank {r}\nmean ms"))
        if r == mine:
            columns.append(Col(f"rank {r} *\n% of wall"))
    return columns


def _print_group_line(console: Console, group: dict[str, Any]) -> None:
    """The group in one line: its steps, devices, modes, counts (means) and median step."""
    median = group["median_step"]
    modes = ", ".join(f"{k} {v}" for k, v in group["modes"].items())
    over = f" over all {group['steps']} steps" if len(group["devices"]) > 1 else ""
    console.print(
        f"\n[bold]{escape(_label(group))}[/bold]: {group['steps']}"
        f" step{'s' if group['steps'] != 1 else ''} on devices {group['devices']} ({modes}); per"
        f" step {_counted(group['kernels']['mean'], 'kernel')},"
        f" {_counted(group['launches']['mean'], 'launch')} (means{over}); median step"
        f" #{median['index']} (device {median['device']})"
        f" {_ms(median['wall_ns'])} ms (one step's wall; the table's p50: every step's,"
        " interpolated)",
        highlight=False,
    )


def _rank_cells(
    by_rank: dict[str, Any], rank_cols: list[str], mine: str | None, phase: str | None
) -> list[str]:
    """Per rank: its mean ms of ``phase`` (None: the wall); the verdict's rank adds its share."""
    cells = []
    for r in rank_cols:
        wall = by_rank[r]["wall_ns"]["mean"]
        value = wall if phase is None else by_rank[r]["phases"][phase]
        cells.append(_ms(value))
        if r == mine:
            cells.append(_pct(value, wall))
    return cells


def _print_group_notes(console: Console, group: dict[str, Any]) -> None:
    totals = group.get("totals", {})
    hidden = [
        f"{p} {_ms(totals[p]['mean'])} ms in total,"
        f" {_ms(totals[p]['mean'] - group['phases'][p]['mean'])} ms of it hidden behind compute"
        for p in totals
        if totals[p]["mean"] - group["phases"][p]["mean"] > 0
    ]
    if hidden:
        console.print("  " + "; ".join(hidden) + " (the table shows exposed time)", highlight=False)
    if group.get("integrity_steps"):
        console.print(
            f"  [yellow]{group['integrity_steps']} of these step rows hold rows named in the"
            " warnings above: their numbers may be off[/yellow]",
            highlight=False,
        )
    if "comm" in group:
        comm = group["comm"]
        console.print(
            f"  collectives: {_count(comm['comm_calls']['mean'])} calls/step, wait for slowest rank"
            f" {_ms(comm['comm_wait_ns']['mean'])} ms, transfer"
            f" {_ms(comm['comm_transfer_ns']['mean'])} ms (means per step)",
            highlight=False,
        )
