"""The verdict: the verify step and what it is made of, in words, and the first line of the plan."""

from __future__ import annotations

from typing import Any

from verifyprof.model.profile import VerifyProfile
from verifyprof.model.throughput import Cycle

# What a dominant phase means, in the words a user acts on.
MEANING = {
    "launch_gap": (
        "the GPU starves while the host issues kernels one by one (what CUDA graphs remove)"
    ),
    "host_wait": (
        "the GPU waits for the host (Python, scheduling, syncs) or for work outside the step"
    ),
    "graph_launch": "the GPU waits while the host is inside the graph-launch call",
    "graph_gap": "idle between the nodes of the graph replay (many small kernels)",
    "allreduce": "exposed allreduce: communication the compute does not hide",
    "collective": "exposed collectives",
    "attention": "attention kernels",
    "gemm_moe": "MoE expert GEMMs",
    "gemm_dense": "dense GEMMs",
    "elementwise": "elementwise kernels (fusion would merge them)",
    "norm": "norm kernels",
    "moe_aux": "MoE routing kernels",
    "sampling": "sampling / rejection kernels",
    "spec": "speculative bookkeeping kernels",
    "other": "kernels no taxonomy rule matched",
    "memcpy": "copies",
}


def verdict(
    profile: VerifyProfile, now: Cycle | None, plan: list[Any], unaddressed: list[dict[str, Any]]
) -> str:
    """One paragraph: the verify step, its dominant cost in words and, with an accept length
    (``now``), the plan's first fix; without one, where the time goes only."""
    v = profile.verify
    width = f", width {profile.width}" if profile.width else ""
    what = (
        "verify" if "verify" in v.name else f"{v.name.replace('_', '-')} step"
    )  # a whole trace is no verify
    parts = [
        f"{what} {v.wall_ms:.3f} ms ({v.mode}{width}, {v.launches:.0f} launches, {v.kernels:.0f}"
        " kernels)"
    ]
    if v.other_work_ms > 0.01 * v.wall_ms:
        parts.append(
            f"its window is {v.window_ms:.3f} ms, {v.other_work_ms:.3f} ms of it other steps' GPU"
            " work (pipelined)"
        )
    top = sorted(v.phases_ms.items(), key=lambda kv: kv[1], reverse=True)[:2]
    if top and v.wall_ms > 0:
        phase, t = top[0]
        words = f"{t / v.wall_ms:.0%} {phase}: {MEANING.get(phase, phase)}"
        if len(top) > 1 and top[1][1] > 0.1 * v.wall_ms:
            words += f"; then {top[1][1] / v.wall_ms:.0%} {top[1][0]}"
        parts.append(words)
    line = "; ".join(parts) + "."
    if now is None:
        return (
            line
            + " Give an accept length (--accept-len or a capture manifest) for the plan of fixes."
        )
    if plan:
        first = plan[0]
        line += (
            f" First fix: {first.candidate.name} -> {first.cumulative_tps:.1f} tok/s "
            f"({first.cumulative_tps / now.tokens_per_s - 1:+.1%} over {now.tokens_per_s:.1f})"
        )
        if len(plan) > 1:
            line += f"; the whole plan ({len(plan)} fixes) -> {plan[-1].cumulative_tps:.1f} tok/s"
        line += "."
    else:
        line += f" No modelled fix raises {now.tokens_per_s:.1f} tok/s."
    if unaddressed:
        worst = max(unaddressed, key=lambda u: u["ms"])
        line += f" Not addressed: {worst['phase']} {worst['ms']:.3f} ms ({worst['reason']})."
    return line
