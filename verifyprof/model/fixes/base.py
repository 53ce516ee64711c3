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

from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.parts import Part, part_of
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.cycle.timing import Costs, timed
from verifyprof.model.inputs.acceptance import Survival
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup


@dataclass
class Scenario:
    """Everything besides the trace that the candidates need; None = unknown."""

    accept_len: float
    decode_ms: float | None = None
    decode_given: bool = False  # decode_ms is the user's (--baseline-tps / --decode-ms): it wins
    draft_ms: float = 0.0
    overhead_ms: float = 0.0
    batch: int = 1
    num_draft: int | None = None  # drafts per cycle (chain: verify width - 1)
    survival: Survival | None = None
    hardware: Hardware | None = None
    model: ModelConfig | None = None
    tp: int = 1
    context: float = 0.0
    # context is the user's (--context), not the one today's load ran at: no proof it fits
    context_given: bool = False
    drafter_gain: float | None = None  # None: better_drafter from published drafter data
    published: tuple[dict[str, Any], ...] = ()  # the drafter data files' entries (pipeline)
    use_measured_widths: bool = True
    drafter: str | None = None  # the drafter family in use, when the manifest says
    notes: list[str] = field(default_factory=list)
    # The cycle as parts (draft, accept, draft-extend, rest: the verify is the profile's) and how
    # the verify runs, so a fix re-times the whole cycle (model.cycle.timing); empty: additive.
    parts: tuple[Part, ...] = ()
    verify_mode: str | None = None  # "compiled" once a fix compiles the verify
    costs: Costs = field(default_factory=Costs)
    timing: Timing | None = None
    speculating: bool = True  # False: plain decoding (the verify is the decode step)
    capturable: Capturability | None = None
    sglang: bool = False  # the trace is an SGLang server's: its words and flags apply
    # whether the program runs plain decode steps as CUDA graphs, where known without the trace
    # (an SGLang server: yes unless its arguments disable them); None: from the trace
    decode_graphs: bool | None = None
    # the verify's cost as traced, and which basis today's numbers are on: "traced", or
    # "unprofiled" once anchored to a capture's unprofiled rate (model.fixes.anchor)
    traced_verify_ms: float | None = None
    basis: str = "traced"
    # the relative standard error of the rate today's cycle is anchored to (the median of its
    # samples or runs: model.inputs.anchor_rates.median_error); every k and every fix at this
    # load moves with it, so it widens a point's rate band and never a comparison between k
    anchor_band: float = 0.0
    # every capture of the program given (this one first) and the fits made from them
    # (model.fixes.measured); None: the plain-numbers path
    measured: Any = None  # model.fixes.measured.Measured (it imports this module)
    # why the captures given made no measured model (its fit is unusable: UnusableFit's line and
    # which capture would fix it): what rests on it (the load curve) is left out, saying this
    unfitted: str | None = None
    # where no capture states its context (issue 41): the assumption the load rows rest on, in
    # words (they are marked "assumed"); None: the context is stated
    context_assumed: str | None = None
    # the captures' own command with its batch as {batch} (issue 41): what the load curve's
    # "measured by" capture runs; None: the batch option is not known
    program_template: tuple[str, ...] | None = None
    # the capture folder whose manifest recorded that template with its {batch}: the measuring
    # capture is then ``capture --again FOLDER`` (cli/again.py), one line; None: the whole command
    program_source: str | None = None
    # where the accept length came from: "given" (an option: --accept-len, --alpha, --survival)
    # or "measured" (a manifest, the trace)
    accept_basis: str = "measured"
    # what the user gave that the trace contradicts (a --hardware other than its GPU), one line
    # each: shown under the verdict
    cautions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timing:
    """The measured cycle and what the race gives for the measured parts: a state's cycle is
    ``measured_ms + timed(state) - base_ms``."""

    measured_ms: float
    base_ms: float


