"""Candidate optimizations, each a predicted verify step and cycle, ranked by tokens/s.

Every candidate starts from the *measured* verify (the breakdown's mean phases, which sum to its
wall time) and changes only what the fix would change, so whatever the model does not know
(kernel inefficiency, host waits, skew) carries over unchanged. Each says which numbers it
assumed; a candidate that cannot apply to this trace is listed under ``skipped`` with the reason
(REFERENCE 6.12).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.acceptance import Survival
from verifyprof.model.hardware import Hardware
from verifyprof.model.leviathan import expected_tokens
from verifyprof.model.model_config import ModelConfig
from verifyprof.model.profile import VerifyProfile
from verifyprof.model.throughput import Cycle
from verifyprof.model.verify_cost import phase_rooflines, width_scaling

FLOOR_PHASES = ("gemm_dense", "gemm_moe", "attention")
MAX_EXTRA_DRAFTS = 4


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
    drafter_gain: float = 0.5
    use_measured_widths: bool = True
    notes: list[str] = field(default_factory=list)


@dataclass
class Candidate:
    name: str
    cycle: Cycle
    current_tps: float
    assumptions: list[str]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def gain(self) -> float:
        return self.cycle.tokens_per_s / self.current_tps - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verify_ms": self.cycle.verify_ms,
            "cycle_ms": self.cycle.cycle_ms,
            "accept_len": self.cycle.accept_len,
            "tokens_per_s": self.cycle.tokens_per_s,
            "batch_tokens_per_s": self.cycle.batch_tokens_per_s,
            "speedup": self.cycle.speedup,
            "gain": self.gain,
            "assumptions": self.assumptions,
            **({"details": self.details} if self.details else {}),
        }


@dataclass
class Ranking:
    current: Cycle
    profile: VerifyProfile
    scenario: Scenario
    candidates: list[Candidate]
    skipped: list[dict[str, str]]

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
        return {
            "current": current,
            "candidates": [c.to_json() for c in self.candidates],
            "skipped": self.skipped,
        }


class Skip(Exception):
    """A candidate that does not apply to this trace; the message says why."""


def _ms(us: float) -> float:
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


# ---- the candidates ------------------------------------------------------------------------


def idle_split_ms(v) -> tuple[float, float]:
    """(interior, edges) of a step's GPU idle time: between its first and last op, and outside them.

    Interior idle in an eager step is the host issuing kernels one by one (launch calls and the
    Python between them); a graph issues them all at once. Idle at the edges (input preparation,
    the first launch's latency) happens with a graph too.
    """
    idle = v.phases_ms.get("launch_gap", 0.0) + v.phases_ms.get("host_wait", 0.0)
    edges = min(max(v.wall_ms - v.gpu_span_ms, 0.0), idle)
    return idle - edges, edges


def cuda_graph_verify(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    v = profile.verify
    if v.mode == "graph":
        raise Skip("verify already runs as a CUDA graph")
    if v.kernels <= 0:
        raise Skip("verify launched no kernels")
    launch = s.hardware.launch if s.hardware else None
    graph_us = launch.graph_launch_us if launch else 8.0
    kernel_us = launch.kernel_launch_us if launch else 5.0
    node_us = launch.graph_node_us if launch else 1.0
    where = f"hardware file {s.hardware.name}" if s.hardware else "defaults (no --hardware)"
    interior, edges = idle_split_ms(v)
    added = _ms(max(graph_us - kernel_us, 0.0) + v.kernels * node_us)
    verify = v.wall_ms - interior + added
    return Candidate(
        "cuda_graph_verify",
        now.with_(verify_ms=verify),
        now.tokens_per_s,
        [
            f"GPU idle between the verify's first and last kernel disappears: {interior:.3f} ms (launch gap "
            f"{v.phases_ms.get('launch_gap', 0.0):.3f} + host time between the {v.launches:.0f} launches, less the edges)",
            f"idle before the first / after the last kernel stays ({edges:.3f} ms: input preparation, first launch); "
            f"a graph launch costs {graph_us:g} us instead of a kernel launch's {kernel_us:g} us",
            f"each of the {v.kernels:.0f} kernel nodes adds {node_us:g} us of GPU-side gap ({where})",
            "kernel, copy and communication times are the same inside the graph; the verify can be captured "
            "(static shapes: SGLang's can_run_graph true at this batch and width)",
        ],
        {"removed_ms": interior, "added_ms": added},
    )


def _allreduce_calls(v, s: Scenario) -> tuple[float, str]:
    if v.counts.get("allreduce"):
        return v.counts["allreduce"], f"{v.counts['allreduce']:.0f} allreduce kernels per verify counted in the trace"
    if s.model is not None:
        return float(s.model.allreduces_per_forward), f"{s.model.allreduces_per_forward} allreduces per forward (2 per layer + embedding, {s.model.name})"
    if v.comm_calls:
        return v.comm_calls, f"{v.comm_calls:.0f} collective calls per verify counted in the trace"
    raise Skip("number of allreduces per verify unknown: give --model (or a multi-rank trace)")


def _allreduce_bytes(profile: VerifyProfile, s: Scenario) -> tuple[float, int]:
    if s.model is None:
        raise Skip("message size unknown: give --model for the hidden size")
    tokens = (profile.width or (s.num_draft or 0) + 1) * s.batch
    return tokens * s.model.activation_bytes_per_token(), tokens


def custom_allreduce(profile: VerifyProfile, s: Scenario, now: Cycle, fused: bool = False) -> Candidate:
    v = profile.verify
    total = v.totals_ms.get("allreduce", 0.0)
    if total <= 0:
        raise Skip("no allreduce in the verify step")
    if s.tp <= 1:
        raise Skip("single GPU (tp 1): give --tp for a tensor-parallel trace")
    if s.hardware is None:
        raise Skip("topology unknown: give --hardware (and --link)")
    calls, calls_note = _allreduce_calls(v, s)
    nbytes, tokens = _allreduce_bytes(profile, s)
    est = s.hardware.allreduce_us(nbytes, s.tp, "custom")
    wait = v.comm_wait_ms or 0.0
    transfer = max(total - wait, 0.0)
    per_call_now = transfer / calls * 1e3
    new_total = wait + _ms(calls * est.us)
    ratio = new_total / total
    exposed = v.phases_ms.get("allreduce", 0.0)
    saved = exposed * (1.0 - ratio)
    assumptions = [
        f"{calls_note}; {nbytes / 1024:.0f} KB each ({tokens} tokens x {s.model.hidden} x 2 B), now {per_call_now:.1f} us per call measured",
        f"custom allreduce {est.us:.1f} us per call at tp {s.tp}: {est.method}",
        f"exposed allreduce ({exposed:.3f} ms of {total:.3f} ms busy) scales with the busy time; rank-skew wait ({wait:.3f} ms) stays",
    ]
    if not s.hardware.custom_allreduce:
        assumptions.append(f"not on by default on {s.hardware.name} ({s.hardware.link.name}): needs a one-shot PCIe patch (vLLM PR #39633, lukealonso/sglang)")
    verify = v.wall_ms - saved
    details = {"allreduce_us": est.us, "measured_us": per_call_now, "calls": calls, "bytes": nbytes}
    name = "custom_allreduce"
    if fused:
        name = "allreduce_fusion"
        if not s.hardware.allreduce_fusion:
            raise Skip(f"AR + RMSNorm fusion (FlashInfer trtllm_allreduce_fusion) is unavailable on {s.hardware.name} (SM{s.hardware.compute_capability.replace('.', '')})")
        norm = v.phases_ms.get("norm", 0.0)
        norms_per_forward = 2 * s.model.layers + 1
        share = min(1.0, calls / norms_per_forward)
        if v.mode == "graph":
            per_launch_us = s.hardware.launch.graph_node_us
            launch_note = f"{per_launch_us:g} us graph-node gap"
        else:
            per_launch_us = idle_split_ms(v)[0] / max(v.kernels, 1.0) * 1e3
            launch_note = f"{per_launch_us:.2f} us, the measured host-issue idle per kernel"
        removed_norm = norm * share
        removed_launch = _ms(calls * per_launch_us)
        verify -= removed_norm + removed_launch
        assumptions += [
            f"each allreduce absorbs the RMSNorm after it: {removed_norm:.3f} ms of norm time ({share:.0%} of {norm:.3f} ms; {norms_per_forward} norms per forward)",
            f"one launch fewer per allreduce: {calls:.0f} x {launch_note}",
        ]
        details |= {"removed_norm_ms": removed_norm, "removed_launch_ms": removed_launch}
    return Candidate(name, now.with_(verify_ms=verify), now.tokens_per_s, assumptions, details)


def _survival(profile: VerifyProfile, s: Scenario, k: int) -> tuple[Survival, str]:
    if s.survival is not None:
        return s.survival, f"survival curve ({s.survival.source}) {', '.join(f'{x:.2f}' for x in s.survival.s)}"
    alpha = _fit_alpha(s.accept_len, k)
    return Survival.from_alpha(alpha, k), f"i.i.d. acceptance alpha={alpha:.3f} fitted to accept length {s.accept_len:.2f} at {k} drafts (Eq. 1); give --survival to do better"


def _fit_alpha(accept_len: float, k: int) -> float:
    """Invert Eq. (1) by bisection: the alpha whose expected tokens at k drafts is accept_len."""
    if accept_len >= k + 1:
        return 0.999999
    lo, hi = 0.0, 0.999999
    for _ in range(100):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < accept_len:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def verify_at_width(profile: VerifyProfile, s: Scenario, width: int) -> tuple[float, list[str]]:
    """t(width): measured when the trace has that width, else the measured phases rescaled."""
    v = profile.verify
    n0 = profile.width or (s.num_draft or 0) + 1
    if width == n0:
        return v.wall_ms, []
    measured = profile.width_times
    if s.use_measured_widths and width in measured and n0 in measured:
        change = measured[width] - measured[n0]
        return v.wall_ms + change, [
            f"t({width}) - t({n0}) measured in the trace: {measured[width]:.3f} - {measured[n0]:.3f} ms = {change:+.3f} ms, "
            f"added to the modelled verify's {v.wall_ms:.3f} ms"
        ]
    ar = None
    if s.hardware is not None and s.tp > 1:
        ar = lambda nbytes: s.hardware.allreduce_us(nbytes, s.tp, "nccl").us
    scaling = width_scaling(n0 * s.batch, width * s.batch, s.model, s.hardware, s.tp, s.context, ar)
    total = sum(scaling.apply(v.phases_ms).values())
    changes = [f"{p} x{f:.2f}" for p, f in scaling.factors.items() if v.phases_ms.get(p, 0) > 0]
    changes += [f"{p} {d:+.3f} ms" for p, d in scaling.deltas_ms.items() if v.phases_ms.get(p, 0) > 0]
    return total, [f"t({width}) from the measured t({n0}) phase by phase" + (f": {', '.join(changes)}" if changes else "")] + scaling.notes


def draft_tokens(profile: VerifyProfile, s: Scenario, now: Cycle, more: bool) -> Candidate:
    k = s.num_draft or ((profile.width - 1) if profile.width else None)
    if not k:
        raise Skip("number of draft tokens unknown: give --num-draft (or a trace with verify tokens=N)")
    if not more and k <= 1:
        raise Skip("already 1 draft token")
    survival, survival_note = _survival(profile, s, k)
    options = range(k + 1, k + 1 + MAX_EXTRA_DRAFTS) if more else range(1, k)
    best: Candidate | None = None
    tried: list[dict[str, float]] = []
    n0 = profile.width or k + 1
    for k2 in options:
        # a chain verifies k+1 tokens; a tree (width != k+1) is taken to shrink or grow in proportion
        width = k2 + 1 if n0 == k + 1 else max(1, round(n0 * (k2 + 1) / (k + 1)))
        verify, notes = verify_at_width(profile, s, width)
        # the measured accept length carries over; the curve gives the change from k to k2 drafts
        tau = min(max(s.accept_len + survival.accept_len(k2) - survival.accept_len(k), 1.0), k2 + 1.0)
        draft = s.draft_ms * k2 / k
        cycle = now.with_(verify_ms=verify, accept_len=tau, draft_ms=draft)
        assumptions = [
            f"chain drafting: {k2} drafts verified as {width} tokens per request (now {k} as {k + 1})"
            if n0 == k + 1
            else f"verify width {n0} for {k} drafts (a tree): {k2} drafts taken to verify {width} tokens, in proportion",
            f"accept length {tau:.3f} at {k2} drafts: the measured {s.accept_len:.3f} "
            f"{survival.accept_len(k2) - survival.accept_len(k):+.3f} from the {survival_note}"
            + (" (extrapolated past the measured positions)" if survival.is_extrapolated(k2) else ""),
            f"draft time scales with the number of draft steps: {s.draft_ms:.3f} -> {draft:.3f} ms",
            *notes,
        ]
        name = "more_draft_tokens" if more else "fewer_draft_tokens"
        cand = Candidate(name, cycle, now.tokens_per_s, assumptions, {"num_draft": k2, "width": width})
        tried.append({"num_draft": k2, "width": width, "verify_ms": verify, "accept_len": tau, "tokens_per_s": cycle.tokens_per_s})
        if best is None or cand.cycle.tokens_per_s > best.cycle.tokens_per_s:
            best = cand
    assert best is not None
    best.details["options"] = tried  # every k' evaluated, best kept
    return best


def better_drafter(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    k = s.num_draft or ((profile.width - 1) if profile.width else None)
    ceiling = k + 1 if k else None
    tau = s.accept_len + s.drafter_gain
    capped = ceiling is not None and tau > ceiling
    if capped:
        tau = float(ceiling)
    if tau <= s.accept_len:
        raise Skip(f"accept length {s.accept_len:.2f} already at its ceiling of {ceiling} for {k} drafts")
    return Candidate(
        "better_drafter",
        now.with_(accept_len=tau),
        now.tokens_per_s,
        [
            f"accept length +{tau - s.accept_len:.2f} ({s.accept_len:.2f} -> {tau:.2f}; --drafter-gain {s.drafter_gain:g})"
            + (f", capped at k+1 = {ceiling}" if capped else ""),
            "the new drafter costs the same draft time and the verify is unchanged",
        ],
    )


def kernel_floor(phase: str) -> Callable[[VerifyProfile, Scenario, Cycle], Candidate]:
    def build(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
        v = profile.verify
        measured = v.phases_ms.get(phase, 0.0)
        if measured <= 0:
            raise Skip(f"no {phase} time in the verify step")
        if s.model is None or s.hardware is None:
            raise Skip("roofline floor needs --model and --hardware")
        if phase == "gemm_moe" and s.model.moe is None:
            raise Skip(f"{s.model.name} has no MoE layers")
        if phase == "attention" and s.context <= 0:
            raise Skip("attention floor needs the context length: give --context")
        tokens = (profile.width or (s.num_draft or 0) + 1) * s.batch
        roof = phase_rooflines(s.model, tokens, s.tp, s.context)[phase]
        dtype = {"gemm_dense": s.model.dense_dtype, "gemm_moe": s.model.expert_dtype, "attention": s.model.kv_dtype}[phase]
        peak = s.hardware.peak_tflops(dtype)
        mem_ms = roof.bytes / (s.hardware.bandwidth_tbps * 1e12) * 1e3
        flop_ms = roof.flops / (peak * 1e12) * 1e3
        floor = max(mem_ms, flop_ms)
        if floor >= measured:
            raise Skip(f"{phase} already at its roofline floor ({measured:.3f} ms measured, floor {floor:.3f} ms)")
        bound = "memory" if mem_ms >= flop_ms else "compute"
        return Candidate(
            f"kernel_floor:{phase}",
            now.with_(verify_ms=v.wall_ms - (measured - floor)),
            now.tokens_per_s,
            [
                f"{phase} ({measured:.3f} ms measured) falls to its {bound}-bound floor {floor:.3f} ms: "
                f"{roof.bytes / 1e9:.3f} GB / {s.hardware.bandwidth_tbps:g} TB/s = {mem_ms:.3f} ms, "
                f"{roof.flops / 1e12:.3f} TFLOP / {peak:g} TFLOPS ({dtype}) = {flop_ms:.3f} ms, per GPU at tp {s.tp}",
                f"{tokens} tokens per forward ({s.model.name}"
                + (f", context {s.context:g}" if phase == "attention" else "")
                + "); peak numbers, not achievable ones: an upper bound on the gain",
            ],
            {"floor_ms": floor, "measured_ms": measured},
        )

    return build


def _builders() -> list[tuple[str, Callable[[VerifyProfile, Scenario, Cycle], Candidate]]]:
    return [
        ("cuda_graph_verify", cuda_graph_verify),
        ("custom_allreduce", lambda p, s, c: custom_allreduce(p, s, c, fused=False)),
        ("allreduce_fusion", lambda p, s, c: custom_allreduce(p, s, c, fused=True)),
        ("fewer_draft_tokens", lambda p, s, c: draft_tokens(p, s, c, more=False)),
        ("more_draft_tokens", lambda p, s, c: draft_tokens(p, s, c, more=True)),
        ("better_drafter", better_drafter),
        *[(f"kernel_floor:{phase}", kernel_floor(phase)) for phase in FLOOR_PHASES],
    ]


CANDIDATE_NAMES = tuple(name for name, _ in _builders())


def rank_candidates(profile: VerifyProfile, scenario: Scenario, only: list[str] | None = None) -> Ranking:
    """Every applicable candidate, best predicted tokens/s first; the rest with their reasons."""
    if only:
        unknown = [n for n in only if n not in CANDIDATE_NAMES]
        if unknown:
            raise VerifyprofError(f"unknown candidate {unknown[0]!r}: known are {', '.join(CANDIDATE_NAMES)}")
    now = current_cycle(profile, scenario)
    candidates: list[Candidate] = []
    skipped: list[dict[str, str]] = []
    for name, build in _builders():
        if only and name not in only:
            continue
        try:
            candidates.append(build(profile, scenario, now))
        except Skip as why:
            skipped.append({"name": name, "reason": str(why)})
    candidates.sort(key=lambda c: c.cycle.tokens_per_s, reverse=True)
    return Ranking(now, profile, scenario, candidates, skipped)
