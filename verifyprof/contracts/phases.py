"""Phase names and the priority that resolves overlapping GPU work.

When GPU ops of one step overlap in time (several streams), each instant is booked to exactly
one phase: the first in ``PRIORITY`` that is active. Compute comes first, so collectives and
copies count only where they are *exposed* (not hidden behind compute); their total, overlapped
or not, is reported separately. Time when the GPU runs other steps' work inside this step's
window is ``other_work``; idle time is split by what the GPU waited for (``IDLE``). The phases
of a step always sum to its ``wall_ns``; its cost is ``wall_ns - other_work``.
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
COLLECTIVES = (
    "allreduce",
    "collective",
)  # collective = allgather, broadcast, reduce-scatter, all-to-all, send/recv
COPIES = ("memcpy", "memset")
# Not idle and not this step's cost: the GPU runs work of other steps inside this step's window
# (steps queued back to back while the host runs ahead, as under an overlap scheduler).
OTHER = ("other_work",)
# The GPU idle, by what it waited for, most specific first:
IDLE = (
    "graph_gap",  # between the nodes of one graph replay of this step: no host-side fix removes it
    # a graph-launch call of this step on the host, up to its first node (its host
    # time)
    "graph_launch",
    "launch_gap",  # this step's eager launches being issued (what CUDA graphs remove)
    "host_wait",  # the host doing something else: Python, scheduling, syncs
)

PRIORITY: tuple[str, ...] = COMPUTE + COLLECTIVES + COPIES
ALL: tuple[str, ...] = PRIORITY + OTHER + IDLE
TOTALS: tuple[str, ...] = (
    COLLECTIVES + COPIES
)  # also reported un-prioritised, hidden time included ("totals")
INDEX: dict[str, int] = {p: i for i, p in enumerate(ALL)}

GROUPS: dict[str, tuple[str, ...]] = {
    "compute": COMPUTE,
    "communication": COLLECTIVES,
    "copies": COPIES,
    "other steps": OTHER,
    "idle": IDLE,
}
