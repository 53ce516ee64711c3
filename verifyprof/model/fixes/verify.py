"""Fixes of the verify forward itself: CUDA graphs, graphs plus fusion, the host off the critical
path, and kernels at their roofline floor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.parts import HEAVY_KERNEL_PHASES, SMALL_KERNEL_PHASES
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.cycle.verify_cost import phase_rooflines
from verifyprof.model.fixes.base import (
    Candidate,
    Scenario,
    Skip,
    edited,
    idle_split_ms,
    ms,
    predicted,
    take_idle,
)
from verifyprof.model.inputs.profile import VerifyProfile

FLOOR_PHASES = ("gemm_dense", "gemm_moe", "attention")


def launch_costs(s: Scenario) -> tuple[float, float, float, str]:
    """(graph launch, kernel launch, per-node gap) in us, and where they come from (the
    scenario's costs: calibrated from the trace's own graph steps where it has them)."""
    c = s.costs
    return c.graph_launch_us, c.kernel_launch_us, c.graph_node_us, c.source


def graphed(
    profile: VerifyProfile, s: Scenario, kernels: float
) -> tuple[dict[str, float], list[str]]:
    """Phase edits of capturing an eager verify of ``kernels`` kernels as one CUDA graph."""
    v = profile.verify
    graph_us, kernel_us, node_us, where = launch_costs(s)
    interior, edges = idle_split_ms(v)
    deltas = take_idle(v, interior, ("launch_gap", "host_wait"))
    deltas["graph_gap"] = ms(kernels * node_us)
    deltas["graph_launch"] = ms(max(graph_us - kernel_us, 0.0))
    notes = [
        (
            f"GPU idle between the verify's first and last kernel disappears: {interior:.3f} ms"
            f" (launch gap {v.phases_ms.get('launch_gap', 0.0):.3f} + host time between the"
            f" {counted(round(v.launches), 'launch')}, less the edges)"
        ),
        (
            f"idle before the first / after the last kernel stays ({edges:.3f} ms: input"
            f" preparation, first launch); a graph launch costs {graph_us:g} us instead of a kernel"
            f" launch's {kernel_us:g} us"
        ),
        f"each of the {kernels:.0f} kernel nodes adds {node_us:g} us of GPU-side gap ({where})",
    ]
    return deltas, notes


def capture_note(s: Scenario) -> str:
    """What a graph of the verify assumes about it, in the words of the trace's framework."""
    if s.sglang:
        return (
            "kernel, copy and communication times are the same inside the graph; the verify can be"
            " captured (static shapes: SGLang's can_run_graph true at this batch and width)"
        )
    return (
        "kernel, copy and communication times are the same inside the graph; the verify can be"
        " captured as it runs now (static shapes, no host syncs inside it)"
    )


def graphed_verify(profile: VerifyProfile, s: Scenario) -> tuple[VerifyProfile, list[str]]:
    """The verify captured as one CUDA graph: the profile after, and what that assumed."""
    v = profile.verify
    if v.mode == "graph":
        raise Skip("verify already runs as a CUDA graph")
    if v.kernels <= 0:
        raise Skip("verify launched no kernels")
    deltas, notes = graphed(profile, s, v.kernels)
    return edited(profile, deltas, mode="graph"), notes + [capture_note(s)]


