"""The ``whatif`` command's stage entry points: plain numbers, or a breakdown ranked into
candidates.

Resolves where each input comes from (option > capture manifest > the trace itself), so the CLI
only parses and prints. Each resolved value's origin is kept as a note: a prediction is only as
good as its inputs, and the user should see which were measured and which were assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from verifyprof.contracts.manifest import Manifest
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.cycle.throughput import decode_ms_from
from verifyprof.model.decision.candidates import Scenario
from verifyprof.model.decision.capture_facts import target_of
from verifyprof.model.decision.plain_numbers import plain_numbers, plain_verdict
from verifyprof.model.fixes.anchor import Anchor
from verifyprof.model.fixes.base import current_cycle
from verifyprof.model.fixes.setup import with_cycle
from verifyprof.model.inputs.anchor_rates import Rates, robust_rates, unsettled
from verifyprof.model.inputs.given import Given
from verifyprof.model.inputs.options import (
    Acceptance,
    WhatifOptions,
    acceptance,
    check_options,
    decode_inputs,
)
from verifyprof.model.inputs.profile import VerifyProfile

__all__ = [
    "Acceptance",
    "Given",
    "Prepared",
    "WhatifOptions",
    "acceptance",
    "check_options",
    "plain_numbers",
    "plain_verdict",
    "prepare",
]


@dataclass
class Prepared:
    """What the model starts from: the verify profile and the scenario, both typed."""

    profile: VerifyProfile
    scenario: Scenario
    dilation: float | None = None
    profiled_tps: float | None = None
    unprofiled_tps: float | None = None  # the manifest's measured unprofiled rate
    manifest: Manifest | None = None  # as read for the verify's mode
    rates: Rates | None = None  # every anchoring rate, by source, and the baseline's check


def prepare(frame: BreakdownFrame, o: WhatifOptions, given: Given) -> Prepared:
    """The profile and scenario of a breakdown under the options, from what the pipeline resolved
    (:func:`verifyprof.pipeline.model_files.given_for`): the profile, the manifest, the files,
    the accept length and today's batch, each taken as given, never read again from ``o``."""
    profile, manifest, acc = given.profile, given.parsed_manifest, given.acceptance
    if profile is None or acc is None or given.batch is None:
        raise ValueError("prepare: the pipeline resolves the profile, accept length and batch")
    notes = [f"accept length {acc.accept_len:.3f} from {acc.source}"]
    rates = robust_rates(manifest)
    notes += [f"anchoring rate: {source.words()}" for source in rates.sources]
    num_draft = _num_draft(acc, profile, notes)
    draft, overhead = _cycle_numbers(profile, o, notes)
    decode_ms = _baseline(profile, o, manifest, notes, anchor_of(manifest))
    hardware, model = given.hardware, given.model
    notes += given.hardware_notes
    tp = o.tp or (max(1, profile.devices))
    ranks = frame.trace.get("ranks") or []
    if o.tp is None and profile.devices == 1 and profile.verify.totals_ms.get("allreduce", 0) > 0:
        notes.append(
            "the verify has allreduces but the trace shows one device: give --tp for the allreduce"
            " candidates"
        )
    traced_context = _attr_float(profile, "ctx", "context")
    context = o.context if o.context is not None else traced_context
    notes += given.batch_notes
    scenario = Scenario(
        accept_len=acc.accept_len,
        decode_ms=decode_ms,
        decode_given=o.decode_given,
        draft_ms=draft,
        overhead_ms=overhead,
        batch=given.batch,
        num_draft=num_draft,
        survival=acc.survival,
        hardware=hardware,
        model=model,
        tp=tp,
        context=context or 0.0,
        context_given=o.context is not None and o.context != traced_context,
        drafter_gain=o.drafter_gain,
        accept_basis=acc.basis,
        cautions=given.cautions
        + ((rates.warning,) if rates.warning else ())
        + tuple(filter(None, [unsettled(manifest)]))
        + _batch_rate_caution(manifest, given.batch),
        published=given.published,
        notes=notes
        + ([f"trace ranks {ranks}"] if len(ranks) > 1 else [])
        + _dilation_notes(manifest),
    )
    profiled = current_cycle(profile, scenario).tokens_per_s
    profile, scenario, cycle_notes = with_cycle(
        profile,
        scenario,
        hardware,
        anchor=anchor_of(manifest),
        numbers_given=o.draft_ms is not None or o.overhead_ms is not None,
        assume_capturable=o.assume_capturable,
    )
    scenario.notes.extend(cycle_notes)
    sglang = _is_sglang(frame, manifest)
    scenario = replace(scenario, sglang=sglang, decode_graphs=_sglang_graphs(manifest, sglang))
    anchor = anchor_of(manifest)
    dilation = anchor.factor if anchor is not None and anchor.noise is None else None
    return Prepared(
        profile,
        scenario,
        dilation,
        profiled if dilation else None,
        anchor.unprofiled_tps if dilation and anchor is not None else None,
        manifest,
        rates,
    )


