"""The load curve in the console: per context length, the best draft count at each batch size
beside plain decoding, where speculation stops paying, where the verify crosses the ridge point,
and what to set in the server. Reads the ``load_curve`` dict of ``--json``."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from verifyprof.model.decision.load_points import rate_band
from verifyprof.report.layout import Col, Console, fitted_table, hanging


class _Once:
    """Prose lines, each wrapped under its indent and said once: what every context shares (the
    ridge point, the switching caveat) is not printed again for the next context."""

    def __init__(self, console: Console) -> None:
        self.console, self.said = console, set()

    def __call__(self, line: str, indent: int = 2, style: str | None = None, bullet="") -> None:
        if line not in self.said:
            self.said.add(line)
            hanging(self.console, [line], bullet, indent - 1, style)


def print_load(result: dict[str, Any], console: Console) -> None:
    """Today's load curve, then the one after the plan's fixes where the answer flips there."""
    say = _Once(console)  # one for both curves: what they share is said once
    _print_curve(result.get("load_curve"), result.get("load_curve_skipped"), "", console, say)
    after = result.get("load_curve_after_plan")
    if after or result.get("load_curve_after_plan_skipped"):
        why = result.get("load_curve_after_plan_skipped")
        _print_curve(after, why, " after the plan's fixes", console, say)


def _print_curve(
    load: dict | None, skipped: str | None, when: str, console: Console, say: _Once
) -> None:
    if not load:
        if skipped:  # once: the curve after the plan may be skipped for today's reason
            say(skipped, 1, "dim")
        return
    today = load["today"]
    ridge = load["ridge"]
    for curve in load["contexts"]:
        console.print(  # within 80 columns
            f"[bold]Load curve{when}, context {curve['context']:g}: best k per batch (today: batch"
            f" {today['batch']}, k = {today['num_draft']})[/bold]"
        )
        rows, styles = _rows(curve, today)
        console.print(fitted_table(console, _columns(), rows, styles=styles))
        for line in _story(curve, ridge, today):
            say(line)
        if curve.get("basis_words"):
            say(curve["basis_words"], style="yellow")
            console.print(
                f"    {escape(curve['measure_command'])}", soft_wrap=True, highlight=False
            )
        if curve.get("k_words"):
            say(curve["k_words"], style="yellow")
    say(load["acceptance"]["words"])
    _print_settings(load.get("server_settings") or {}, console, say, when)
    for note in load.get("notes", []):
        say(note, 4, "dim", "-")


def _columns() -> list[Col]:
    """Headers on two lines: the numbers' columns are as wide as their numbers, so an 80-column
    pipe keeps every number and the verify's bound whole."""
    return [
        Col("batch"),
        Col("best\nk"),
        Col("tok/s\nper req"),
        Col("tok/s\nper GPU"),
        Col("plain\nper req"),
        Col("plain\nper GPU"),
        Col("vs\nplain"),
        Col("basis", "name"),
    ]


def _rows(curve: dict[str, Any], today: dict[str, Any]) -> tuple[list, list]:
    rows, styles = [], []
    for row in curve["rows"]:
        best = next(p for p in row["points"] if p["num_draft"] == row["best_num_draft"])
        plain = row["plain_tokens_per_s"]
        gain = f"{row['best_tokens_per_s'] / plain - 1:+.0%}" if plain else "-"
        rows.append(
            [
                str(row["batch"]),
                _best_k(row),
                f"{row['best_tokens_per_s']:.1f}",
                f"{row['best_tokens_per_s_per_gpu']:.0f}",
                "-" if plain is None else f"{plain:.1f}",
                "-" if plain is None else f"{row['plain_tokens_per_s_per_gpu']:.0f}",
                gain,
                _basis(row, best),
            ]
        )
        here = row["batch"] == today["batch"] and curve["context"] == today["context"]
        styles.append("bold" if here else ("dim" if row["best_num_draft"] == 0 else None))
    return rows, styles


