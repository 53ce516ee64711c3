"""Rich output of ``verifyprof whatif``. Reads the same dicts as ``--json``."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.decision.load_points import rate_band
from verifyprof.model.decision.verdict import accept_reach
from verifyprof.report.assumptions import print_assumptions, verdict_warnings
from verifyprof.report.console_decision import print_decision
from verifyprof.report.layout import Col, Console, fitted_table, unpadded
from verifyprof.report.layout import hanging as _hanging
from verifyprof.report.load_console import print_load


def print_plain(
    result: dict[str, Any], console: Console | None = None, details: bool = False
) -> None:
    """Plain numbers: ranked, the decision on one screen as a trace's (``details``: every
    table); else the cycle's table."""
    console = console or Console()
    if result.get("candidates") and not details:
        print_decision(result, console)
        return
    flat = (result.get("current") or {}) | result  # today's cycle beside the rest
    unpadded(console, lambda: _print_all_plain(flat, console))


def _print_all_plain(result: dict[str, Any], console: Console) -> None:
    _print_theory(result, console)
    if "cycle_ms" not in result:
        return
    _print_cycle(result, console)


def _print_theory(result: dict[str, Any], console: Console) -> None:
    """Leviathan's i.i.d. numbers and the accept length by draft count, where asked for."""
    lev = result.get("leviathan")
    if lev:
        table = Table(
            title="Leviathan et al. 2023 (i.i.d. acceptance)",
            title_justify="left",
            show_header=False,
        )
        table.add_row("alpha / drafts", f"{lev['alpha']:g} / {lev['num_draft']}")
        table.add_row("expected tokens per cycle (Eq. 1)", f"{lev['expected_tokens']:.3f}")
        if "walltime_improvement" in lev:
            table.add_row(
                f"walltime improvement at c={lev['draft_cost_ratio']:g} (Thm 3.8)",
                f"{lev['walltime_improvement']:.3f}x over {escape(lev['relative_to'])}",
            )
            table.add_row(
                "operations factor (Thm 3.11, c-hat = c)", f"{lev['operations_factor']:.3f}x"
            )
            table.add_row(
                "optimal drafts",
                f"{lev['optimal_num_draft']} ({lev['optimal_walltime_improvement']:.3f}x)",
            )
        console.print(table)
    survival = result.get("survival")
    if survival:
        table = Table(
            title="Accept length by number of drafts (1 + s1 + ... + sk)", title_justify="left"
        )
        table.add_column("drafts", justify="right")
        table.add_column("accept length", justify="right")
        for k, tau in enumerate(survival["accept_len_by_num_draft"], start=1):
            table.add_row(str(k), f"{tau:.3f}")
        console.print(table)


def _print_cycle(result: dict[str, Any], console: Console) -> None:
    table = Table(title="Speculative cycle", title_justify="left", show_header=False)
    table.add_row("accept length", f"{result['accept_len']:.3f}  ({result['accept_len_source']})")
    table.add_row(
        "cycle = draft + verify + overhead",
        f"{result['cycle_ms']:.3f} ms = {result['draft_ms']:.3f} + {result['verify_ms']:.3f} +"
        f" {result['overhead_ms']:.3f}",
    )
    if result.get("draft_source", "").endswith("(Thm 3.8's model)"):
        table.add_row("draft", escape(result["draft_source"]))
    table.add_row("tokens/s per request", f"{result['tokens_per_s']:.1f}")
    if result["batch"] > 1:
        table.add_row(
            f"tokens/s for batch {result['batch']}", f"{result['batch_tokens_per_s']:.1f}"
        )
    if result.get("speedup") is not None:
        table.add_row(
            "baseline decode",
            f"{result['decode_ms']:.3f} ms/step ({result['baseline_tokens_per_s']:.1f} tok/s)",
        )
        table.add_row(
            "speedup",
            f"{result['speedup']:.3f}x ({100 * (result['speedup'] - 1):+.1f}%) over"
            f" {escape(result['relative_to']['speedup'])}",
        )
        table.add_row("cycle cost in decode steps", f"{result['cycle_cost_decode_steps']:.3f}")
        even = result["break_even_verify_ms"]
        table.add_row(
            "break-even verify time",
            f"{even:.3f} ms"
            if even is not None
            else "unreachable: draft and overhead alone outlast the plain steps the accepted"
            " tokens replace",
        )
        at = result["break_even_accept_len"]
        k = result.get("num_draft")
        reach = accept_reach(at, k + 1.0 if k else None)
        table.add_row("break-even accept length", f"{at:.3f}" + (f" ({reach})" if reach else ""))
    else:
        table.add_row("speedup", "- (give --baseline-tps or --decode-ms)")
    console.print(table)
    if result.get("verdict"):
        console.print("[bold]verdict[/bold]:", highlight=False)
        _hanging(console, [result["verdict"]], "", 1)
    if result.get("candidates"):
        _print_plain_ranking(result, console)
    print_load(result, console)


