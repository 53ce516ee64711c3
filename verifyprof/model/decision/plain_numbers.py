"""``whatif --verify-ms ... --accept-len ...``: the cycle, tokens/s, speedup, break-evens and
the verdict, from plain numbers (no trace)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import read_manifest
from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.throughput import Cycle, decode_ms_from
from verifyprof.model.decision.plain_load import plain_load
from verifyprof.model.decision.plain_ranking import plain_ranking, refuse_unusable, wants_ranking
from verifyprof.model.decision.plain_roofline import ROOFLINE_SOURCE, roofline_step_ms
from verifyprof.model.decision.speculate import PlainDecoding
from verifyprof.model.decision.verdict import Verdict, decision_words
from verifyprof.model.inputs.given import Files, NoFiles
from verifyprof.model.inputs.leviathan import (
    expected_tokens,
    operations_factor,
    optimal_gamma,
    walltime_improvement,
)
from verifyprof.model.inputs.options import WhatifOptions, _check_options, acceptance, decode_inputs


@dataclass(frozen=True)
class PlainAnswer:
    """Plain numbers' answer as a run gives a ranking: its JSON (a trace ranking's schema), the
    load curve (JSON; None and why not) and the verdict, where a trace's run has them."""

    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.data

    @property
    def load(self) -> dict[str, Any] | None:
        return self.data.get("load_curve")

    @property
    def load_skipped(self) -> str | None:
        return self.data.get("load_curve_skipped")


def plain_answer(o: WhatifOptions, files: Files | None = None) -> PlainAnswer:
    """:func:`plain_numbers` as a run's answer (:attr:`verifyprof.pipeline.run.Run.plain`)."""
    return PlainAnswer(plain_numbers(o, files))


def plain_numbers(o: WhatifOptions, files: Files | None = None) -> dict[str, Any]:
    """``whatif --verify-ms ... --accept-len ...``: the cycle, tokens/s, speedup and break-evens,
    in the schema of a trace's ranking (``one_schema``); ``files``: what the pipeline reads for
    the options (:class:`verifyprof.pipeline.model_files.PlainFiles`; the model opens none)."""
    if files is None and (o.model or o.hardware or o.manifest):
        raise ValueError("plain_numbers: the pipeline reads --model, --hardware, --manifest")
    return one_schema(_numbers(o, files or NoFiles()))


# today's cycle as plain numbers give it: a trace's ``current`` holds the same fields
CURRENT_KEYS = (
    "accept_len",
    "accept_len_source",
    "verify_ms",
    "draft_ms",
    "draft_source",
    "overhead_ms",
    "cycle_ms",
    "batch",
    "num_draft",
    "tokens_per_s",
    "batch_tokens_per_s",
    "decode_ms",
    "baseline_tokens_per_s",
    "speedup",
    "cycle_cost_decode_steps",
    "break_even_verify_ms",
    "break_even_accept_len",
)


def one_schema(flat: dict[str, Any]) -> dict[str, Any]:
    """Plain numbers in a trace ranking's schema: today's cycle under ``current``, plain
    decoding, the draft-count curve, the plan and the candidates at the top level (empty where
    plain numbers give none); what only plain numbers have (``basis``, ``leviathan``,
    ``survival``) beside them."""
    flat = dict(flat)
    ranking = flat.pop("ranking", None) or {}
    current = {k: flat.pop(k) for k in CURRENT_KEYS if k in flat}
    current |= {"source": "plain numbers", "basis": "given"}
    if "verify_phases_ms" in ranking:
        current["verify_phases_ms"] = ranking.pop("verify_phases_ms")
    for point in (ranking.get("draft_curve") or {}).get("points", []):
        if point.get("basis") == "measured":  # today's k and plain decoding: the user's numbers
            point["basis"] = "given"
    return {
        "verdict": flat.pop("verdict", None),
        "verdict_parts": flat.pop("verdict_parts", None),
        "current": current,
        "measured": None,  # what a trace measures directly: plain numbers have no trace
        "plain_decoding": ranking.get("plain_decoding", flat.pop("plain_decoding", None)),
        "draft_curve": ranking.get("draft_curve"),
        "load_curve": flat.pop("load_curve", None),
        "plan": ranking.get("plan", []),
        "relative_to": flat.pop("relative_to", {}),
        "unaddressed": ranking.get("unaddressed", []),
        "candidates": ranking.get("candidates", []),
        "skipped": ranking.get("skipped", []),
        **flat,
    }


