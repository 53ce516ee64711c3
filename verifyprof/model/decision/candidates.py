"""Candidate fixes ranked by predicted tokens/s, each alone and stacked into a plan.

The fixes are the entries of :mod:`verifyprof.model.fixes.registry` (their builders live in
``verify``, ``comm``, ``draft`` and ``cycle`` beside it); ``plan`` stacks them.
Every candidate says which numbers it assumed; one that cannot apply to this trace is listed
under ``skipped`` with the reason (REFERENCE 6.12).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import WHATIF_SCHEMA
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.cycle.width_fit import fit_widths
from verifyprof.model.decision.plan import PlanStep, evaluate, stack, unaddressed
from verifyprof.model.decision.speculate import (
    DraftCurve,
    PlainDecoding,
    decided_plan,
    draft_curve,
    plain_decoding,
)
from verifyprof.model.decision.verdict import (
    Verdict,
    decision_words,
    plan_words,
    step_words,
    unaddressed_words,
)
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Candidate, Scenario, current_cycle
from verifyprof.model.fixes.draft import verify_at_width
from verifyprof.model.fixes.registry import NO_SPECULATION
from verifyprof.model.inputs.profile import VerifyProfile

SCHEMA = WHATIF_SCHEMA
BIG_GAIN = 5.0  # a predicted tokens/s ratio above this says which assumption carries it


@dataclass
class Ranking:
    current: Cycle
    profile: VerifyProfile
    scenario: Scenario
    candidates: list[Candidate]  # each alone, on today's measurements
    skipped: list[dict[str, str]]
    plan: list[PlanStep] = field(default_factory=list)  # stacked, best first
    plain: PlainDecoding | None = None
    curve: DraftCurve | None = None
    verdict: Verdict | None = None
    unaddressed: list[dict[str, Any]] = field(default_factory=list)
    dilation: float | None = None  # profiled / unprofiled rate of the capture (manifest)
    profiled_tps: float | None = None  # today's rate as the trace ran it, when that differs
    unprofiled_tps: float | None = None  # the capture's measured rate without the profiler
    load: Any = None  # the load curve (decision.load.LoadCurve), when asked and possible
    load_skipped: str | None = None  # why there is none
    # the load curve after the plan's fixes, where speculate-or-not flips there (and why none)
    load_after: Any = None
    rates: Any = None  # every anchoring rate by source (model.inputs.anchor_rates.Rates)
    load_after_skipped: str | None = None

    def measured(self) -> dict[str, Any]:
        """Numbers users ask for that the trace measures directly."""
        p, s = self.profile, self.scenario
        k = s.num_draft or ((p.width - 1) if p.width else None)
        target = p.decode_ms or p.width_times.get(1)
        c = (s.draft_ms / k) / target if k and target and s.draft_ms > 0 else None
        widths = []
        n0 = p.width or (k or 0) + 1
        modelled = replace(s, use_measured_widths=False)
        fit = fit_widths(p.width_times)
        for width, measured in sorted(
            p.width_times.items()
        ):  # t(n) predicted from the measured t(n0)
            change = verify_at_width(p, modelled, width)[0] - p.verify.wall_ms
            base = p.width_times.get(n0)
            fitted = fit.at(width) if fit is not None else None
            widths.append(
                {
                    "width": width,
                    "measured_ms": measured,
                    "predicted_ms": base + change if base is not None else None,
                    **({"fitted_ms": fitted[0], "fit": fitted[1]} if fitted else {}),
                }
            )
        v = p.verify
        return {
            "draft_cost_ratio": c,  # Leviathan's c: one draft step over one target step
            "verify_graph_launches": v.graph_launches,
            "verify_graph_launch_host_ms": v.phases_ms.get("graph_launch", 0.0),
            "verify_window_ms": v.window_ms,
            "verify_other_work_ms": v.other_work_ms,
            "verify_by_width": widths,
        }

    def current_json(self) -> dict[str, Any]:
        v = self.profile.verify
        out = self.current.to_json() | {
            "basis": self.scenario.basis,  # traced, or at the unprofiled rate (anchored)
            "traced_verify_ms": self.scenario.traced_verify_ms or v.wall_ms,
            "verify_steps": v.steps,
            "device": v.device,
            "rank": v.rank,
            "devices": self.profile.devices,
            "mode": v.mode,
            "width": self.profile.width,
            "num_draft": self.scenario.num_draft,
            "accept_len_basis": self.scenario.accept_basis,
            "speculative": self.profile.speculative,
            "hardware": self.scenario.hardware.name if self.scenario.hardware else None,
            "model": self.scenario.model.name if self.scenario.model else None,
            "tp": self.scenario.tp,
            "kernels": v.kernels,
            "launches": v.launches,
            "host_syncs": v.host_syncs,
            "verify_phases_ms": {p: t for p, t in v.phases_ms.items() if t > 0},
            "notes": self.profile.notes + self.scenario.notes,
            "source": self.profile.source,
        }
        if self.rates is not None and self.rates.sources:
            out["anchor_rates"] = self.rates.to_json()
        if self.dilation is not None:
            out |= {
                "dilation": self.dilation,
                "profiled_tokens_per_s": self.profiled_tps,
                "unprofiled_tokens_per_s": self.unprofiled_tps,
            }
        return out

    def relative_to(self) -> dict[str, str | None]:
        """What each ratio is over: the speedup plain decoding at the decode step raced, a
        candidate's gain today's cycle, a plan line's gain today's cycle with every fix above
        it, its step_gain the plan line above."""
        now = self.current
        today = f"today's cycle ({now.tokens_per_s:.1f} tok/s)"
        return {
            "speedup": f"plain decoding at {now.decode_ms:.3f} ms per step"
            + (f" ({self.plain.source})" if self.plain is not None else "")
            if now.decode_ms is not None
            else None,
            "gain": today,
            "plan_gain": today + ", with every fix above the line",
            "step_gain": "the plan line above",
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "unit": "ms",
            "verdict": self.verdict.text() if self.verdict else None,
            "verdict_parts": self.verdict.to_json() if self.verdict else None,
            "current": self.current_json(),
            "measured": self.measured(),
            "plain_decoding": self.plain.to_json() if self.plain else None,
            "draft_curve": self.curve.to_json() if self.curve else None,
            "load_curve": self.load.to_json() if self.load is not None else None,
            **({"load_curve_skipped": self.load_skipped} if self.load_skipped else {}),
            **(
                {"load_curve_after_plan": self.load_after.to_json()}
                if self.load_after is not None
                else {}
            ),
            **(
                {"load_curve_after_plan_skipped": self.load_after_skipped}
                if self.load_after_skipped
                else {}
            ),
            "plan": [step.to_json() for step in self.plan],
            "relative_to": self.relative_to(),
            "unaddressed": self.unaddressed,
            "candidates": [c.to_json() for c in self.candidates],
            "skipped": self.skipped,
        }


def rank_candidates(
    profile: VerifyProfile, scenario: Scenario, only: list[str] | None = None, decide: bool = True
) -> Ranking:
    """Every applicable candidate alone (best predicted tokens/s first; graphs that cannot be
    captured as the code runs now after the rest), the rest with their reasons, the stacked
    plan, plain decoding beside it, the draft-count curve and the verdict."""
    builders, known = registry.builders(), registry.names()
    if only:
        unknown = [n for n in only if n not in known]
        if unknown:
            raise VerifyprofError(f"unknown candidate {unknown[0]!r}: known are {', '.join(known)}")
        builders = [(n, b) for n, b in builders if n in only or n == NO_SPECULATION]
    if not profile.speculative:  # nothing to turn off or to draft: the step's own fixes only
        speculative_only = registry.speculative_only()
        builders = [(n, b) for n, b in builders if n not in speculative_only]
    now = current_cycle(profile, scenario)
    candidates, skipped = evaluate(builders, profile, scenario)
    blocked = _mark_blocked(candidates, scenario)
    for cand in candidates:
        _big_gain_warning(cand, profile, now)
    candidates.sort(key=lambda c: (bool(c.blocked), -c.cycle.tokens_per_s))
    plan = stack(builders, profile, scenario, skip={NO_SPECULATION, *blocked})
    by_name = dict(builders)
    plain = plain_decoding(profile, scenario, now, plan, by_name) if profile.speculative else None
    curve = draft_curve(profile, scenario, now, plain) if profile.speculative else None
    if decide:  # not where the answer hangs on an unmeasured rate (the caller hedges)
        plan = decided_plan(plan, plain, profile, scenario, by_name, curve)
    if only and NO_SPECULATION not in only:
        candidates = [c for c in candidates if c.name != NO_SPECULATION]
    ranking = Ranking(now, profile, scenario, candidates, skipped, plan, plain)
    ranking.curve = curve
    ranking.unaddressed = unaddressed(profile, candidates, skipped)
    ranking.verdict = verdict_of(ranking)
    return ranking


def _mark_blocked(candidates: list[Candidate], s: Scenario) -> set[str]:
    """Graph fixes on parts that sync with the host or change shape: they say what must change
    first, and are not stacked into the plan (without --assume-capturable)."""
    cap = s.capturable
    if cap is None:
        return set()
    names, fixes = set(), registry.by_name()
    for cand in candidates:
        parts = fixes[cand.name].graphs if cand.name in fixes else ()
        reasons = cap.reasons(parts)
        if not reasons:
            continue
        if cap.assumed:
            cand.assumptions.append(
                "--assume-capturable: " + "; ".join(reasons) + " (taken as fixed first)"
            )
        else:
            cand.blocked = reasons
            names.add(cand.name)
    return names


def _big_gain_warning(cand: Candidate, profile: VerifyProfile, now: Cycle) -> None:
    ratio = cand.cycle.tokens_per_s / now.tokens_per_s if now.tokens_per_s > 0 else 0.0
    if ratio <= BIG_GAIN:
        return
    before, after = profile.verify.phases_ms, (cand.profile or profile).verify.phases_ms
    saved = {p: before.get(p, 0.0) - after.get(p, 0.0) for p in before}
    saved["draft"] = now.draft_ms - cand.cycle.draft_ms
    saved["overhead"] = now.overhead_ms - cand.cycle.overhead_ms
    what, ms = max(saved.items(), key=lambda kv: kv[1])
    carried = CARRIES.get(what, f"{what} shrinking as assumed above")
    cand.warnings.append(
        f"a {ratio:.1f}x prediction: {ms:.3f} ms of {what} per cycle carries most of it, which"
        f" assumes {carried}"
    )


CARRIES = {
    "launch_gap": "that every launch between the kernels goes (one static graph, no host syncs)",
    "host_wait": "that the host's Python and syncs inside the step leave the critical path",
    "draft": "that the draft's forwards become replays with nothing else on the host",
    "overhead": "that the host work between phases hides behind the GPU",
    "accept_len": "that the accept length reaches the value above",
}


def drafts_words(curve: DraftCurve) -> str:
    """The best draft count, with what it rests on: a k at the edge of the range tried says so,
    and one chosen with drafts priced at 0 (no draft time measured or given) names the option
    that prices them instead of printing flags for it."""
    best = curve.best
    flags = curve.server_flags()
    line = (
        f"Best draft count: k = {best['num_draft']} ({best['tokens_per_s']:.1f} tok/s, today's"
        f" k = {curve.current_k})"
    )
    if curve.at_edge:
        line += ", the largest tried: more drafts may do better still"
    if not curve.draft_known:
        return line + (
            " with drafts priced at 0 (no draft time measured or given): give --draft-ms for a"
            " best k that counts them."
        )
    return line + (f"; SGLang: {flags}" if flags else "") + "."


NONE_FOUND = (
    "No speculative steps found (no verify, draft, accept or spec_step ranges; the step modelled,"
    " {step}, is one plain step): no verdict on speculating; the plan is this step's own fixes."
)


def cautions_of(s: Scenario) -> list[str]:
    """Today's cautions, then each other capture's that today's do not say (named by capture:
    a baseline off its program's own calls in any capture moves the model's fit)."""
    out = list(s.cautions)
    for c in s.measured.captures[1:] if s.measured is not None else []:
        out += [f"{c.label}: {w}" for w in c.scenario.cautions if w not in s.cautions]
    return out


def verdict_of(r: Ranking) -> Verdict:
    """The run's one verdict: the step, speculate or not, the plan, the best draft count."""
    sc = r.scenario
    v = Verdict(
        group=r.profile.choice or r.profile.verify.name,
        step=step_words(r.profile, sc.basis, sc.traced_verify_ms),
    )
    v.cautions = cautions_of(sc)
    if not r.profile.speculative:
        v.decision = NONE_FOUND.format(step=r.profile.verify.name)
    elif r.plain is not None:
        v.decision = decision_words(r.plain, r.curve)
        if r.plain.speculation_loses:
            v.warnings.append(v.decision)
    else:
        v.reasons.append(
            "no plain-decoding step to compare with (no decode ranges, rate or width model):"
            " give --baseline-tps or --decode-ms"
        )
    v.plan = plan_words(r.current, r.plan, r.plain)
    if r.curve is not None and r.curve.best["num_draft"] != r.curve.current_k:
        v.drafts = drafts_words(r.curve)
    v.not_addressed = unaddressed_words(r.unaddressed)
    for cand in r.candidates:
        if cand.blocked and cand.gain > 0:
            v.warnings.append(f"{cand.name} is not ranked first: " + "; ".join(cand.blocked))
        v.warnings += [f"{cand.name}: {w}" for w in cand.warnings]
    return v
