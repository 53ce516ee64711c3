"""The mean step of one group of steps on one device: what the model knows of a verify, draft,
accept, spec_step or decode step (built by :mod:`verifyprof.model.inputs.profile`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepGroup:
    """The mean of one group of steps on one device."""

    name: str
    device: int
    rank: int
    steps: int
    mode: str
    wall_ms: float  # the step's cost: its window less the GPU time of other steps' work in it
    gpu_span_ms: (
        float  # first op start to last op end: the idle outside it is at the window's edges
    )
    phases_ms: dict[str, float]
    totals_ms: dict[str, float]
    kernels: float
    launches: float
    graph_launches: float
    comm_calls: float | None
    comm_wait_ms: float | None
    counts: dict[str, float]  # kernels per phase
    attrs: dict[str, str]
    host_syncs: float = 0.0  # blocking host calls per step (syncs, synchronous copies)
    post_sync_ms: float = 0.0  # GPU idle after them until the next op
    kernels_cv: float = 0.0  # step-to-step variation of the kernel count (std / mean)
    window_ms: float = 0.0  # the step's whole window (range start to last op end)
    other_work_ms: float = 0.0  # GPU time of other steps' work inside the window (pipelining)