def _best_k(row: dict[str, Any]) -> str:
    """The best k, and the others the band cannot tell from it (``3 (2-4)``)."""
    k, ks = row["best_num_draft"], row.get("best_num_draft_set") or []
    if len(ks) <= 1:
        return str(k)
    return f"{k} ({ks[0]}-{ks[-1]})" if ks == list(range(ks[0], ks[-1] + 1)) else f"{k}*"


BASIS_WORDS = {"measured": "measured", "interpolated": "interp", "extrapolated": "extrap"}


def _basis(row: dict[str, Any], best: dict[str, Any]) -> str:
    """What the row's answer rests on and its band: ``extrap +/-12%``, ``~`` bound marks."""
    basis = row.get("basis") or best.get("basis") or best.get("source", "")
    word = BASIS_WORDS.get(basis, basis)
    band = rate_band(best)  # the row's rate is its best point's
    return f"{word} +/-{band:.0%}" if band and basis != "measured" else word


def _story(curve: dict[str, Any], ridge: dict[str, Any], today: dict[str, Any]) -> list[str]:
    out = []
    out.append(curve["summary"])
    bound = curve["verify_compute_bound_from_batch"]
    k, plain = str(today["num_draft"]), bound.get("0")
    if ridge.get("tokens_per_forward"):
        words = (
            f"{ridge['hardware']}'s ridge point: {ridge['flops_per_byte']:.0f} FLOP/byte, reached"
            f" at {ridge['tokens_per_forward']} tokens per forward"
        )
        if bound.get(k) is not None:
            words += (
                f"; the verify at today's k = {k} turns compute-bound at batch {bound[k]}"
                " (the curve turns there)"
            )
        if plain is not None:
            words += f", plain decoding at batch {plain}"
        out.append(words)
    return out


def _range_words(r: dict[str, Any]) -> str:
    basis = r.get("basis", "")
    band = r.get("band") or 0.0
    return f"{basis}, +/-{band:.0%}" if basis and basis != "measured" else basis or "predicted"


def _print_settings(settings: dict[str, Any], console: Console, say: _Once, when: str) -> None:
    server = settings.get("server")
    versions = settings.get("versions", {})
    if settings.get("note"):
        say(settings["note"], style="yellow")
    for ctx in settings.get("per_context", []):
        if server in (None, "sglang"):
            console.print(
                f"  [bold]SGLang[/bold] ({versions.get('sglang', '')}), context"
                f" {ctx['context']:g}{when}: one setting per load range",
                highlight=False,
            )
            for r in ctx["sglang"]:  # a command whole on its own line, to copy
                first, last = r["batches"]
                wide = r.get("flags") is None  # too wide a band: the capture that measures it
                words = " no flags, the band is too wide; measure it with:" if wide else ""
                console.print(
                    f"    batch {first}-{last} ({_range_words(r)}):{words}", highlight=False
                )
                if wide:
                    line = f"      {escape(r['measure_command'])}"
                else:
                    line = f"      {escape(r['flags'])}"
                console.print(line, soft_wrap=True, highlight=False)
            if (ctx.get("switching") or {}).get("sglang"):
                say(ctx["switching"]["sglang"], 4, "dim")
        if server in (None, "vllm"):
            cfg = ctx.get("vllm_speculative_config")
            console.print(
                f"  [bold]vLLM[/bold] ({versions.get('vllm', '')}), context"
                f" {ctx['context']:g}{when}:"
                + (
                    " (with your method and model; ranges "
                    + ", ".join(_range_words(b) for b in ctx.get("vllm_basis") or [])
                    + ")"
                    if cfg
                    else f" {ctx['vllm_withheld']}"
                    if ctx.get("vllm_withheld")
                    else " no speculative config (plain decoding at every batch listed)"
                ),
                highlight=False,
            )
            if cfg:
                line = f"      --speculative-config '{escape(cfg)}'"
                console.print(line, highlight=False, soft_wrap=True)
            if (ctx.get("switching") or {}).get("vllm"):
                say(ctx["switching"]["vllm"], 4, "dim")
