"""What every candidate fix is made of: the scenario it starts from, the predicted state after it,
and the edits of a verify profile that a fix makes.

A fix is a function ``(profile, scenario, now) -> Candidate``: it starts from the *measured*
verify (mean phases summing to the step's cost) and changes only what the fix would change, so
what the model does not know (kernel inefficiency, host waits, skew) carries over. Its result
holds the profile and scenario *after* the fix, so that fixes stack: the plan predicts each next
fix on top of the ones before it and never removes the same time twice.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from verifyprof.model.acceptance import Survival
from verifyprof.model.hardware import Hardware
from verifyprof.model.model_config import ModelConfig
from verifyprof.model.profile import StepGroup, VerifyProfile
from verifyprof.model.throughput import Cycle


@dataclass
class Scenario:
    """Everything besides the trace that the candidates need; None = unknown."""

    accept_len: float
    decode_ms: float | None = None
    draft_ms: float = 0.0
    overhead_ms: float = 0.0
    batch: int = 1
    num_draft: int | None = None  # drafts per cycle (chain: verify width - 1)
    survival: Survival | None = None
    hardware: Hardware | None = None
    model: ModelConfig | None = None
    tp: int = 1
    context: float = 0.0
    drafter_gain: float | None = None  # None: better_drafter from published drafter data
    use_measured_widths: bool = True
    drafter: str | None = None  # the drafter family in use, when the manifest says
    notes: list[str] = field(default_factory=list)


@dataclass
class Candidate:
    name: str
    cycle: Cycle
    current_tps: float
    assumptions: list[str]
    details: dict[str, Any] = field(default_factory=dict)
    profile: VerifyProfile | None = None  # the state after the fix (None: unchanged)
    scenario: Scenario | None = None

    @property
    def gain(self) -> float:
        return self.cycle.tokens_per_s / self.current_tps - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verify_ms": self.cycle.verify_ms,
            "draft_ms": self.cycle.draft_ms,
            "overhead_ms": self.cycle.overhead_ms,
            "cycle_ms": self.cycle.cycle_ms,
            "accept_len": self.cycle.accept_len,
            "tokens_per_s": self.cycle.tokens_per_s,
            "batch_tokens_per_s": self.cycle.batch_tokens_per_s,
            "speedup": self.cycle.speedup,
            "gain": self.gain,
            "assumptions": self.assumptions,
            **({"details": self.details} if self.details else {}),
        }


class Skip(Exception):
    """A candidate that does not apply to this trace; the message says why."""


def ms(us: float) -> float:
    return us / 1e3


def current_cycle(profile: VerifyProfile, scenario: Scenario) -> Cycle:
    return Cycle(
        verify_ms=profile.verify.wall_ms,
        accept_len=scenario.accept_len,
        draft_ms=scenario.draft_ms,
        overhead_ms=scenario.overhead_ms,
        batch=scenario.batch,
        decode_ms=scenario.decode_ms,
    )


def edited_group(
    group: StepGroup,
    deltas: dict[str, float],
    mode: str | None = None,
    kernels: float | None = None,
) -> StepGroup:
    """``group`` with phase times changed by ``deltas`` (ms; a phase never below zero) and the
    cost recomputed as the phases' sum, so an edited profile still adds up."""
    phases = dict(group.phases_ms)
    for phase, delta in deltas.items():
        phases[phase] = max(phases.get(phase, 0.0) + delta, 0.0)
    return replace(
        group,
        phases_ms=phases,
        wall_ms=sum(phases.values()),
        mode=mode or group.mode,
        kernels=group.kernels if kernels is None else kernels,
        counts=dict(group.counts),
        attrs=dict(group.attrs),
    )


def edited(
    profile: VerifyProfile,
    deltas: dict[str, float],
    mode: str | None = None,
    kernels: float | None = None,
) -> VerifyProfile:
    """The profile after a fix that changes the verify's phases by ``deltas``."""
    out = copy.copy(profile)
    out.verify = edited_group(profile.verify, deltas, mode, kernels)
    out.width_times = {}  # measured widths describe the old verify, not the fixed one
    return out


def take_idle(group: StepGroup, amount: float, order: tuple[str, ...]) -> dict[str, float]:
    """Deltas removing ``amount`` ms of idle from the phases in ``order``, first ones first."""
    deltas: dict[str, float] = {}
    left = amount
    for phase in order:
        take = min(group.phases_ms.get(phase, 0.0), left)
        if take > 0:
            deltas[phase] = -take
            left -= take
    return deltas


def idle_split_ms(v: StepGroup) -> tuple[float, float]:
    """(interior, edges) of a step's host-issue idle time: between its first and last op, and
    outside them.

    Interior idle in an eager step is the host issuing kernels one by one (launch calls and the
    Python between them); a graph issues them all at once. Idle at the edges (input preparation,
    the first launch's latency) happens with a graph too.
    """
    idle = v.phases_ms.get("launch_gap", 0.0) + v.phases_ms.get("host_wait", 0.0)
    edges = min(max(v.wall_ms - v.gpu_span_ms, 0.0), idle)
    return idle - edges, edges
