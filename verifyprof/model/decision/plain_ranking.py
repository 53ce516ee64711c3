"""Plain numbers ranked like a trace: with ``--num-draft`` (and ``--model --hardware [--link]
--tp``), ``whatif --verify-ms`` ranks the candidates that can be had from numbers alone (the
draft count and its curve, the allreduce, a better drafter) on a verify whose phases are assumed
from the roofline, and says which numbers were given and which were assumed.

The verify of plain numbers has no kernels to look at, so it is split by the model: its GEMM and
attention phases at their roofline floor on the hardware, its allreduces at the link model's time
(every one exposed), and the rest (what the kernels lose to the floor, norms, sampling, launches,
the host) one part that no fix here changes and that stays the same at any width. Fixes that need
the kernels (graphs, fusion, host overhead, kernel floors) are not ranked: they need a trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifyprof.contracts import phases
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.decision.candidates import Ranking, rank_candidates, verdict_of
from verifyprof.model.decision.plain_load import numbers_profile
from verifyprof.model.decision.plain_roofline import (
    PEAK_DTYPE,
    REST,
    flips_between,
    hedge,
    roofline_floors,
)
from verifyprof.model.decision.speculate import draft_curve
from verifyprof.model.decision.verdict import Verdict
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Scenario
from verifyprof.model.fixes.registry import NO_SPECULATION
from verifyprof.model.inputs.acceptance import Survival
from verifyprof.model.inputs.given import Files, NoFiles
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.options import WhatifOptions
from verifyprof.model.inputs.profile import VerifyProfile

# Why a fix that needs a trace (the registry's needs_trace) is not ranked, unless it says its own.
NEEDS_TRACE = (
    "needs a trace: plain numbers have no kernels, launches or host time to change (the verify's"
    " phases here are the roofline's)"
)
ONE_PART = (
    "the verify as one number (no --model and --hardware to split it): no fix from plain numbers"
    " changes it"
)
REST_WORDS = (
    "what the roofline does not explain (the kernels' loss to their floor, norms, sampling,"
    " launches, the host): no fix from plain numbers changes it; a trace splits it"
)
AT_FLOOR = "at its roofline floor, as plain numbers assume: no faster kernel is modelled"
PER_CALL = " per call (the link model's, as assumed above: no trace measured it)"


def wants_ranking(o: WhatifOptions) -> bool:
    """Whether the plain numbers come with options only a ranking uses."""
    return any(v is not None for v in (o.model, o.hardware, o.link, o.tp, o.num_draft)) or any(
        v is not None for v in (o.context, o.drafter_gain, o.candidates or None)
    )


TRACE_ONLY = (
    ("--width", "width"),
    ("--mode", "mode"),
    ("--step", "step"),
    ("--range", "step_range"),
    ("--whole-trace", "whole_trace"),
    ("--assume-capturable", "assume_capturable"),
)


def refuse_unusable(o: WhatifOptions, num_draft: int | None) -> None:
    """One line for an option plain numbers cannot use as given."""
    for flag, name in TRACE_ONLY:
        if getattr(o, name):
            raise VerifyprofError(
                f"{flag} is about a trace's steps (whatif --from TRACE); plain numbers have"
                " none: the verify is --verify-ms"
            )
    for flag, value in (
        ("--context", o.context),
        ("--drafter-gain", o.drafter_gain),
        ("--candidate", o.candidates or None),
    ):
        if value is not None and num_draft is None:
            raise VerifyprofError(
                f"{flag} needs --num-draft in plain-numbers mode: it changes the ranking of"
                " candidates, which starts from the draft count"
            )
    for flag, name, needs, needed, why in NEEDS:
        if getattr(o, name) is not None and getattr(o, needed) is None:
            given = f"{flag} {getattr(o, name)}" if flag == "--link" else flag  # the link's name
            raise VerifyprofError(f"{given} needs {needs} in plain-numbers mode: {why}")
    if o.model is not None and num_draft is None:
        raise VerifyprofError(
            "--model needs --num-draft in plain-numbers mode: the verify's width is k + 1 tokens"
            " per request"
        )


# (option, its field, what it needs, the field that must be given, why): one line each
NEEDS = (
    ("--context", "context", "--model and --hardware", "model",
     "it sizes the attention's KV-cache reads in the roofline"),
    ("--link", "link", "--hardware", "hardware",
     "a link is the interconnect of a hardware file's GPUs (plain numbers have no trace to"
     " recognise them from)"),
    ("--hardware", "hardware", "--model", "model",
     "the verify's phases are split by the model's roofline on the hardware"),
    ("--model", "model", "--hardware", "hardware",
     "the roofline that splits the verify into phases is the model's bytes and FLOPs on a GPU"),
    ("--tp", "tp", "--model and --hardware", "model",
     "the allreduces' count and size come from the model, their time from the hardware's link"),
)  # fmt: skip


@dataclass
class Basis:
    """What the plain-numbers ranking was given, and what it assumed."""

    given: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, list[str]]:
        return {"given": self.given, "assumed": self.assumed}


def split_verify(
    verify_ms: float, width: int, o: WhatifOptions, model: ModelConfig, hardware: Hardware
) -> tuple[dict[str, float], float, Basis]:
    """The verify's phases (ms) from the roofline and the link model, the rest one part; and
    the allreduces per verify."""
    batch, tp, context = o.batch or 1, o.tp or 1, o.context or 0.0
    tokens = width * batch
    floors, calls, est = roofline_floors(tokens, o, model, hardware)
    allreduce = calls * est.us / 1e3
    modelled = sum(floors.values()) + allreduce
    if modelled >= verify_ms:
        raise VerifyprofError(
            f"--verify-ms {verify_ms:g} is below what {model.name} needs at tp {tp} on"
            f" {hardware.name} ({hardware.link.name}) for {tokens} tokens: {modelled:.3f} ms"
            " (roofline floors and allreduces); check --model, --tp, --hardware and --link"
        )
    phases_ms = {p: 0.0 for p in phases.ALL if p not in phases.OTHER}
    phases_ms |= floors | {"allreduce": allreduce, REST: verify_ms - modelled}
    basis = Basis(
        assumed=[
            f"the verify's {verify_ms:g} ms split by the roofline, at width {width} x batch"
            f" {batch} = {tokens} tokens, tp {tp}: "
            + ", ".join(f"{p} {t:.3f} ms" for p, t in floors.items())
            + f" at their floor (bytes / {hardware.bandwidth_tbps:g} TB/s or FLOPs / peak on"
            f" {hardware.name}; weights as {model.dense_dtype} dense, {model.expert_dtype}"
            " experts)" + ("" if context else "; attention reads no KV cache (no --context)"),
            (
                f"{calls:.0f} allreduces per verify ({model.name}: 2 per layer + embedding), each"
                f" {est.us:.1f} us ({est.method}), all exposed: {allreduce:.3f} ms"
                if calls
                else "no allreduce (tp 1)"
            ),
            f"the rest, {verify_ms - modelled:.3f} ms ({(verify_ms - modelled) / verify_ms:.0%}),"
            f" is {REST_WORDS}; it stays the same at any width",
        ]
    )
    return phases_ms, calls, basis


def plain_ranking(
    o: WhatifOptions,
    cycle: Cycle,
    num_draft: int,
    survival: Survival | None,
    given: list[str],
    baseline: str | None = None,
    roofline_ms: float | None = None,
    files: Files | None = None,
) -> dict[str, Any]:
    """The ranking of plain numbers: candidates, plan, plain decoding and the draft-count curve,
    with the basis (what was given, what was assumed); ``baseline`` says where a given plain
    decoding rate came from; ``files``: what the pipeline read (model, hardware, drafters)."""
    files = files or NoFiles()
    model, hardware = files.model(), files.hardware()  # in this order: a model error first
    width = num_draft + 1
    basis = Basis(given=list(given))
    phases_ms, calls = _phases_of(o, cycle, width, model, hardware, basis)
    basis.assumed.append(
        f"chain drafting: {num_draft} drafts verified as {width} tokens per request"
    )
    if cycle.draft_ms == 0:
        basis.assumed.append(
            "drafts cost nothing (no --draft-ms or --draft-cost-ratio): the draft count's"
            " tokens/s counts only the verify's growth with width"
        )
    profile = _split_profile(cycle, width, phases_ms, calls)
    scenario = Scenario(
        accept_len=cycle.accept_len,
        decode_ms=cycle.decode_ms,
        decode_given=cycle.decode_ms is not None,
        draft_ms=cycle.draft_ms,
        overhead_ms=cycle.overhead_ms,
        batch=cycle.batch,
        num_draft=num_draft,
        survival=survival,
        hardware=hardware,
        model=model,
        tp=o.tp or 1,
        context=o.context or 0.0,
        drafter_gain=o.drafter_gain,
        published=files.published(),
        use_measured_widths=False,
    )
    hedged = roofline_ms is not None and flips_between(cycle, roofline_ms, phases_ms.get(REST, 0.0))
    ranking = rank_candidates(profile, scenario, _only(o), decide=not hedged)
    predicts_plain = cycle.decode_ms is not None or model is not None
    if not predicts_plain:
        _without_plain(ranking)
    elif cycle.decode_ms is None:
        basis.assumed.append(
            "plain decoding predicted: the verify at width 1 by the same roofline split (the rest"
            " unchanged)"
        )
    _sources(ranking, baseline if cycle.decode_ms is not None else None, model is not None)
    if roofline_ms is not None:
        basis.assumed.append(
            f"plain decoding at its roofline floor: {roofline_ms:.3f} ms a step (no --decode-ms"
            " or --baseline-tps; never the verify's own time)"
        )
    ranking.skipped += [
        {"name": f.name, "reason": f.why_trace or NEEDS_TRACE}
        for f in registry.FIXES
        if f.needs_trace
    ]
    ranking.unaddressed = [
        u | {"reason": REST_WORDS if model is not None else ONE_PART}
        if u["phase"] == REST
        else u | {"reason": AT_FLOOR}
        if u["phase"] in PEAK_DTYPE
        else u
        for u in ranking.unaddressed
    ]
    for cand in [*ranking.candidates, *(step.candidate for step in ranking.plan)]:
        cand.assumptions = [a.replace(" per call measured", PER_CALL) for a in cand.assumptions]
    ranking.verdict = _verdict(ranking, basis)
    if roofline_ms is not None and ranking.plain is not None:
        hedge(ranking, roofline_ms)
    return _to_json(ranking, basis)


def _split_profile(
    cycle: Cycle, width: int, phases_ms: dict[str, float], calls: float
) -> VerifyProfile:
    """The verify of plain numbers as the model's profile: one step, its phases as split."""
    return numbers_profile(
        cycle.verify_ms,
        width,
        cycle.batch,
        phases_ms,
        name="verify (plain numbers)",
        mode="graph",  # how the verify runs is not given: it is left as it is
        totals_ms={p: (phases_ms.get(p, 0.0) if p == "allreduce" else 0.0) for p in phases.TOTALS},
        comm_calls=calls or None,
        comm_wait_ms=0.0,
        counts={p: 0.0 for p in phases.PRIORITY},
        window_ms=cycle.verify_ms,
    )


