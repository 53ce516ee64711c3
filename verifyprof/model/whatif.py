"""The ``whatif`` command's stage entry points: plain numbers, or a breakdown ranked into
candidates.

Resolves where each input comes from (option > capture manifest > the trace itself), so the CLI
only parses and prints. Each resolved value's origin is kept as a note: a prediction is only as
good as its inputs, and the user should see which were measured and which were assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verifyprof.contracts.bounds import check_fields
from verifyprof.contracts.datafiles import catalogue
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest, read_manifest
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.acceptance import Survival, parse_survival
from verifyprof.model.candidates import Ranking, Scenario, rank_candidates
from verifyprof.model.cycle_setup import with_cycle
from verifyprof.model.decision import PlainDecoding
from verifyprof.model.verdict import Verdict, decision_words
from verifyprof.model.fix import current_cycle
from verifyprof.model.checks import (
    MAX_DRAFTS,
    check_accept_len,
    check_alpha,
    check_count,
    check_nonnegative,
    check_positive,
)
from verifyprof.model.hardware import Hardware, load_hardware
from verifyprof.model.leviathan import (
    expected_tokens,
    operations_factor,
    optimal_gamma,
    walltime_improvement,
)
from verifyprof.model.model_config import ModelConfig, load_model_config
from verifyprof.model.profile import VerifyProfile, verify_profile
from verifyprof.model.throughput import Cycle, decode_ms_from


@dataclass
class WhatifOptions:
    verify_ms: float | None = None
    accept_len: float | None = None
    alpha: float | None = None
    num_draft: int | None = None
    survival: str | None = None
    draft_cost_ratio: float | None = None
    draft_ms: float | None = None
    overhead_ms: float | None = None
    batch: int | None = None
    baseline_tps: float | None = None
    decode_ms: float | None = None
    source: str | None = None  # --from: breakdown JSON or trace
    manifest: Path | None = None
    step: str | None = None
    step_range: str | None = None
    whole_trace: bool = False
    width: int | None = None
    mode: str | None = None
    hardware: str | None = None
    link: str | None = None
    model: str | None = None
    tp: int | None = None
    context: float | None = None
    drafter_gain: float | None = None  # None: better_drafter from published drafter data
    candidates: list[str] = field(default_factory=list)
    assume_capturable: bool = False  # graph and compile fixes on steps that sync or change shape


@dataclass
class Acceptance:
    accept_len: float | None
    source: str
    survival: Survival | None = None
    num_draft: int | None = None


def _check_options(o: WhatifOptions) -> None:
    check_fields(o)  # every number within its documented range (contracts/bounds.py)
    if o.verify_ms is not None:
        check_positive("--verify-ms", o.verify_ms)
    if o.accept_len is not None:
        check_accept_len(o.accept_len)
    if o.alpha is not None:
        check_alpha(o.alpha)
    if o.num_draft is not None:
        check_count("--num-draft", o.num_draft, minimum=1, maximum=MAX_DRAFTS)
        if o.accept_len is not None and o.accept_len > o.num_draft + 1:
            raise VerifyprofError(
                f"--accept-len {o.accept_len:g} cannot exceed --num-draft + 1 = {o.num_draft + 1} "
                "(accepted drafts plus the bonus token)"
            )
    if o.draft_cost_ratio is not None:
        check_nonnegative("--draft-cost-ratio", o.draft_cost_ratio)
    for name, value in (("--draft-ms", o.draft_ms), ("--overhead-ms", o.overhead_ms)):
        if value is not None:
            check_nonnegative(name, value)
    if o.batch is not None:
        check_count("--batch", o.batch, minimum=1)
    if o.tp is not None:
        check_count("--tp", o.tp, minimum=1)
    if o.width is not None:
        check_count("--width", o.width, minimum=1)
    if o.context is not None:
        check_nonnegative("--context", o.context)
    if o.drafter_gain is not None:
        check_nonnegative("--drafter-gain", o.drafter_gain)
    if o.mode is not None and o.mode not in ("eager", "graph"):
        raise VerifyprofError(f"--mode must be eager or graph, got {o.mode!r}")
    given = [
        name
        for name, value in (
            ("--accept-len", o.accept_len),
            ("--alpha", o.alpha),
            ("--survival", o.survival),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise VerifyprofError(
            f"give one of --accept-len, --alpha/--num-draft, --survival (got {' and '.join(given)})"
        )
    if o.alpha is not None and o.num_draft is None:
        raise VerifyprofError("--alpha needs --num-draft K (Leviathan's Eq. 1 counts K drafts)")
    if o.draft_cost_ratio is not None and (o.alpha is None or o.num_draft is None):
        raise VerifyprofError(
            "--draft-cost-ratio needs --alpha and --num-draft (Leviathan's Thm 3.8)"
        )


def acceptance(
    o: WhatifOptions, manifest: Manifest | None = None, profile: VerifyProfile | None = None
) -> Acceptance:
    """Accept length and survival curve: options first, then the manifest, then the trace."""
    num_draft = o.num_draft
    if num_draft is None and manifest is not None and manifest.num_draft:
        num_draft = check_count(
            f"number of drafts in {manifest.path}",
            manifest.num_draft,
            minimum=1,
            maximum=MAX_DRAFTS,
        )
    if o.accept_len is not None:
        measured = manifest.accept_len if manifest is not None else None
        overridden = (
            f" (over {measured:g} measured in {manifest.path})"
            if measured is not None and measured != o.accept_len
            else ""
        )
        return Acceptance(o.accept_len, "--accept-len" + overridden, None, num_draft)
    if o.alpha is not None:
        assert o.num_draft is not None
        survival = Survival.from_alpha(o.alpha, o.num_draft)
        return Acceptance(
            expected_tokens(o.alpha, o.num_draft),
            f"Eq. 1 with alpha {o.alpha:g}, {o.num_draft} drafts",
            survival,
            o.num_draft,
        )
    survival = parse_survival(o.survival) if o.survival is not None else None
    source = "--survival"
    if survival is None and manifest is not None and manifest.survival:
        survival = Survival(manifest.survival, source=str(manifest.path))
        source = f"survival in {manifest.path}"
        if (
            manifest.accept_len is not None
        ):  # measured beats the curve's expectation; the curve stays for candidates
            return Acceptance(
                check_accept_len(manifest.accept_len),
                f"accept length in {manifest.path}",
                survival,
                num_draft or survival.depth,
            )
    if survival is not None:
        k = num_draft or survival.depth
        return Acceptance(
            survival.accept_len(k),
            f"{source}, {k} drafts" + (" (extrapolated)" if survival.is_extrapolated(k) else ""),
            survival,
            k,
        )
    if manifest is not None and manifest.accept_len is not None:
        return Acceptance(
            check_accept_len(manifest.accept_len),
            f"accept length in {manifest.path}",
            None,
            num_draft,
        )
    if profile is not None and profile.accept_len is not None:
        return Acceptance(
            check_accept_len(profile.accept_len),
            "accepted tokens recorded on the trace's ranges",
            None,
            num_draft,
        )
    return Acceptance(None, "", None, num_draft)


def plain_numbers(o: WhatifOptions) -> dict[str, Any]:
    """``whatif --verify-ms ... --accept-len ...``: the cycle, tokens/s, speedup and break-evens."""
    _check_options(o)
    manifest = read_manifest(o.manifest) if o.manifest else None
    acc = acceptance(o, manifest)
    out: dict[str, Any] = {}
    if o.alpha is not None:
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
                "walltime_improvement": walltime_improvement(
                    o.alpha, o.num_draft, o.draft_cost_ratio
                ),
                "operations_factor": operations_factor(o.alpha, o.num_draft, o.draft_cost_ratio),
                "optimal_num_draft": best_k,
                "optimal_walltime_improvement": best,
            }
        out["leviathan"] = lev
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
    baseline_tps = (
        o.baseline_tps
        if o.baseline_tps is not None
        else (manifest.baseline_tps if manifest and o.decode_ms is None else None)
    )
    decode = (
        o.decode_ms
        if o.decode_ms is not None
        else (manifest.decode_ms if manifest and baseline_tps is None else None)
    )
    draft_ms, draft_source = o.draft_ms or 0.0, "--draft-ms" if o.draft_ms else "none given"
    if (
        o.draft_ms is None and o.draft_cost_ratio is not None and o.num_draft
    ):  # Thm 3.8's cost model: c target steps per draft
        draft_ms = o.num_draft * o.draft_cost_ratio * o.verify_ms
        draft_source = (
            f"{o.num_draft} drafts x c {o.draft_cost_ratio:g} x verify {o.verify_ms:g} ms (Thm"
            " 3.8's model)"
        )
    cycle = Cycle(
        verify_ms=o.verify_ms,
        accept_len=acc.accept_len,
        draft_ms=draft_ms,
        overhead_ms=o.overhead_ms or 0.0,
        batch=o.batch or 1,
        decode_ms=decode_ms_from(baseline_tps, decode),
    )
    verdict = plain_verdict(cycle, "--baseline-tps" if baseline_tps is not None else "--decode-ms")
    return (
        cycle.to_json()
        | {"accept_len_source": acc.source, "draft_source": draft_source}
        | out
        | {"verdict": verdict.text(), "verdict_parts": verdict.to_json()}
    )


def plain_verdict(cycle: Cycle, baseline_source: str) -> Verdict:
    """The verdict of plain numbers: the cycle, and speculate or not when a baseline is given."""
    step = (
        f"cycle {cycle.cycle_ms:.3f} ms (verify {cycle.verify_ms:.3f} + draft {cycle.draft_ms:.3f}"
        f" + overhead {cycle.overhead_ms:.3f}) at accept length {cycle.accept_len:.2f}:"
        f" {cycle.tokens_per_s:.1f} tok/s per request."
    )
    verdict = Verdict(group="plain numbers (no trace)", step=step)
    if cycle.decode_ms is None:
        verdict.reasons.append(
            "no plain-decoding rate to compare with: give --baseline-tps or --decode-ms"
        )
        return verdict
    plain = PlainDecoding(
        Cycle(verify_ms=cycle.decode_ms, accept_len=1.0), f"{baseline_source}", cycle
    )
    verdict.decision = decision_words(plain)
    if plain.speculation_loses:
        verdict.warnings.append(verdict.decision)
    return verdict


def guess_hardware(device_names: list[str]) -> Hardware | None:
    """A built-in or user hardware file whose name or alias the trace's GPU name contains."""
    known = catalogue("hardware", skip=("links",))
    for raw in device_names:
        name = raw.lower().replace("nvidia", "").strip()
        compact = name.replace(" ", "-")
        if compact in known:
            return load_hardware(known[compact])
        hits = sorted(
            (key for key in known if len(key) >= 4 and key in compact), key=len, reverse=True
        )
        if hits:
            return load_hardware(known[hits[0]])
    return None