@dataclass(frozen=True)
class Capturability:
    """What stops a CUDA graph from capturing the verify or the draft as it runs now."""

    syncs: dict[str, float]  # host syncs per step, by part
    kernel_cv: dict[str, float]  # step-to-step variation of the kernel count, by part
    assumed: bool = False  # --assume-capturable

    @property
    def blocked(self) -> bool:
        return not self.assumed and bool(self.reasons())

    def reasons(self, parts: tuple[str, ...] = ("verify", "draft")) -> list[str]:
        syncs = {p: n for p, n in self.syncs.items() if p in parts}
        cvs = {p: cv for p, cv in self.kernel_cv.items() if p in parts}
        out = [
            f"{counted(round(n), 'host sync')} per {part} step (stream/device/event synchronize"
            " or blocking copies to the host: .item(), .cpu(), nonzero, data-dependent routing): a"
            " graph"
            " cannot be captured across them; move the decisions onto the device first"
            for part, n in syncs.items()
            if n >= 0.5
        ]
        out += [
            f"the {part} launches a different number of kernels from step to step"
            f" ({100 * cv:.0f}% variation): dynamic shapes or data-dependent control flow;"
            " pad to static shapes first"
            for part, cv in cvs.items()
            if cv > KERNEL_CV_LIMIT
        ]
        return out


KERNEL_CV_LIMIT = 0.02  # kernel count varying more than 2% between steps: not one static graph


@dataclass
class Candidate:
    name: str
    cycle: Cycle
    current_tps: float
    assumptions: list[str]
    details: dict[str, Any] = field(default_factory=dict)
    profile: VerifyProfile | None = None  # the state after the fix (None: unchanged)
    scenario: Scenario | None = None
    blocked: list[str] = field(default_factory=list)  # what must change before it can apply
    warnings: list[str] = field(default_factory=list)

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
            **({"blocked_by": self.blocked} if self.blocked else {}),
            **({"warnings": self.warnings} if self.warnings else {}),
        }


class Skip(Exception):
    """A candidate that does not apply to this trace; the message says why."""


def ms(us: float) -> float:
    return us / 1e3


def current_cycle(profile: VerifyProfile, scenario: Scenario) -> Cycle:
    if scenario.timing is not None:
        return cycle_of(profile, scenario)
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


def verify_part(profile: VerifyProfile, s: Scenario) -> Part:
    part = part_of("verify", profile.verify, profile.verify.wall_ms)
    return replace(part, mode=s.verify_mode) if s.verify_mode else part


def state_parts(profile: VerifyProfile, s: Scenario) -> list[Part]:
    """The cycle's parts in order, the verify taken from the profile."""
    parts = list(s.parts)
    at = next((i for i, p in enumerate(parts) if p.name != "draft"), len(parts))
    return parts[:at] + [verify_part(profile, s)] + parts[at:]


def cycle_of(profile: VerifyProfile, s: Scenario) -> Cycle:
    """The cycle of a state: re-timed by the race when the scenario has parts, else the sum of
    verify, draft and overhead. Draft and verify are each part's own time; the overhead is the
    rest of the cycle (what the race hides of the host work shows there)."""
    verify = profile.verify.wall_ms
    if s.timing is None:
        return Cycle(verify, s.accept_len, s.draft_ms, s.overhead_ms, s.batch, s.decode_ms)
    parts = state_parts(profile, s)
    total = s.timing.measured_ms + timed(parts, s.costs) - s.timing.base_ms
    # never below the GPU's own work (or the measured step, where that is shorter): a fix
    # removes idle, not the kernels, so no offset drives a cycle to zero
    busy = sum(p.busy_ms + p.gap_ms for p in parts)
    total = max(total, min(busy, s.timing.measured_ms), 1e-3)
    draft = sum(p.cost_ms for p in parts if p.name == "draft")
    rest = total - verify - draft  # < 0: the race hides phase time behind other phases' work
    return Cycle(
        verify,
        s.accept_len,
        draft,
        max(rest, 0.0),
        s.batch,
        s.decode_ms,
        overlap_ms=max(-rest, 0.0),
    )


def predicted(
    name: str,
    profile: VerifyProfile,
    s: Scenario,
    now: Cycle,
    assumptions: list[str],
    details: dict[str, Any] | None = None,
) -> Candidate:
    """A candidate whose state after the fix is (``profile``, ``s``): its cycle re-timed."""
    return Candidate(
        name, cycle_of(profile, s), now.tokens_per_s, assumptions, details or {}, profile, s
    )