def _phases_of(
    o: WhatifOptions,
    cycle: Cycle,
    width: int,
    model: ModelConfig | None,
    hardware: Hardware | None,
    basis: Basis,
) -> tuple[dict[str, float], float]:
    """The verify's phases and allreduces per verify: split by the roofline where the model and
    hardware are given, else one part; what was given and assumed added to ``basis``."""
    if model is None or hardware is None:
        basis.assumed.append(
            "no --model and --hardware: the verify is one part, the same at any width (memory-"
            "bound, the same kernels); no allreduce candidates"
        )
        return {REST: cycle.verify_ms}, 0.0
    phases_ms, calls, split = split_verify(cycle.verify_ms, width, o, model, hardware)
    basis.assumed += split.assumed
    basis.given.append(
        f"--model {model.name} ({model.path.name}), --hardware {hardware.name}"
        f" ({hardware.path.name}), link {hardware.link.name}"
        + (" (--link)" if o.link else " (the hardware file's)")
        + f", --tp {o.tp or 1}"
    )
    if o.link:
        basis.assumed.append(
            f"allreduce times from the link model of {hardware.link.name}: the hardware file's"
            " measured tables are of its own link, not used"
        )
    return phases_ms, calls


def _only(o: WhatifOptions) -> list[str]:
    """The candidates asked for (--candidate) that plain numbers can rank; a trace-only one is
    refused."""
    fixes = registry.by_name()
    if not o.candidates:  # no_speculation comes with every ranking
        return [f.name for f in fixes.values() if not f.needs_trace and f.name != NO_SPECULATION]
    for name in o.candidates:
        if name in fixes and fixes[name].needs_trace:
            raise VerifyprofError(f"--candidate {name} {NEEDS_TRACE}")
    return list(o.candidates)