def _print_plain_ranking(result: dict[str, Any], console: Console) -> None:
    """Plain numbers ranked like a trace: what was given and assumed, then the same tables."""
    basis, view = result["basis"], result
    console.print("[bold]Given[/bold]")
    _hanging(console, basis["given"], "-", 3)
    console.print("[bold]Assumed[/bold]")
    _hanging(console, basis["assumed"], "-", 3)
    _print_plan(view, console, today="today (given)")
    _print_curve(view, console, legend=PLAIN_LEGEND)
    _print_candidates(view, console, today="today (given)")


PLAIN_LEGEND = (
    "  verify from: today (--verify-ms), roofline (the given verify, phase by phase as assumed"
    " above), as today (no --model: the same at any width); k = 0: given (the plain rate"
    " given) or predicted (the verify at width 1)"
)
TRACE_LEGEND = (
    "  verify from: measured (a traced width, as traced), fitted (the width model: between"
    " traced widths, or at a traced width whose time the monotone fit replaced), extrap"
    " (extrapolated: past them), roofline (one traced width: phase by phase); basis: what the"
    " point's rate rests on, and its band"
)


def basis(cur: dict[str, Any]) -> str:
    """What today's numbers are, from the ranking's ``basis`` (the model's one definition): as
    traced, at the unprofiled rate (a measured dilation taken out), or anchored to the traced
    run's own rate."""
    kind = cur.get("basis", "traced")
    if kind == "unprofiled":
        dilation = f", dilation {cur['dilation']:.2f}x out" if cur.get("dilation") else ""
        return f"at the unprofiled rate{dilation}"
    if kind == "traced run":
        return "at the traced run's own measured rate"
    return "as traced"


def print_ranking(
    result: dict[str, Any], console: Console | None = None, details: bool = False
) -> None:
    """The decision on one screen; with ``details``, the step, every table and assumption."""
    console = console or Console()
    if not details:
        print_decision(result, console)
        return
    unpadded(console, lambda: _print_details(result, console))


def _print_details(result: dict[str, Any], console: Console) -> None:
    cur = result["current"]
    console.print(
        f"[bold]current[/bold]: verify {cur['verify_ms']:.3f} ms ({basis(cur)}; {cur['mode']},"
        f" width {cur['width'] or '-'}, mean of {counted(cur['verify_steps'], 'step')}, device"
        f" {cur['device']}), cycle"
        f" {cur['cycle_ms']:.3f} ms, accept length {cur['accept_len']:.3f} ->"
        f" [bold]{cur['tokens_per_s']:.1f} tok/s[/bold] per request"
        + (
            f", speedup {cur['speedup']:.2f}x over plain decoding at {cur['decode_ms']:.3f} ms per"
            " step"
            if cur.get("speedup") is not None
            else ""
        )
    )
    _hanging(console, list(cur.get("notes", [])), "-", 3, style="dim")
    if result.get("verdict"):
        console.print("[bold]verdict[/bold]:", highlight=False)
        _hanging(console, [result["verdict"]], "", 1)
    parts = result.get("verdict_parts") or {}
    for caution in parts.get("cautions", []):
        _hanging(console, [caution], "!", 1, style="yellow")
    warnings = [w for w in parts.get("warnings", []) if w != parts.get("decision")]  # said above
    _hanging(console, verdict_warnings(warnings, result["candidates"]), "!", 1, style="yellow")
    _print_plan(result, console)
    _print_curve(result, console)
    _print_candidates(result, console)
    print_load(result, console)


def _print_candidates(
    result: dict[str, Any], console: Console, today: str = "current (measured)"
) -> None:
    """Each candidate alone, its gain over today's cycle; their assumptions; what does not
    apply."""
    cur = result["current"]
    columns = [
        Col("#"),
        Col("candidate", "wrap"),
        Col("verify ms"),
        Col("cycle ms"),
        Col("accept"),
        Col("tok/s"),
        Col("gain over today"),
    ]
    rows = [
        [
            "",
            today,
            f"{cur['verify_ms']:.3f}",
            f"{cur['cycle_ms']:.3f}",
            f"{cur['accept_len']:.2f}",
            f"{cur['tokens_per_s']:.1f}",
            "",
        ]
    ]
    styles: list[str | None] = ["dim"]
    for i, cand in enumerate(result["candidates"], start=1):
        gain = 100 * cand["gain"]
        rows.append(
            [
                str(i),
                cand["name"] + (" (blocked)" if cand.get("blocked_by") else ""),
                f"{cand['verify_ms']:.3f}",
                f"{cand['cycle_ms']:.3f}",
                f"{cand['accept_len']:.2f}",
                f"{cand['tokens_per_s']:.1f}",
                f"{gain:+.1f}%",
            ]
        )
        styles.append("green" if gain > 0 else "red")
    console.print("[bold]Each candidate alone, best first (predicted)[/bold]")
    console.print(fitted_table(console, columns, rows, styles=styles))
    _hanging(console, _hidden_verify(result["candidates"]), "-", 3, style="dim")
    print_assumptions(result["candidates"], console)
    if result.get("skipped"):
        console.print("[dim]not applicable:[/dim]")
        _hanging(
            console,
            [f"{skip['name']}: {skip['reason']}" for skip in result["skipped"]],
            "-",
            3,
            style="dim",
        )


