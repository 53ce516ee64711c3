"""Fixes of the verify's communication: a custom (one-/two-shot) allreduce, and allreduce fused
with the RMSNorm after it (FlashInfer trtllm_allreduce_fusion)."""

from __future__ import annotations

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.fixes.base import (
    Candidate,
    Scenario,
    Skip,
    edited,
    idle_split_ms,
    ms,
    predicted,
)
from verifyprof.model.inputs.profile import VerifyProfile
from verifyprof.model.inputs.step_group import StepGroup


def _allreduce_calls(v: StepGroup, s: Scenario) -> tuple[float, str]:
    if v.counts.get("allreduce"):
        return (
            v.counts["allreduce"],
            f"{v.counts['allreduce']:.0f} allreduce kernels per verify counted in the trace",
        )
    if s.model is not None:
        return (
            float(s.model.allreduces_per_forward),
            (
                f"{s.model.allreduces_per_forward} allreduces per forward (2 per layer + embedding,"
                f" {s.model.name})"
            ),
        )
    if v.comm_calls:
        return v.comm_calls, f"{v.comm_calls:.0f} collective calls per verify counted in the trace"
    raise Skip("number of allreduces per verify unknown: give --model (or a multi-rank trace)")


def _allreduce_bytes(profile: VerifyProfile, s: Scenario) -> tuple[float, int]:
    if s.model is None:
        raise Skip("message size unknown: give --model for the hidden size")
    tokens = (profile.width or (s.num_draft or 0) + 1) * s.batch
    return tokens * s.model.activation_bytes_per_token(), tokens


def custom_allreduce(
    profile: VerifyProfile, s: Scenario, now: Cycle, fused: bool = False
) -> Candidate:
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
    ratio = (wait + ms(calls * est.us)) / total
    exposed = v.phases_ms.get("allreduce", 0.0)
    deltas = {"allreduce": -exposed * (1.0 - ratio)}
    assumptions = [
        (
            f"{calls_note}; {nbytes / 1024:.0f} KB each ({tokens} tokens x {s.model.hidden} x 2 B),"
            f" now {per_call_now:.1f} us per call measured"
        ),
        f"custom allreduce {est.us:.1f} us per call at tp {s.tp}: {est.method}",
        (
            f"exposed allreduce ({exposed:.3f} ms of {total:.3f} ms busy) scales with the busy"
            f" time; rank-skew wait ({wait:.3f} ms) stays"
        ),
    ]
    if not s.hardware.custom_allreduce:
        assumptions.append(
            f"not on by default on {s.hardware.name} ({s.hardware.link.name}): needs a one-shot"
            " PCIe patch (vLLM PR #39633, lukealonso/sglang)"
        )
    details = {"allreduce_us": est.us, "measured_us": per_call_now, "calls": calls, "bytes": nbytes}
    name = "custom_allreduce"
    if fused:
        name = "allreduce_fusion"
        if not s.hardware.allreduce_fusion:
            raise Skip(
                "AR + RMSNorm fusion (FlashInfer trtllm_allreduce_fusion) is unavailable on"
                f" {s.hardware.name} (SM{s.hardware.compute_capability.replace('.', '')})"
            )
        norm = v.phases_ms.get("norm", 0.0)
        norms_per_forward = 2 * s.model.layers + 1
        share = min(1.0, calls / norms_per_forward)
        if v.mode == "graph":
            per_launch_us, idle_phase = s.hardware.launch.graph_node_us, "graph_gap"
            launch_note = f"{per_launch_us:g} us graph-node gap"
        else:
            per_launch_us, idle_phase = (
                idle_split_ms(v)[0] / max(v.kernels, 1.0) * 1e3,
                "launch_gap",
            )
            launch_note = f"{per_launch_us:.2f} us, the measured host-issue idle per kernel"
        removed_norm = norm * share
        removed_launch = min(ms(calls * per_launch_us), v.phases_ms.get(idle_phase, 0.0))
        deltas |= {"norm": -removed_norm, idle_phase: -removed_launch}
        assumptions += [
            (
                f"each allreduce absorbs the RMSNorm after it: {removed_norm:.3f} ms of norm time"
                f" ({share:.0%} of {norm:.3f} ms; {norms_per_forward} norms per forward)"
            ),
            f"one launch fewer per allreduce: {calls:.0f} x {launch_note}",
        ]
        details |= {"removed_norm_ms": removed_norm, "removed_launch_ms": removed_launch}
    after = edited(profile, deltas, kernels=v.kernels - (calls if fused else 0.0))
    return predicted(name, after, s, now, assumptions, details)
