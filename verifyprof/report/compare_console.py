"""Rich output of ``verifyprof compare``. Reads the same dict as ``--json`` (schema
``verifyprof.compare/1``)."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from verifyprof.contracts.plumbing.text import counted
from verifyprof.report.layout import Console


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _colour(delta: float | None) -> str:
    if delta is None or abs(delta) < 1e-9:
        return ""
    return "red" if delta > 0 else "green"


def print_compare(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    b, a = data["before"], data["after"]
    for label, side in (("before", b), ("after", a)):
        console.print(
            f"[bold]{label}[/bold]: {escape(side['source'])}  ({escape(side['step'])},"
            f" {side['mode']}, width {side['width'] or '-'}, {counted(side['steps'], 'step')},"
            f" {side['devices']} device(s), {escape(', '.join(side['gpus']) or '-')})",
            highlight=False,
        )
    for note in data.get("notes", []):
        console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    if data["mode_switch"] and not data["warnings"]:
        console.print(f"verify mode changed: {data['mode_switch']}")
    for warning in data["warnings"]:
        console.print(f"[bold red]{escape(warning)}[/bold red]")
    what = _step_word(b["step"])
    _print_titled(console, _phase_table(data, what))
    _print_ranks(console, data["ranks"], what)
    _print_families(console, data["kernel_families"])
    _print_predictions(console, data)
    colour = {"faster": "green", "slower": "red", "no change": "", "not comparable": "yellow"}[
        data["verdict"]
    ]
    line = escape(data["verdict_line"])
    console.print(
        f"[bold {colour}]{line}[/]" if colour else f"[bold]{line}[/bold]", highlight=False
    )
    gate = data.get("gate")
    if gate is not None:
        console.print(
            f"gate {gate['pct']:g}%: "
            + (
                "[bold red]FAILED[/bold red] (verify slower by more than the gate)"
                if gate["failed"]
                else "passed"
            )
        )


def _print_titled(console: Console, table: Table) -> None:
    """The table's title on a line of its own, wrapped at the console's width (rich wraps a title
    at the table's own width and pads it with spaces), then the table."""
    title, table.title = table.title, None
    plain = Text.from_markup(str(title or "")).plain
    for line in textwrap.wrap(plain, max(console.width, 20), break_on_hyphens=False):
        console.print(line, markup=False, highlight=False)
    console.print(table)


def _phase_table(data: dict[str, Any], what: str) -> Table:
    """The step per phase before and after, its cost (traced, and at the unprofiled rate where
    a side measured its dilation) and counts."""
    b, a = data["before"], data["after"]
    table = Table(
        title=f"{what.capitalize()} step per phase: {escape(table_label(data))}",
        title_justify="left",
    )
    for col in ("phase", *side_headers(data), "delta", "delta %"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for row in data["phases"]:
        style = _colour(row["delta_ms"])
        table.add_row(
            row["phase"],
            _ms(row["before_ms"]),
            _ms(row["after_ms"]),
            f"[{style}]{row['delta_ms']:+.3f}[/]" if style else f"{row['delta_ms']:+.3f}",
            _pct(row["delta_pct"]),
        )
    v = data["verify"]
    unprofiled = [side.get("unprofiled_verify_ms") for side in (b, a)]
    table.add_row(
        f"[bold]{escape(what)} {v['measure']} (traced)[/bold]",
        _ms(v["before_ms"]),
        _ms(v["after_ms"]),
        f"{v['delta_ms']:+.3f}",
        _pct(v["delta_pct"]),
        end_section=not any(u is not None for u in unprofiled),
    )
    if any(u is not None for u in unprofiled):
        both = None not in unprofiled
        table.add_row(
            f"{escape(what)} at the unprofiled rate (whatif's)",
            _ms(unprofiled[0]),
            _ms(unprofiled[1]),
            f"{unprofiled[1] - unprofiled[0]:+.3f}" if both else "-",
            _pct(100 * (unprofiled[1] / unprofiled[0] - 1) if both and unprofiled[0] else None),
            end_section=True,
        )
    for key, count in data["counts"].items():
        table.add_row(
            f"{key} per step",
            f"{count['before']:.1f}",
            f"{count['after']:.1f}",
            f"{count['delta']:+.1f}",
            "",
        )
    return table


def side_headers(data: dict[str, Any]) -> tuple[str, str]:
    """The before and after columns' headers: with the device of each where they differ (each
    side is its critical device's steps)."""
    b, a = data["before"], data["after"]
    if b["device"] == a["device"]:
        return "before", "after"
    return f"before (device {b['device']})", f"after (device {a['device']})"


def table_label(data: dict[str, Any]) -> str:
    """What compare's numbers are: the mean step of which group on which device, as traced (and
    at the unprofiled rate, whatif's basis, where a capture measured the profiler's dilation)."""
    b, a = data["before"], data["after"]
    groups = (
        f"{b['group']}, device {b['device']}"
        if (b["group"], b["device"]) == (a["group"], a["device"])
        else f"before {b['group']}, device {b['device']}; after {a['group']}, device {a['device']}"
    )
    dilated = [
        f"{label} {side['dilation']:.2f}x"
        for label, side in (("before", b), ("after", a))
        if side.get("dilation")
    ]
    unprofiled = (
        f"; the profiler's dilation ({', '.join(dilated)}) is taken out only in the"
        " 'unprofiled rate' row, as whatif states it"
        if dilated
        else ""
    )
    return f"mean ms per step as traced ({groups}; the group whatif models){unprofiled}"


def _step_word(step: str) -> str:
    """What the compared step is called: 'verify' for verify steps, else its own name (a whole
    trace)."""
    return "verify" if "verify" in step else step.replace("_", "-")


def _print_ranks(console: Console, ranks: list[dict[str, Any]], what: str = "verify") -> None:
    if len(ranks) < 2:
        return
    table = Table(
        title=f"Per rank (mean {escape(what)} wall ms per step, as traced)", title_justify="left"
    )
    for col in ("rank", "before", "after", "delta", "delta %"):
        table.add_column(col, justify="left" if col == "rank" else "right")
    for row in ranks:
        table.add_row(
            escape(row["rank"]),
            _ms(row["before_ms"]),
            _ms(row["after_ms"]),
            "-" if row["delta_ms"] is None else f"{row['delta_ms']:+.3f}",
            _pct(row["delta_pct"]),
        )
    _print_titled(console, table)


def _print_families(console: Console, families: dict[str, Any]) -> None:
    if not families.get("available"):
        console.print(
            f"[dim]kernel families: {escape(families.get('reason', 'not available'))}[/dim]"
        )
        return
    console.print(
        f"kernel families in {escape(families.get('scope', 'the verify ranges'))}:"
        f" {families['families_before']} ->"
        f" {families['families_after']}, {families['appeared_count']} appeared,"
        f" {families['vanished_count']} vanished"
    )
    for key, sign in (("appeared", "+"), ("vanished", "-")):
        for row in families[key]:
            ms = row["after_ms"] if key == "appeared" else row["before_ms"]
            console.print(
                f"  {sign} {escape(row['family'])} ({row['phase']}, {ms:.3f} ms over the trace,"
                " as traced)",
                highlight=False,
            )


# (label, key of predicted_<key> / measured_<key>, its error's key, format): console and HTML
PREDICTION_ROWS = (
    ("verify ms", "verify_ms", "verify_error_pct", ".3f"),
    ("cycle ms", "cycle_ms", "cycle_error_pct", ".3f"),
    ("tok/s", "tokens_per_s", "tokens_per_s_error_pct", ".1f"),
)


def _print_predictions(console: Console, data: dict[str, Any]) -> None:
    if data.get("prediction_note"):
        console.print(f"[dim]prediction check: {escape(data['prediction_note'])}[/dim]")
    if not data["predictions"]:
        return
    for p in data["predictions"]:
        table = Table(
            title=(
                f"Prediction check: BEFORE's {p['candidate']} vs AFTER measured (accept length"
                f" {p['accept_len']:.3f}; mean steps; predicted {p.get('predicted_basis')},"
                f" measured {p.get('measured_basis')})"
            ),
            title_justify="left",
        )
        for col in ("", "predicted", "measured", "error"):
            table.add_column(col, justify="left" if not col else "right")
        for label, key, error, fmt in PREDICTION_ROWS:
            table.add_row(
                label,
                f"{p[f'predicted_{key}']:{fmt}}",
                f"{p[f'measured_{key}']:{fmt}}",
                _pct(p[error]),
            )
        _print_titled(console, table)
        console.print(
            f"  [dim]the change seen: {escape('; '.join(p['change']))}; modelled by"
            f" {escape(', '.join(p['applied']))}[/dim]"
        )
        if p.get("not_modelled"):
            console.print(
                f"  [yellow]also changed, which no candidate models (not in the prediction):"
                f" {escape('; '.join(p['not_modelled']))}[/yellow]"
            )