def _numbers(o: WhatifOptions, files: Files) -> dict[str, Any]:
    _check_options(o)
    manifest = read_manifest(o.manifest, data=files.manifest()) if o.manifest else None
    acc = acceptance(o, manifest)
    refuse_unusable(o, acc.num_draft)
    asked = o  # what was given (the context below may be the stated default)
    if o.model and o.context is None and not o.contexts:
        o = replace(o, context=DEFAULT_CONTEXT)
    ranked = wants_ranking(o)
    out: dict[str, Any] = {}
    if o.alpha is not None:
        out["leviathan"] = _leviathan(o)
    if acc.survival is not None and o.alpha is None:
        depth = max(acc.survival.depth, acc.num_draft or 0)
        out["survival"] = {
            "s": list(acc.survival.s),
            "accept_len_by_num_draft": [acc.survival.accept_len(k) for k in range(1, depth + 1)],
        }
    if o.verify_ms is None:
        if "leviathan" in out and "walltime_improvement" in out["leviathan"]:
            return {"accept_len": acc.accept_len, "accept_len_source": acc.source} | out
        raise VerifyprofError(
            "give --verify-ms (the verify step's time) or --from a breakdown/trace"
        )
    if acc.accept_len is None:
        raise VerifyprofError(
            "accept length unknown: give --accept-len, --alpha/--num-draft, --survival or"
            " --manifest"
        )
    baseline_tps, decode = decode_inputs(o, manifest)
    draft_ms, draft_source = _draft(o)
    cycle = Cycle(
        verify_ms=o.verify_ms,
        accept_len=acc.accept_len,
        draft_ms=draft_ms,
        overhead_ms=o.overhead_ms or 0.0,
        batch=o.batch or 1,
        decode_ms=decode_ms_from(baseline_tps, decode),
    )
    source = "--baseline-tps" if baseline_tps is not None else "--decode-ms"
    if not o.decode_given and cycle.decode_ms is not None:
        source = f"the rate in {o.manifest}"
    roof = None  # plain decoding never from the verify's own time: the model's roofline
    if cycle.decode_ms is None and ranked and acc.num_draft is not None:
        roof = roofline_step_ms(o, files)
        if roof is not None:
            cycle = replace(cycle, decode_ms=roof)
            source = ROOFLINE_SOURCE
    result = (
        cycle.to_json()
        | {"accept_len_source": acc.source, "draft_source": draft_source}
        | out
        | {"relative_to": relative_to(cycle, source, ranked and acc.num_draft is not None)}
        | _load(o, cycle, acc, files)
        | ({"num_draft": acc.num_draft} if acc.num_draft else {})  # the most it accepts, + 1
    )
    if ranked and acc.num_draft is not None:
        baseline = source if cycle.decode_ms and roof is None else None
        given = _given(asked, acc.source, draft_source, baseline)
        ranking = plain_ranking(o, cycle, acc.num_draft, acc.survival, given, source, roof, files)
        if o is not asked and o.context == DEFAULT_CONTEXT:
            ranking["basis"]["assumed"].insert(0, CONTEXT_NOTE)
        return result | ranking
    verdict, plain = plain_verdict(cycle, source), plain_decoding(cycle, source)
    return result | {
        "verdict": verdict.text(),
        "verdict_parts": verdict.to_json(),
        "plain_decoding": plain.to_json() if plain is not None else None,
    }


DEFAULT_CONTEXT = 2048.0  # tokens, where neither the trace, the manifest nor --context says
CONTEXT_NOTE = (
    f"context {DEFAULT_CONTEXT:g} tokens per request: a stated default (no --context, and the"
    " trace and manifest say none); attention reads that much KV cache"
)


def _draft(o: WhatifOptions) -> tuple[float, str]:
    """The draft's time per cycle and where it came from: --draft-ms, or Thm 3.8's cost model
    (c target steps per draft) with --draft-cost-ratio, else none (priced at 0, and said so)."""
    if o.draft_ms is None and o.draft_cost_ratio is not None and o.num_draft:
        assert o.verify_ms is not None
        return o.num_draft * o.draft_cost_ratio * o.verify_ms, (
            f"{counted(o.num_draft, 'draft')} x c {o.draft_cost_ratio:g} x verify"
            f" {o.verify_ms:g} ms (Thm 3.8's model)"
        )
    return o.draft_ms or 0.0, "--draft-ms" if o.draft_ms else "none given"


