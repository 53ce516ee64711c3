"""Phase names and the priority that resolves overlapping GPU work.

When GPU ops of one step overlap in time (several streams), each instant is booked to exactly
one phase: the first in ``PRIORITY`` that is active. Compute comes first, so collectives and
copies count only where they are *exposed* (not hidden behind compute); their total, overlapped
or not, is reported separately. Idle time is split into ``launch_gap`` and ``host_wait``.
The phases of a step always sum to its ``wall_ns``.
"""

from __future__ import annotations

# Busy phases, highest priority first.
COMPUTE = (
    "attention",
    "gemm_moe",  # grouped / fused MoE expert GEMMs
    "moe_aux",  # routing, top-k gating, align/sort, permute, finalize
    "gemm_dense",
    "spec",  # tree build, tree verify, cache-loc assignment, bonus tokens
    "sampling",  # top-k/top-p renorm, speculative sampling
    "norm",
    "elementwise",  # activations, quantisation, torch/Inductor elementwise & reductions
    "other",  # compute kernels no rule matched (listed by name by `verifyprof kernels`)
    "graph",  # opaque whole-graph time (nsys --cuda-graph-trace=graph: kernels not recorded)
)
COLLECTIVES = ("allreduce", "collective")  # collective = allgather, broadcast, reduce-scatter, all-to-all, send/recv
COPIES = ("memcpy", "memset")
IDLE = ("launch_gap", "host_wait")

PRIORITY: tuple[str, ...] = COMPUTE + COLLECTIVES + COPIES
ALL: tuple[str, ...] = PRIORITY + IDLE
TOTALS: tuple[str, ...] = COLLECTIVES + COPIES  # also reported un-prioritised, hidden time included ("totals")
INDEX: dict[str, int] = {p: i for i, p in enumerate(ALL)}

GROUPS: dict[str, tuple[str, ...]] = {
    "compute": COMPUTE,
    "communication": COLLECTIVES,
    "copies": COPIES,
    "idle": IDLE,
}
