"""Phase names and the priority that resolves overlapping GPU work.

When GPU ops of one step overlap in time (several streams), each instant is booked to exactly
one phase: the first in ``PRIORITY`` that is active. Compute comes first, so collectives and
copies count only where they are *exposed* (not hidden behind compute); their total, overlapped
or not, is reported separately. Time when the GPU runs other steps' work inside this step's
window is ``other_work``; idle time is split by what the GPU waited for (``IDLE``). The phases
of a step always sum to its ``wall_ns``; its cost is ``wall_ns - other_work``.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class PhaseInfo:
    """What verifyprof says about one phase: its words in a verdict, and why no fix is
    modelled where none is. The fixes that shrink it are the model's (their ``shrinks``, in
    ``model.fixes.registry``); its colour is the report's (``report.figures.COLOURS``)."""

    words: str
    not_modelled: str = ""


INFO: dict[str, PhaseInfo] = {
    "attention": PhaseInfo("attention kernels"),
    "gemm_moe": PhaseInfo("MoE expert GEMMs"),
    "moe_aux": PhaseInfo("MoE routing kernels"),
    "gemm_dense": PhaseInfo("dense GEMMs"),
    "spec": PhaseInfo(
        "speculative bookkeeping kernels",
        not_modelled=(
            "speculative bookkeeping kernels (tree build, cache locations): no fix modelled"
        ),
    ),
    "sampling": PhaseInfo(
        "sampling / rejection kernels",
        not_modelled=(
            "sampling / rejection kernels inside verify: no fix modelled (a fused sampler would"
            " shrink it)"
        ),
    ),
    "norm": PhaseInfo("norm kernels"),
    "elementwise": PhaseInfo("elementwise kernels (fusion would merge them)"),
    "other": PhaseInfo(
        "kernels no taxonomy rule matched",
        not_modelled=(
            "kernels no taxonomy rule matched: list them with `verifyprof kernels` and add a rule"
            " (--taxonomy)"
        ),
    ),
    "graph": PhaseInfo(
        "opaque whole-graph time",
        not_modelled=(
            "opaque whole-graph time: capture with --cuda-graph-trace=node to see its kernels"
        ),
    ),
    "allreduce": PhaseInfo("exposed allreduce: communication the compute does not hide"),
    "collective": PhaseInfo(
        "exposed collectives", not_modelled="non-allreduce collectives: no fix modelled"
    ),
    "memcpy": PhaseInfo("copies", not_modelled="copies: no fix modelled"),
    "memset": PhaseInfo("memsets", not_modelled="memsets: no fix modelled"),
    "other_work": PhaseInfo("other steps' GPU work inside this step's window"),
    "graph_gap": PhaseInfo("idle between the nodes of the graph replay (many small kernels)"),
    "graph_launch": PhaseInfo("the GPU waits while the host is inside the graph-launch call"),
    "launch_gap": PhaseInfo(
        "the GPU starves while the host issues kernels one by one (what CUDA graphs remove)"
    ),
    "host_wait": PhaseInfo(
        "the GPU waits for the host (Python, scheduling, syncs) or for work outside the step"
    ),
}
assert set(INFO) == set(ALL), "every phase has one entry in INFO"