def _num_draft(acc: Acceptance, profile: VerifyProfile, notes: list[str]) -> int | None:
    """Drafts per cycle: acceptance's, else the verify width's (chain drafting)."""
    num_draft = acc.num_draft or (
        profile.width - 1 if profile.width and profile.width > 1 else None
    )
    if acc.num_draft is None and num_draft is not None:
        notes.append(
            f"{num_draft} drafts per cycle taken from the verify width ({profile.width} tokens,"
            " chain drafting)"
        )
    return num_draft


def _cycle_numbers(
    profile: VerifyProfile, o: WhatifOptions, notes: list[str]
) -> tuple[float, float]:
    """Draft and overhead per cycle: the options', else the trace's draft, accept, draft-extend
    ranges and the rest of its spec_step range (the host work between phases)."""
    if o.draft_ms is not None:
        draft = o.draft_ms
    else:
        draft = profile.draft_ms or 0.0
        notes.append(
            f"draft {draft:.3f} ms per cycle from the trace's draft ranges in the modelled"
            " group's cycles (breakdown's step table gives each range's mean over every mode and"
            " run; this scales with the number of drafts)"
            if profile.draft_ms is not None
            else (
                "no draft ranges among the steps broken down (the trace has none, or --range left"
                " them out) and no --draft-ms: draft time taken as 0"
            )
        )
    if o.overhead_ms is not None:
        return draft, o.overhead_ms
    accept, extend = profile.accept_ms or 0.0, profile.draft_extend_ms or 0.0
    overhead = accept + extend
    if profile.cycle_ms is not None:
        rest = profile.cycle_ms - (profile.verify.wall_ms + draft + overhead)
        overhead += max(rest, 0.0)
    if profile.accept_ms is not None or profile.cycle_ms is not None:
        notes.append(
            f"overhead {overhead:.3f} ms per cycle: accept {accept:.3f} + draft-extend"
            f" {extend:.3f} per cycle of the modelled group (fixed width k+1)"
            + (
                (" + the program's loop outside the hooked ranges (derived cycle windows: from"
                 " each cycle's first phase to the next's)")
                if profile.loop_derived
                else " + the host work between phases (the rest of the spec_step range)"
                if profile.cycle_ms is not None
                else ""
            )
        )  # fmt: skip
    return draft, overhead


def _baseline(
    profile: VerifyProfile,
    o: WhatifOptions,
    manifest: Manifest | None,
    notes: list[str],
    anchor: Anchor | None = None,
) -> float | None:
    """The plain decode step, as plain decoding's candidate takes it (one rate per story): an
    option, the unprofiled run's own plain rate where today's cycle is at the unprofiled rate
    (both sides of the race on one basis), the trace's decodes (the same run), the manifest's."""
    plain = manifest.unprofiled_baseline_tps if manifest is not None else None
    applied = anchor is not None and anchor.factor is not None and anchor.noise is None
    if not o.decode_given and applied and plain:
        profiled = decode_ms_from(*decode_inputs(o, manifest)) or profile.decode_ms
        notes.append(
            f"plain decoding at the unprofiled rate: {plain:,.1f} tok/s, the program's own in the"
            " unprofiled baseline run, as today's cycle is at the unprofiled rate"
            + (f" (the profiled run's {profiled:.3f} ms per step left out)" if profiled else "")
        )
        return decode_ms_from(plain, None)
    if not o.decode_given and profile.decode_ms is not None:
        notes.append(
            f"baseline decode step {profile.decode_ms:.3f} ms from the trace's decode ranges"
        )
        return profile.decode_ms
    return decode_ms_from(*decode_inputs(o, manifest))


def _sglang_graphs(manifest: Manifest | None, sglang: bool) -> bool | None:
    """SGLang decodes in CUDA graphs unless the captured server's arguments turn them off."""
    if not sglang:
        return None
    command = _program_words(manifest)
    return "--disable-cuda-graph" not in command.replace("--disable-cuda-graph-padding", "")