def cuda_graph_verify(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    after, notes = graphed_verify(profile, s)
    removed = profile.verify.wall_ms - after.verify.wall_ms
    return predicted("cuda_graph_verify", after, s, now, notes, {"removed_ms": removed})


def fused_verify(profile: VerifyProfile, s: Scenario) -> tuple[VerifyProfile, list[str]]:
    """torch.compile(mode="reduce-overhead")-style: a CUDA graph whose small elementwise, norm
    and routing kernels are fused into one kernel per region between heavy kernels."""
    v = profile.verify
    small = sum(v.counts.get(p, 0.0) for p in SMALL_KERNEL_PHASES)
    heavy = sum(v.counts.get(p, 0.0) for p in HEAVY_KERNEL_PHASES)
    small_ms = sum(v.phases_ms.get(p, 0.0) for p in SMALL_KERNEL_PHASES)
    if small <= 1 or small_ms <= 0:
        raise Skip("no elementwise / norm kernels to fuse in the verify")
    fused = min(small, heavy + 1.0)
    if fused >= small:
        raise Skip(
            f"elementwise / norm kernels are already fused ({small:.0f} for {heavy:.0f}"
            " GEMM/attention kernels)"
        )
    per_kernel = small_ms / small
    kernels_after = v.kernels - (small - fused)
    deltas: dict[str, float] = {
        p: -v.phases_ms.get(p, 0.0) * (1 - fused / small) for p in SMALL_KERNEL_PHASES
    }
    notes = [
        (
            f"{small:.0f} elementwise / norm / routing kernels ({small_ms:.3f} ms) fuse into"
            f" {fused:.0f}, one per region between the {heavy:.0f} GEMM and attention kernels, each"
            f" costing the measured mean small kernel ({per_kernel * 1e3:.1f} us): at verify sizes"
            " they are bound by launch and memory latency, not by traffic"
        ),
        "GEMM, attention, communication and copy kernels unchanged",
    ]
    _, _, node_us, where = launch_costs(s)
    if v.mode == "graph":
        deltas["graph_gap"] = -min(v.phases_ms.get("graph_gap", 0.0), ms((small - fused) * node_us))
        notes.append(
            f"one graph node fewer per fused-away kernel: {small - fused:.0f} x {node_us:g} us of"
            f" node gap ({where})"
        )
    else:
        graph_deltas, graph_notes = graphed(profile, s, kernels_after)
        for phase, delta in graph_deltas.items():
            deltas[phase] = deltas.get(phase, 0.0) + delta
        notes = graph_notes + notes
    call_us = s.costs.compiled_call_us
    if call_us > 0:
        deltas["host_wait"] = deltas.get("host_wait", 0.0) + ms(call_us)
        notes.append(
            f"the compiled call's own host work before each replay (guards, cudagraph trees'"
            f" bookkeeping): {call_us:g} us that the GPU waits for unless the host is ahead"
            f" ({s.costs.source})"
        )
    after = edited(profile, deltas, mode="graph", kernels=kernels_after)
    notes.append(
        "an upper bound when compile also fuses GEMM epilogues or picks other GEMM kernels:"
        " validated on the H200 (bench/README)"
    )
    if v.mode != "graph":
        notes.append(capture_note(s))
    return after, notes


def graph_fusion_verify(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    v = profile.verify
    after, notes = fused_verify(profile, s)
    return predicted(
        "graph_fusion_verify",
        after,
        replace(s, verify_mode="compiled"),
        now,
        notes,
        {"kernels_before": v.kernels, "kernels_after": after.verify.kernels},
    )


def host_overhead(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    """The GPU waiting for the host inside the verify (Python, scheduling, syncs, slow graph
    launches): moved off the critical path, as an overlap scheduler or a leaner host loop does."""
    v = profile.verify
    graph_us, _, _, where = launch_costs(s)
    host = v.phases_ms.get("host_wait", 0.0)
    launch = max(
        v.phases_ms.get("graph_launch", 0.0)
        - ms(graph_us) * max(v.graph_launches, 1.0 if v.mode == "graph" else 0.0),
        0.0,
    )
    if host + launch <= 1e-3:
        raise Skip("the GPU hardly waits for the host in the verify (under 1 us)")
    after = edited(profile, {"host_wait": -host, "graph_launch": -launch})
    return predicted(
        "host_overhead",
        after,
        s,
        now,
        [
            (
                f"GPU idle while the host was elsewhere ({host:.3f} ms host wait: Python,"
                " scheduling, syncs, blocked queues) leaves the critical path"
            ),
            (
                f"graph-launch host time above {graph_us:g} us per launch ({launch:.3f} ms)"
                f" disappears ({where}; SGLang #29960: multi-ms cudaGraphLaunch)"
            ),
            (
                "an upper bound: it assumes the host work can overlap the GPU (overlap scheduler,"
                " CPU-side fixes)"
            ),
        ],
        {"host_wait_ms": host, "graph_launch_ms": launch},
    )


def kernel_floor(phase: str) -> Callable[[VerifyProfile, Scenario, Cycle], Candidate]:
    def build(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
        v = profile.verify
        measured = v.phases_ms.get(phase, 0.0)
        if measured <= 0:
            raise Skip(f"no {phase} time in the verify step")
        missing = [o for o, v in (("--model", s.model), ("--hardware", s.hardware)) if v is None]
        if missing:  # the hardware is often recognised from the trace: name only what is not
            raise Skip(f"roofline floor needs {' and '.join(missing)}")
        if phase == "gemm_moe" and s.model.moe is None:
            raise Skip(f"{s.model.name} has no MoE layers")
        if phase == "attention" and s.context <= 0:
            raise Skip("attention floor needs the context length: give --context")
        tokens = (profile.width or (s.num_draft or 0) + 1) * s.batch
        roof = phase_rooflines(s.model, tokens, s.tp, s.context)[phase]
        dtype = {
            "gemm_dense": s.model.dense_dtype,
            "gemm_moe": s.model.expert_dtype,
            "attention": s.model.kv_dtype,
        }[phase]
        peak = s.hardware.peak_tflops(dtype)
        mem_ms = roof.bytes / (s.hardware.bandwidth_tbps * 1e12) * 1e3
        flop_ms = roof.flops / (peak * 1e12) * 1e3
        floor = max(mem_ms, flop_ms)
        if floor >= measured:
            raise Skip(
                f"{phase} already at its roofline floor ({measured:.3f} ms measured, floor"
                f" {floor:.3f} ms)"
            )
        bound = "memory" if mem_ms >= flop_ms else "compute"
        after = edited(profile, {phase: floor - measured})
        return predicted(
            f"kernel_floor:{phase}",
            after,
            s,
            now,
            [
                (
                    f"{phase} ({measured:.3f} ms measured) falls to its {bound}-bound floor"
                    f" {floor:.3f} ms: {roof.bytes / 1e9:.3f} GB / {s.hardware.bandwidth_tbps:g}"
                    f" TB/s = {mem_ms:.3f} ms, {roof.flops / 1e12:.3f} TFLOP / {peak:g} TFLOPS"
                    f" ({dtype}) = {flop_ms:.3f} ms, per GPU at tp {s.tp}"
                ),
                f"{tokens} tokens per forward ({s.model.name}"
                + (f", context {s.context:g}" if phase == "attention" else "")
                + "); peak numbers, not achievable ones: an upper bound on the gain",
            ],
            {"floor_ms": floor, "measured_ms": measured},
        )

    return build
