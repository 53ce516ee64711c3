"""Candidate fixes ranked by predicted tokens/s, each alone and stacked into a plan.

The fixes live in ``fixes_verify`` (graphs, fusion, host, kernel floors), ``fixes_comm``
(allreduce) and ``fixes_draft`` (draft count, drafter, draft graphs); ``plan`` stacks them.
Every candidate says which numbers it assumed; one that cannot apply to this trace is listed
under ``skipped`` with the reason (REFERENCE 6.12).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.fix import Candidate, Scenario, current_cycle
from verifyprof.model.fixes_comm import custom_allreduce
from verifyprof.model.fixes_draft import (
    better_drafter,
    cuda_graph_draft,
    draft_tokens,
    verify_at_width,
)
from verifyprof.model.fixes_verify import (
    FLOOR_PHASES,
    cuda_graph_verify,
    graph_fusion_verify,
    host_overhead,
    kernel_floor,
)
from verifyprof.model.plan import Builder, PlanStep, evaluate, stack, unaddressed
from verifyprof.model.profile import VerifyProfile
from verifyprof.model.throughput import Cycle
from verifyprof.model.verdict import verdict

SCHEMA = "verifyprof.whatif/1"


def _builders() -> list[tuple[str, Builder]]:
    return [
        ("cuda_graph_verify", cuda_graph_verify),
        ("graph_fusion_verify", graph_fusion_verify),
        ("host_overhead", host_overhead),
        ("custom_allreduce", lambda p, s, c: custom_allreduce(p, s, c, fused=False)),
        ("allreduce_fusion", lambda p, s, c: custom_allreduce(p, s, c, fused=True)),
        ("cuda_graph_draft", cuda_graph_draft),
        ("fewer_draft_tokens", lambda p, s, c: draft_tokens(p, s, c, more=False)),
        ("more_draft_tokens", lambda p, s, c: draft_tokens(p, s, c, more=True)),
        ("better_drafter", better_drafter),
        *[(f"kernel_floor:{phase}", kernel_floor(phase)) for phase in FLOOR_PHASES],
    ]


CANDIDATE_NAMES = tuple(name for name, _ in _builders())


@dataclass
class Ranking:
    current: Cycle
    profile: VerifyProfile
    scenario: Scenario
    candidates: list[Candidate]  # each alone, on today's measurements
    skipped: list[dict[str, str]]
    plan: list[PlanStep] = field(default_factory=list)  # stacked, best first

    def measured(self) -> dict[str, Any]:
        """Numbers users ask for that the trace measures directly."""
        p, s = self.profile, self.scenario
        k = s.num_draft or ((p.width - 1) if p.width else None)
        target = p.decode_ms or p.width_times.get(1)
        c = (s.draft_ms / k) / target if k and target and s.draft_ms > 0 else None
        widths = []
        n0 = p.width or (k or 0) + 1
        modelled = replace(s, use_measured_widths=False)
        for width, measured in sorted(
            p.width_times.items()
        ):  # t(n) predicted from the measured t(n0)
            change = verify_at_width(p, modelled, width)[0] - p.verify.wall_ms
            base = p.width_times.get(n0)
            widths.append(
                {
                    "width": width,
                    "measured_ms": measured,
                    "predicted_ms": base + change if base is not None else None,
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

    def to_json(self) -> dict[str, Any]:
        v = self.profile.verify
        current = self.current.to_json() | {
            "verify_steps": v.steps,
            "device": v.device,
            "rank": v.rank,
            "devices": self.profile.devices,
            "mode": v.mode,
            "width": self.profile.width,
            "num_draft": self.scenario.num_draft,
            "hardware": self.scenario.hardware.name if self.scenario.hardware else None,
            "model": self.scenario.model.name if self.scenario.model else None,
            "tp": self.scenario.tp,
            "kernels": v.kernels,
            "launches": v.launches,
            "verify_phases_ms": {p: t for p, t in v.phases_ms.items() if t > 0},
            "notes": self.profile.notes + self.scenario.notes,
            "source": self.profile.source,
        }
        gaps = unaddressed(self.profile, self.candidates, self.skipped)
        return {
            "schema": SCHEMA,
            "unit": "ms",
            "verdict": verdict(self.profile, self.current, self.plan, gaps),
            "current": current,
            "measured": self.measured(),
            "plan": [step.to_json() for step in self.plan],
            "unaddressed": gaps,
            "candidates": [c.to_json() for c in self.candidates],
            "skipped": self.skipped,
        }


def rank_candidates(
    profile: VerifyProfile, scenario: Scenario, only: list[str] | None = None
) -> Ranking:
    """Every applicable candidate alone (best predicted tokens/s first), the rest with their
    reasons, and the stacked plan."""
    builders = _builders()
    if only:
        unknown = [n for n in only if n not in CANDIDATE_NAMES]
        if unknown:
            raise VerifyprofError(
                f"unknown candidate {unknown[0]!r}: known are {', '.join(CANDIDATE_NAMES)}"
            )
        builders = [(n, b) for n, b in builders if n in only]
    candidates, skipped = evaluate(builders, profile, scenario)
    return Ranking(
        current_cycle(profile, scenario),
        profile,
        scenario,
        candidates,
        skipped,
        stack(builders, profile, scenario),
    )
