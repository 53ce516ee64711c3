"""whatif's default console: the decision on one screen (issue 33). The verdict, today against
plain decoding, the plan's top fixes, the best draft count and the load answer (k and settings
per load range), each with its basis (measured, given, fitted, extrapolated, roofline, predicted,
assumed). Every table and assumption is behind ``--details``. Lines are wrapped here, never
padded, and a server command prints whole on its own line, so it can be copied. Reads the same
dict as ``--json``."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.markup import escape

from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.decision.load_points import rate_band
from verifyprof.report.layout import Console

NUMBERS = ("Today:", "After the")  # the verdict's sentences the lines below say in numbers
AFTER = "With the plan's fixes"  # the sentence saying what the plan changes: a line of its own
TOP_FIXES = 3  # the plan's fixes shown; the rest with --details
MAX_RANGES = 4  # load ranges whose SGLang command is shown; the rest with --details
DETAILS = (
    "more: --details (the step and its notes, every candidate and its assumptions, the"
    " draft-count curve, the load tables)"
)


def print_decision(result: dict[str, Any], console: Console) -> None:
    """The decision in at most about 40 lines at 80 columns."""
    width = max(console.width, 40)
    out: list[str] = []
    for block in (_verdict, _today, _plan, _best_k, _load):
        out += block(result, width)
    out += _wrap(DETAILS, width)
    for line in out:
        console.print(escape(line), highlight=False, soft_wrap=True)


def _wrap(text: str, width: int, indent: str = "", first: str | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent + "  ",
        break_on_hyphens=False,
        break_long_words=False,
    )


def _sentences(text: str | None) -> list[str]:
    """A verdict part's sentences (a sentence ends in '. ' followed by a capital)."""
    if not text:
        return []
    out, start = [], 0
    for i in range(len(text) - 2):
        if text[i] == "." and text[i + 1] == " " and text[i + 2].isupper():
            out.append(text[start : i + 1])
            start = i + 2
    out.append(text[start:])
    return out


def _verdict(result: dict[str, Any], width: int) -> list[str]:
    """Today's answer first; what the plan's fixes change on a line of its own; then each
    caution (a given input the trace contradicts, a rate that disagrees) and reason."""
    parts = result.get("verdict_parts") or {}
    decision = [s for s in _sentences(parts.get("decision")) if not s.startswith(NUMBERS)]
    after = [s for s in decision if s.startswith(AFTER)]
    lead = " ".join(s for s in decision if not s.startswith(AFTER)) or (
        result.get("verdict") or "no verdict"
    )
    lines = _wrap(lead, width, first="Verdict: ", indent="")
    for sentence in after:
        lines += _wrap(sentence, width)
    for line in [*(parts.get("cautions") or []), *(parts.get("reasons") or [])]:
        lines += _wrap(line, width, first="  ! ", indent="  ")
    return lines


def _basis_of_plain(plain: dict[str, Any]) -> str:
    if plain.get("measured"):
        source = plain.get("source", "")
        return "given" if source.startswith("--") or "given" in source else "measured"
    return f"predicted, {plain.get('mode', '')}".rstrip(", ")


def _today(result: dict[str, Any], width: int) -> list[str]:
    cur = result.get("current") or {}
    plain = result.get("plain_decoding")
    spec_basis = "given" if cur.get("source") == "plain numbers" else "measured"
    k = cur.get("num_draft")
    accept = f"accept length {cur['accept_len']:.2f}"
    if cur.get("accept_len_basis") == "given" and spec_basis != "given":
        accept += " given"
    if cur.get("speculative") is False:  # no speculative steps: the step, not a cycle
        return _wrap(
            f"Today: the step {cur['cycle_ms']:.3f} ms ({spec_basis}), {cur['tokens_per_s']:.1f}"
            f" tok/s at {accept}",
            width,
        )
    spec = (
        f"Today: speculating {cur['tokens_per_s']:.1f} tok/s ({spec_basis}: cycle"
        f" {cur['cycle_ms']:.3f} ms, {accept}" + (f", k={k}" if k else "") + ")"
    )
    if plain is None:
        spec += "; plain decoding unknown: give --baseline-tps or --decode-ms"
    else:
        spec += (
            f" against plain decoding {plain['tokens_per_s']:.1f} tok/s ({_basis_of_plain(plain)}:"
            f" {plain['decode_ms']:.3f} ms a step)"
        )
        alt = plain.get("alternative")
        if alt and plain.get("flips_with_mode"):
            spec += f"; {alt['mode']}, plain decoding would make {alt['tokens_per_s']:.1f}"
    return _wrap(spec, width)