def check_options(o: WhatifOptions) -> None:
    """Reject bad options before any input is read."""
    _check_options(o)


def from_breakdown(frame: BreakdownFrame, o: WhatifOptions) -> Ranking:
    """``whatif --from BREAKDOWN|TRACE``: the current cycle and every candidate, ranked."""
    prepared = prepare(frame, o)
    ranking = rank_candidates(prepared.profile, prepared.scenario, o.candidates or None)
    ranking.dilation, ranking.profiled_tps = prepared.dilation, prepared.profiled_tps
    return ranking


@dataclass
class Prepared:
    """What the model starts from: the verify profile and the scenario, both typed."""

    profile: VerifyProfile
    scenario: Scenario
    dilation: float | None = None
    profiled_tps: float | None = None


def prepare(frame: BreakdownFrame, o: WhatifOptions) -> Prepared:
    """The profile and scenario of a breakdown under the options (and a manifest's numbers)."""
    _check_options(o)
    profile = verify_profile(frame, step_name=o.step, width=o.width, mode=o.mode)
    manifest = read_manifest(o.manifest, mode=profile.verify.mode) if o.manifest else None
    notes: list[str] = []
    acc = acceptance(o, manifest, profile)
    if acc.accept_len is None:
        raise VerifyprofError(
            "accept length unknown: give --accept-len, --alpha/--num-draft, --survival or"
            " --manifest"
        )
    notes.append(f"accept length {acc.accept_len:.3f} from {acc.source}")

    num_draft = acc.num_draft or (
        profile.width - 1 if profile.width and profile.width > 1 else None
    )
    if acc.num_draft is None and num_draft is not None:
        notes.append(
            f"{num_draft} drafts per cycle taken from the verify width ({profile.width} tokens,"
            " chain drafting)"
        )

    extend = profile.draft_extend_ms or 0.0
    if o.draft_ms is not None:
        draft = o.draft_ms
    else:
        draft = profile.draft_ms or 0.0
        notes.append(
            f"draft {draft:.3f} ms per cycle from the trace's draft ranges (scales with the number"
            " of drafts)"
            if profile.draft_ms is not None
            else (
                "no draft ranges among the steps broken down (the trace has none, or --range left"
                " them out) and no --draft-ms: draft time taken as 0"
            )
        )
    if o.overhead_ms is not None:
        overhead = o.overhead_ms
    else:
        overhead = (profile.accept_ms or 0.0) + extend
        if profile.cycle_ms is not None:
            rest = profile.cycle_ms - (
                profile.verify.wall_ms + (profile.draft_ms or 0.0) + overhead
            )
            overhead += max(rest, 0.0)
        if profile.accept_ms is not None or profile.cycle_ms is not None:
            notes.append(
                f"overhead {overhead:.3f} ms per cycle: accept {profile.accept_ms or 0.0:.3f} +"
                f" draft-extend {extend:.3f} (fixed width k+1)"
                + (
                    f" + the rest of the spec_step range ({profile.cycle_ms:.3f} ms)"
                    if profile.cycle_ms is not None
                    else ""
                )
            )
    baseline_tps = (
        o.baseline_tps
        if o.baseline_tps is not None
        else (manifest.baseline_tps if manifest and o.decode_ms is None else None)
    )
    decode = (
        o.decode_ms
        if o.decode_ms is not None
        else (manifest.decode_ms if manifest and baseline_tps is None else None)
    )
    decode_ms = decode_ms_from(baseline_tps, decode)
    if decode_ms is None and profile.decode_ms is not None:
        decode_ms = profile.decode_ms
        notes.append(f"baseline decode step {decode_ms:.3f} ms from the trace's decode ranges")

    hardware = None
    if o.hardware:
        hardware = load_hardware(o.hardware, o.link)
    else:
        hardware = guess_hardware(frame.device_names)
        if hardware is not None:
            notes.append(
                f"hardware {hardware.name} recognised from the trace's GPU name"
                f" ({hardware.path.name}); override with --hardware"
            )
            if o.link:
                hardware = load_hardware(hardware.path, o.link)
    model: ModelConfig | None = load_model_config(o.model) if o.model else None
    tp = o.tp or (max(1, profile.devices))
    ranks = frame.trace.get("ranks") or []
    if o.tp is None and profile.devices == 1 and profile.verify.totals_ms.get("allreduce", 0) > 0:
        notes.append(
            "the verify has allreduces but the trace shows one device: give --tp for the allreduce"
            " candidates"
        )
    context = o.context if o.context is not None else _attr_float(profile, "ctx", "context")
    scenario = Scenario(
        accept_len=acc.accept_len,
        decode_ms=decode_ms,
        draft_ms=draft,
        overhead_ms=overhead,
        batch=o.batch or profile.batch or 1,
        num_draft=num_draft,
        survival=acc.survival,
        hardware=hardware,
        model=model,
        tp=tp,
        context=context or 0.0,
        drafter_gain=o.drafter_gain,
        notes=notes
        + ([f"trace ranks {ranks}"] if len(ranks) > 1 else [])
        + _dilation_notes(manifest),
    )
    profiled = current_cycle(profile, scenario).tokens_per_s
    profile, scenario, cycle_notes = with_cycle(
        profile,
        scenario,
        hardware,
        dilation=manifest.dilation if manifest is not None else None,
        numbers_given=o.draft_ms is not None or o.overhead_ms is not None,
        assume_capturable=o.assume_capturable,
    )
    scenario.notes.extend(cycle_notes)
    scenario = replace(scenario, sglang=_is_sglang(frame, manifest))
    dilation = manifest.dilation if manifest is not None and manifest.dilation else None
    return Prepared(profile, scenario, dilation, profiled if dilation else None)


def _is_sglang(frame: BreakdownFrame, manifest: Manifest | None) -> bool:
    """An SGLang server's trace: its own spans, or a capture of an SGLang command."""
    names = frame.steps["name"].astype(str)
    if names.str.contains("TARGET_VERIFY|TARGET_DECODE", regex=True).any():
        return True
    command = manifest.raw.get("command") if manifest is not None else None
    return "sglang" in str(command or "")


def _dilation_notes(manifest: Manifest | None) -> list[str]:
    if manifest is None or not manifest.dilation:
        return []
    rate = (
        f"{manifest.unprofiled_tps:,.1f} tok/s"
        if manifest.unprofiled_tps
        else "its unprofiled rate"
    )
    return [
        f"the profiler slowed the program {manifest.dilation:.2f}x ({manifest.dilation_source}): it"
        f" runs at {rate} unprofiled; 'current' and the plan are the profiled trace's, so read each"
        " fix's gain against that rate"
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
