"""The what-if plan: fixes stacked greedily, best first, each predicted on top of the ones before
it, so the cumulative tokens/s never counts a saving twice; and which verify phases no fix
addresses, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from verifyprof.contracts import phases
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Candidate, Scenario, Skip, current_cycle
from verifyprof.model.fixes.registry import Builder
from verifyprof.model.inputs.profile import VerifyProfile

MIN_GAIN = 1e-3  # a fix adding less than 0.1% tokens/s ends the plan

# Why no fix is modelled for a phase (contracts.phases), where no registered fix shrinks it.
NOT_MODELLED: dict[str, str] = {p: i.not_modelled for p, i in phases.INFO.items() if i.not_modelled}
SIGNIFICANT = 0.01  # phases under 1% of the verify are not listed as unaddressed


@dataclass
class PlanStep:
    candidate: Candidate
    cumulative_tps: float
    baseline_tps: float

    def to_json(self) -> dict[str, Any]:
        out = self.candidate.to_json()
        out["gain"] = (
            self.cumulative_tps / self.baseline_tps - 1.0
        )  # over today's, all steps so far
        out["step_gain"] = self.candidate.gain  # over the previous plan line
        return out


def evaluate(
    builders: list[tuple[str, Builder]],
    profile: VerifyProfile,
    scenario: Scenario,
    skip: set[str] = frozenset(),
) -> tuple[list[Candidate], list[dict[str, str]]]:
    """Every applicable fix on this state, best first; the rest with their reasons."""
    now = current_cycle(profile, scenario)
    found, skipped = [], []
    for name, build in builders:
        if name in skip:
            continue
        try:
            found.append(build(profile, scenario, now))
        except Skip as why:
            skipped.append({"name": name, "reason": str(why)})
    found.sort(key=lambda c: c.cycle.tokens_per_s, reverse=True)
    return found, skipped


def stack(
    builders: list[tuple[str, Builder]],
    profile: VerifyProfile,
    scenario: Scenario,
    skip: set[str] = frozenset(),
) -> list[PlanStep]:
    """Greedy: take the best fix, apply it, re-predict every remaining fix on the new state."""
    baseline = current_cycle(profile, scenario).tokens_per_s
    plan: list[PlanStep] = []
    used: set[str] = set(skip)
    for _ in range(len(builders)):
        found, _ = evaluate(builders, profile, scenario, used)
        if not found or found[0].gain < MIN_GAIN:
            break
        best = found[0]
        plan.append(PlanStep(best, best.cycle.tokens_per_s, baseline))
        used |= registry.excluded_by(best.name)  # it and its alternatives
        profile = best.profile or profile
        scenario = best.scenario or _with_cycle(scenario, best.cycle)
    return plan


def _with_cycle(s: Scenario, cycle: Cycle) -> Scenario:
    return replace(
        s, accept_len=cycle.accept_len, draft_ms=cycle.draft_ms, overhead_ms=cycle.overhead_ms
    )


def unaddressed(
    profile: VerifyProfile, candidates: list[Candidate], skipped: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """Verify phases over 1% of the step that no applicable fix shrinks, with the reason."""
    v = profile.verify
    applicable = {c.name for c in candidates}
    reasons = {s["name"]: s["reason"] for s in skipped}
    phase_fixes = registry.phase_fixes()
    out = []
    for phase, t in v.phases_ms.items():
        if v.wall_ms <= 0 or t < SIGNIFICANT * v.wall_ms:
            continue
        fixes = phase_fixes.get(phase, ())
        if any(f in applicable for f in fixes):
            continue
        reason = (  # a registered fix outranks the phase's "no fix modelled" words
            "; ".join(f"{f}: {reasons[f]}" for f in fixes if f in reasons)
            or ("" if fixes else NOT_MODELLED.get(phase, ""))
            or "no fix modelled"
        )
        out.append({"phase": phase, "ms": t, "share": t / v.wall_ms, "reason": reason})
    return out