def _plan(result: dict[str, Any], width: int) -> list[str]:
    plan = result.get("plan") or []
    if not plan:
        return ["Plan: no modelled fix raises today's rate"]
    shown = plan[:TOP_FIXES]
    if plan[-1]["name"] == "no_speculation" and plan[-1] not in shown:
        shown = plan[: TOP_FIXES - 1] + [plan[-1]]  # the decision's last step always shows
    lines = ["Plan (predicted, each on top of the ones above; tok/s, gain over today):"]
    name_width = max(len(step["name"]) for step in shown)
    for n, step in enumerate(shown):
        i = plan.index(step) + 1
        if i > n + 1 and not lines[-1].endswith("--details)"):
            lines.append(f"  ... ({i - n - 1} more in --details)")
        name = "turn speculation off" if step["name"] == "no_speculation" else step["name"]
        lines.append(
            f"  {i}. {name:<{max(name_width, 20)}} {step['tokens_per_s']:8.1f}"
            f"  {100 * step['gain']:+.0f}%"
        )
    if len(plan) > plan.index(shown[-1]) + 1:
        lines.append(f"  ... ({len(plan) - plan.index(shown[-1]) - 1} more in --details)")
    return lines


def _best_k(result: dict[str, Any], width: int) -> list[str]:
    curve = result.get("draft_curve")
    if not curve:
        return []
    best = next(p for p in curve["points"] if p["num_draft"] == curve["best_num_draft"])
    top = max(p["num_draft"] for p in curve["points"])
    basis = best.get("basis") or best.get("verify_source") or "predicted"
    band = rate_band(best)  # the rate's own; "the between-k band" below compares k by ``band``
    if band and basis not in ("measured", "given"):  # a given number has no band
        basis += f" +/-{band:.0%}"
    when = " today" if _after_plan(result) else ""  # a load after the plan stands below
    ks = curve.get("best_num_draft_set") or []
    also = f", k={ks[0]}-{ks[-1]} within the between-k band" if len(ks) > 1 else ""
    line = (
        f"Best draft count{when}: k={best['num_draft']}, {best['tokens_per_s']:.1f} tok/s"
        f" ({basis}{also};"
        f" today k={curve['current_num_draft']})"
    )
    if best["num_draft"] == top:
        line += f"; k={top} is the largest tried: the best may lie beyond it"
    if best["num_draft"] == 0:
        line += ": plain decoding"
    if not curve.get("draft_cost_known", True):
        line += "; drafts priced at 0 (none measured or given): give --draft-ms"
    return _wrap(line, width)


def _load(result: dict[str, Any], width: int) -> list[str]:
    load = result.get("load_curve")
    if not load:
        skipped = result.get("load_curve_skipped")
        return _wrap(f"Load: {skipped}", width) if skipped else []
    lines: list[str] = []
    for curve in load["contexts"]:
        when = " today" if _after_plan(result) else ""
        head = f"Load{when}, context {curve['context']:g}"
        if not curve.get("range_basis"):
            head += f" ({_load_basis(curve)})"
        lines += _wrap(f"{head}: {_ranges_words(curve)}", width)
        if curve.get("extrapolated_from_batch") is not None:  # where measurements stop
            band = max(  # how far the rows' rates may lie, as the load table shows them
                (rate_band(r) or 0.0)
                for r in curve["rows"]
                if r["batch"] >= curve["extrapolated_from_batch"]
            )
            how = f"up to +/-{band:.0%}" if band > 0 else "the roofline, no band: unmeasured"
            lines += _wrap(
                f"batch {curve['extrapolated_from_batch']} and up extrapolated ({how});"
                " measured by:",
                width,
                first="  ! ",
                indent="  ",
            )
            lines.append(f"    {curve['measure_command']}")
    if load.get("context_assumed"):  # no capture states its context: say so, and how
        lines += _wrap(
            f"context unknown (rows assumed at {load['today']['context']:g} tokens): give"
            " --capture-context N",
            width,
            first="  ! ",
            indent="  ",
        )
    if not (result.get("draft_curve") or {}).get("draft_cost_known", True):
        lines += _wrap(
            "every k > 0 below rests on drafts priced at 0 (none measured or given): give"
            " --draft-ms before using these settings",
            width,
            first="  ! ",
            indent="  ",
        )
    lines += _settings(load.get("server_settings") or {}, load["contexts"][0]["context"])
    return lines + _load_after(result, width)