def _print_plan(result: dict[str, Any], console: Console, today: str = "today (measured)") -> None:
    """The stacked plan: each line predicted on top of the ones above it (tok/s cumulative)."""
    plan = result.get("plan") or []
    if not plan:
        return
    cur = result["current"]
    columns = [
        Col("#"),
        Col("then", "wrap"),
        Col("verify ms"),
        Col("cycle ms"),
        Col("tok/s"),
        Col("gain over today"),
    ]
    rows = [
        [
            "",
            today,
            f"{cur['verify_ms']:.3f}",
            f"{cur['cycle_ms']:.3f}",
            f"{cur['tokens_per_s']:.1f}",
            "",
        ]
    ]
    rows += [
        [
            str(i),
            line["name"],
            f"{line['verify_ms']:.3f}",
            f"{line['cycle_ms']:.3f}",
            f"{line['tokens_per_s']:.1f}",
            f"{100 * line['gain']:+.1f}%",
        ]
        for i, line in enumerate(plan, start=1)
    ]
    console.print(
        "[bold]Plan: fixes stacked, each on top of the ones above (predicted, cumulative)[/bold]"
    )
    console.print(fitted_table(console, columns, rows, styles=["dim"] + [None] * len(plan)))
    _hanging(console, _hidden_verify(plan), "-", 3, style="dim")
    gaps = [
        f"not addressed: {g['phase']} {g['ms']:.3f} ms ({100 * g['share']:.0f}%): {g['reason']}"
        for g in result.get("unaddressed") or []
    ]
    _hanging(console, gaps, "-", 3, style="dim")


def _hidden_verify(lines: list[dict[str, Any]]) -> list[str]:
    """Why a cycle can be shorter than its verify: the host/GPU race of the cycle's parts hides
    part of the verify behind the other phases' work (``model.cycle.overlap``)."""
    short = [
        f"{i} ({line['verify_ms'] - line['cycle_ms']:.3f} ms)"
        for i, line in enumerate(lines, start=1)
        if line["cycle_ms"] < line["verify_ms"] - 5e-4
    ]
    if not short:
        return []
    return [
        f"cycle below its verify on line {', '.join(short)}: the host/GPU race hides that much"
        " of the verify behind the other phases' work"
    ]


def _basis_band(point: dict[str, Any]) -> str:
    """The point's basis and band (the rate's), as the one screen words them."""
    if not point.get("basis"):
        return ""
    band = rate_band(point)
    return SHORT.get(point["basis"], point["basis"]) + (
        f" +/-{100 * band:.0f}%" if band is not None else ""
    )


SHORT = {"extrapolated": "extrap", "interpolated": "interp"}  # as the load tables word them


def _print_curve(result: dict[str, Any], console: Console, legend: str = TRACE_LEGEND) -> None:
    """Tokens/s by number of drafts, k = 0 (plain decoding) .. K, in today's execution mode."""
    curve = result.get("draft_curve")
    if not curve:
        return
    best, now = curve["best_num_draft"], curve["current_num_draft"]
    columns = [  # numbers' headers on two lines, words wrapped: at 80 columns k and every
        Col("k"),  # number stay whole
        Col("width"),
        Col("verify\nms"),
        Col("verify\nfrom", "wrap"),
        Col("draft\nms"),
        Col("cycle\nms"),
        Col("accept"),
        Col("tok/s"),
        Col("basis", "wrap"),
        Col("", "wrap"),
    ]
    rows, styles = [], []
    for point in curve["points"]:
        k = point["num_draft"]
        mark = ", ".join(
            w for w, on in (("plain", k == 0), ("today", k == now), ("best", k == best)) if on
        )
        rows.append(
            [
                str(k),
                str(point["width"]),
                f"{point['verify_ms']:.3f}",
                SHORT.get(point.get("verify_source", ""), point.get("verify_source", "")),
                f"{point['draft_ms']:.3f}",
                f"{point['cycle_ms']:.3f}",
                f"{point['accept_len']:.2f}",
                f"{point['tokens_per_s']:.1f}",
                _basis_band(point),
                mark,
            ]
        )
        styles.append("bold" if k == best else ("dim" if k == now else None))
    console.print("[bold]Draft count: tokens/s by k, today's execution mode (predicted)[/bold]")
    console.print(fitted_table(console, columns, rows, styles=styles))
    _hanging(console, [legend.strip()], "", 1)
    if curve.get("server_flags"):  # the command whole on its own line, to copy
        console.print(f"  SGLang flags for k = {best}:", highlight=False)
        console.print(f"      {escape(curve['server_flags'])}", highlight=False, soft_wrap=True)