def _without_plain(r: Ranking) -> None:
    """No plain-decoding rate given and none predictable: no k = 0, no speculate-or-not."""
    r.candidates = [c for c in r.candidates if c.name != NO_SPECULATION]
    r.plain = None
    r.curve = draft_curve(r.profile, r.scenario, r.current, None)


def _sources(r: Ranking, baseline: str | None, split: bool) -> None:
    """Where plain decoding and each width's verify come from, in plain numbers' words."""
    if r.plain is not None and baseline is not None:
        r.plain.source = baseline
    for point in r.curve.points if r.curve is not None else []:
        if point["num_draft"] == 0:
            point["verify_source"] = "given" if baseline is not None else "predicted"
        elif not split and point["verify_source"] == "roofline":
            point["verify_source"] = "as today"  # no model: the same at any width


def _verdict(r: Ranking, basis: Basis) -> Verdict:
    """The trace's verdict with the step in plain numbers' words."""
    v = verdict_of(r)
    v.group, v.step = "plain numbers (no trace)", r.current.words()
    return v


def _to_json(r: Ranking, basis: Basis) -> dict[str, Any]:
    full = r.to_json()
    return {
        "ranking": {
            key: full[key]
            for key in ("plain_decoding", "draft_curve", "plan", "unaddressed", "candidates")
        }
        | {"skipped": full["skipped"], "verify_phases_ms": _phases(r.profile)},
        "basis": basis.to_json(),
        "verdict": full["verdict"],
        "verdict_parts": full["verdict_parts"],
    }


def _phases(p: VerifyProfile) -> dict[str, float]:
    return {phase: t for phase, t in p.verify.phases_ms.items() if t > 0}