def _leviathan(o: WhatifOptions) -> dict[str, Any]:
    """Leviathan et al.'s i.i.d. numbers: expected tokens, and with c Thm 3.8 and 3.11."""
    assert o.num_draft is not None
    lev: dict[str, Any] = {
        "alpha": o.alpha,
        "num_draft": o.num_draft,
        "expected_tokens": expected_tokens(o.alpha, o.num_draft),
    }
    if o.draft_cost_ratio is not None:
        best_k, best = optimal_gamma(o.alpha, o.draft_cost_ratio)
        lev |= {
            "draft_cost_ratio": o.draft_cost_ratio,
            "walltime_improvement": walltime_improvement(o.alpha, o.num_draft, o.draft_cost_ratio),
            "operations_factor": operations_factor(o.alpha, o.num_draft, o.draft_cost_ratio),
            "optimal_num_draft": best_k,
            "optimal_walltime_improvement": best,
        }
    return lev | {"relative_to": _leviathan_base(o)}


def relative_to(cycle: Cycle, baseline_source: str, ranked: bool) -> dict[str, str | None]:
    """What each ratio of plain numbers is over: ``speedup`` plain decoding at the given rate;
    when ranked, a candidate's ``gain`` today's cycle (the given numbers), a plan line's
    ``gain`` today's cycle with every fix above it, its ``step_gain`` the plan line above."""
    plain = (
        f"plain decoding at {cycle.baseline_tokens_per_s:.1f} tok/s ({cycle.decode_ms:.3f} ms"
        f" per step, {baseline_source})"
        if cycle.decode_ms is not None
        else None
    )
    today = f"today's cycle from the given numbers ({cycle.tokens_per_s:.1f} tok/s)"
    if not ranked:
        return {"speedup": plain}
    return {
        "speedup": plain,
        "gain": today,
        "plan_gain": today + ", with every fix above the line",
        "step_gain": "the plan line above",
    }


def _leviathan_base(o: WhatifOptions) -> str:
    """Thm 3.8's walltime improvement is over plain decoding by the target model in Leviathan's
    cost model: a plain step costs one target forward, as much as the verify of k + 1 tokens."""
    step = f" ({o.verify_ms:g} ms, --verify-ms)" if o.verify_ms is not None else ""
    return (
        "plain decoding in Thm 3.8's cost model: a plain step costs one target forward, as much"
        f" as the verify{step}, not --baseline-tps"
    )


def _given(
    o: WhatifOptions, accept_source: str, draft_source: str, baseline: str | None
) -> list[str]:
    out = [f"--verify-ms {o.verify_ms:g}", f"accept length from {accept_source}"]
    out += [f"draft time from {draft_source}"] if o.draft_ms or o.draft_cost_ratio else []
    out += [f"--overhead-ms {o.overhead_ms:g}"] if o.overhead_ms else []
    out += [f"--batch {o.batch}"] if o.batch else []
    out += [f"--context {o.context:g}"] if o.context else []
    out += [f"plain decoding from {baseline}"] if baseline else []
    return out


def _load(o: WhatifOptions, cycle: Cycle, acc, files: Files) -> dict[str, Any]:
    """The load curve, when asked for (``--batch`` or ``--context`` lists, or ``--model``)."""
    if not (o.batches or o.contexts or o.model):
        return {}
    return plain_load(
        cycle,
        acc.num_draft or o.num_draft,
        model=files.model(),
        hardware=files.hardware(),
        batches=o.batches,
        contexts=o.contexts,
        context=o.context or 0.0,
        survival=acc.survival,
        tp=o.tp or 1,
    )


def plain_verdict(cycle: Cycle, baseline_source: str) -> Verdict:
    """The verdict of plain numbers: the cycle, and speculate or not when a baseline is given."""
    verdict = Verdict(group="plain numbers (no trace)", step=cycle.words())
    plain = plain_decoding(cycle, baseline_source)
    if plain is None:
        verdict.reasons.append(
            "no plain-decoding rate to compare with: give --baseline-tps or --decode-ms"
        )
        return verdict
    verdict.decision = decision_words(plain)
    if plain.speculation_loses:
        verdict.warnings.append(verdict.decision)
    return verdict


def plain_decoding(cycle: Cycle, baseline_source: str) -> PlainDecoding | None:
    """Plain decoding at the given rate (one token a step), beside today's cycle; None without
    a rate."""
    if cycle.decode_ms is None:
        return None
    return PlainDecoding(Cycle(verify_ms=cycle.decode_ms, accept_len=1.0), baseline_source, cycle)