def _ranges_words(curve: dict[str, Any]) -> str:
    """A context's load ranges: batches, the best k and its basis."""
    return "; ".join(
        (f"batch {r['batches'][0]}-{r['batches'][1]} ")
        + ("plain decoding" if r["k"] == 0 else f"k={r['k']}")
        + f" ({_range_basis(r)})"
        for r in curve.get("range_basis") or []
    ) or "; ".join(
        (f"batch {a}-{b} " if b != a else f"batch {a} ")
        + ("plain decoding" if k == 0 else f"k={k}")
        for a, b, k in curve.get("ranges") or []
    )


def _load_after(result: dict[str, Any], width: int) -> list[str]:
    """The load curve after the plan's fixes, where the answer flips there: today's context's
    ranges on a line of their own (the settings above are today's)."""
    after = result.get("load_curve_after_plan")
    if not after or not after.get("contexts"):
        return []
    curve = after["contexts"][0]
    return _wrap(
        f"Load after the plan, context {curve['context']:g}: {_ranges_words(curve)}", width
    )


def _after_plan(result: dict[str, Any]) -> bool:
    """Whether a load curve after the plan's fixes stands beside today's (the verdict flips)."""
    return bool(result.get("load_curve_after_plan"))


def _range_basis(r: dict[str, Any]) -> str:
    basis, band = r.get("basis", "predicted"), r.get("band") or 0.0
    return basis if basis == "measured" or not band else f"{basis} +/-{band:.0%}"


def _load_basis(curve: dict[str, Any]) -> str:
    """The rows' basis (issue 32's ``basis`` and ``band`` where present, else ``source``)."""
    kinds: list[str] = []
    band = 0.0
    for row in curve["rows"]:
        for point in row["points"]:
            kind = point.get("basis") or (
                "measured" if "measured" in str(point.get("source", "")) else "roofline"
            )
            band = max(band, float(rate_band(point) or 0.0))
            if kind not in kinds:
                kinds.append(kind)
    return "/".join(kinds) + (f", within {band:.0%}" if band else "")


def _settings(settings: dict[str, Any], context: float) -> list[str]:
    """Today's context's settings: a command per load range, whole on its own line."""
    server = settings.get("server")
    ctx = next((c for c in settings.get("per_context", []) if c["context"] == context), None)
    if ctx is None:
        return []
    lines: list[str] = []
    if server in (None, "sglang"):
        lines.append(f"  SGLang, context {context:g}:")
        for r in ctx["sglang"][:MAX_RANGES]:
            first, last = r["batches"]
            batches = f"{first}-{last}" if last != first else f"{first}"
            if r.get("flags") is None:  # too wide a band to copy: the capture that measures it
                lines += [
                    f"    batch {batches}: no flags (+/-{r['band']:.0%} band); measure it:",
                    f"    {r['measure_command']}",
                ]
                continue
            lines += [f"    batch {batches}:", f"      {r['flags']}"]
        if len(ctx["sglang"]) > MAX_RANGES:
            more = counted(len(ctx["sglang"]) - MAX_RANGES, "more range")
            lines.append(f"    ... ({more} in --details)")
    if server in (None, "vllm"):
        cfg = ctx.get("vllm_speculative_config")
        lines.append(f"  vLLM, context {context:g}:")
        if cfg:
            lines.append(f"      --speculative-config '{cfg}'")
        elif ctx.get("vllm_withheld"):
            lines.append(f"      {ctx['vllm_withheld'].split('; measure it with')[0]}")
        else:
            lines.append("      no speculative config (plain decoding at every batch listed)")
    return lines
