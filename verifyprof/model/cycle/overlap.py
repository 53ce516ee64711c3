"""The host and the GPU racing through one speculative cycle: how long a cycle takes when some
phases are eager, some graph replays, and a host sync ends the cycle.

Summing phase times is right only while the GPU waits for the host throughout (eager and
host-bound). Once a phase is a graph replay, the host issues it in microseconds and runs ahead:
the eager launches of the next phase overlap the replay's GPU work, and only what the host does
after a sync (read the accepted tokens, prepare the next step, launch the first graph) stays
exposed. A two-clock simulation of a few cycles gives the steady-state period of any mix.
"""

from __future__ import annotations

from dataclasses import dataclass

CYCLES = 6  # simulated cycles: the period settles after the first one


@dataclass(frozen=True)
class Work:
    """One phase of the cycle as the host issues it and the GPU runs it (ms)."""

    name: str
    host_ms: float  # host time to issue it: Python plus the launch calls
    gpu_ms: float  # GPU time once started: kernels, copies, gaps inside a replay
    # issued piece by piece (eager ops, or several replays): it cannot end before the host has
    # issued its last piece and the GPU has run that piece (``tail_ms``); None: issued at once
    tail_ms: float | None = None
    lag_ms: float = 0.0  # from the start of its issue to its first GPU op (a graph launch call)
    sync: bool = False  # the host waits for the GPU after it
    after_sync_ms: float = 0.0  # host work after that sync before the next issue


def period_ms(works: list[Work], cycles: int = CYCLES) -> float:
    """Steady-state time per cycle of ``works`` run in order, repeatedly."""
    if not works:
        return 0.0
    host = gpu = 0.0
    ends = []
    for _ in range(cycles):
        for w in works:
            start = host
            host = start + w.host_ms
            gpu = max(gpu, start + w.lag_ms) + w.gpu_ms
            if w.tail_ms is not None:
                gpu = max(gpu, host + w.tail_ms)
            if w.sync:
                host = max(host, gpu) + w.after_sync_ms
        ends.append(max(gpu, host) if any(w.sync for w in works) else gpu)
    return ends[-1] - ends[-2]