def _is_sglang(frame: BreakdownFrame, manifest: Manifest | None) -> bool:
    """An SGLang server's trace: its own spans, or a capture of an SGLang command."""
    names = frame.steps["name"].astype(str)
    if names.str.contains("TARGET_VERIFY|TARGET_DECODE", regex=True).any():
        return True
    return "sglang" in _program_words(manifest)


def _program_words(manifest: Manifest | None) -> str:
    """The captured program's command (``command.target``; a manifest of another writer: its
    ``command``), never the capture's own options or folders (an ``--out`` or working directory
    named for SGLang is not an SGLang server)."""
    words = target_of(manifest)
    command = manifest.raw.get("command") if manifest is not None and not words else None
    return " ".join(words) if words else command if isinstance(command, str) else ""


def anchor_of(manifest: Manifest | None) -> Anchor | None:
    """The measured rates today's cycle reproduces: a capture's dilation record; where its
    baseline disagrees with the program's own unprofiled calls, the median of the agreeing
    sources instead (:mod:`verifyprof.model.inputs.anchor_rates`)."""
    if manifest is None or not manifest.dilation:
        return None
    profiled = manifest.profiled_tps or (manifest.unprofiled_tps or 0.0) / manifest.dilation or None
    rates = robust_rates(manifest)
    if rates.unprofiled_tps is not None and profiled:
        return Anchor(
            profiled,
            rates.unprofiled_tps,
            rates.runs,
            "the median of the sources agreeing with the program's own unprofiled calls",
            rates.unprofiled_tps / profiled,
        )
    return Anchor(
        profiled,
        manifest.unprofiled_tps,
        manifest.dilation_runs,
        manifest.dilation_source or "baseline run",
        manifest.dilation,
        manifest.dilation_samples,
    )


def _batch_rate_caution(manifest: Manifest | None, batch: int) -> tuple[str, ...]:
    """A capture at batch > 1 whose rates carry no per-request figure: its ``tokens_per_s`` may
    be its batch's (a batched program's "Average tokens/sec"), which would anchor today's cycle
    ``batch`` times too fast; say so rather than guess which it is."""
    if manifest is None or batch <= 1 or not manifest.dilation or manifest.rate_scale < 1:
        return ()
    results = manifest.raw.get("results") if isinstance(manifest.raw, dict) else None
    if not isinstance(results, dict) or results.get("tokens_per_s_per_request") is not None:
        return ()
    return (
        f"the capture ran at batch {batch} and reported tokens_per_s with no"
        " tokens_per_s_per_request: today's cycle is anchored on it as a request's rate; if it is"
        " the batch's, report the per-request rate too (results.json, or capture --result"
        " 'tokens_per_s_per_request=...')",
    )


def _dilation_notes(manifest: Manifest | None) -> list[str]:
    anchor = anchor_of(manifest)
    if manifest is None or anchor is None or anchor.noise is not None:
        return []
    rate = f"{anchor.unprofiled_tps:,.1f} tok/s" if anchor.unprofiled_tps else "its unprofiled rate"
    if manifest.dilation_samples:
        prof, unprof = (", ".join(f"{v:,.1f}" for v in vs) for vs in manifest.dilation_samples)
        share = (
            f"; a request's rate is x{manifest.rate_scale:.3g} of the batch's"
            if manifest.rate_scale < 1
            else ""
        )
        rate += (
            f" (the medians of the program's per-sample rates, unprofiled {unprof},"
            f" profiled {prof}: an average would count a cold sample{share})"
        )
    return [
        f"the profiler slowed the program {anchor.factor:.2f}x ({anchor.source}): it"
        f" runs at {rate} unprofiled; 'current', the plan and every candidate are stated at the"
        " unprofiled rate (the host-side time it added taken out)"
    ]


def _attr_float(profile: VerifyProfile, *keys: str) -> float | None:
    for key in keys:
        value = profile.verify.attrs.get(key)
        if value is not None:
            try:
                return float(value)
            except ValueError:
                pass
    return None


from verifyprof.model.decision.load_state import (  # noqa: E402 - re-exported: the load's entry
    AFTER_PLAN,
    decided_state,
    load_of,
    with_load,
)

__all__ += ["AFTER_PLAN", "decided_state", "load_of", "with_load"]
