"""Phase times of many (step, device) windows in one vectorised sweep.

Each window is a span ``[ws, we)`` holding GPU ops (start, end, phase) and *launch intervals*:
times when this step's work was being issued or queued (see ``breakdown.launch_intervals``). Boundaries of all windows are sorted once by
(window, time); between two consecutive boundaries nothing changes, so each elementary segment
is booked to the highest-priority phase active on it, or, when the GPU is idle, to
``launch_gap`` if a launch interval covers it (the GPU starves while this step's work is still
being issued: what CUDA graphs remove) and to ``host_wait`` otherwise (the host is doing
something else: Python, scheduling, syncs, waiting for input). Active counts are running sums
of +1/-1 deltas; every interval opens and closes inside its own window, so the sums return to
zero at each window's end, and the phases of a window sum to ``we - ws`` exactly.

Windows are processed in chunks of bounded size, so memory stays flat on million-kernel traces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifyprof.attribution import phases

TOTAL_PHASES = phases.COLLECTIVES + phases.COPIES  # also reported un-prioritised ("totals")
LAUNCH = -2  # pseudo-phase of launch intervals
BOUNDARY = -1  # window start/end markers
CHUNK_OPS = 1 << 21


@dataclass
class Windows:
    ws: np.ndarray  # int64 per window
    we: np.ndarray


@dataclass
class Ops:
    window: np.ndarray  # int64 window index per op (or per launch interval)
    start: np.ndarray
    end: np.ndarray
    phase: np.ndarray  # int8 index into phases.ALL; LAUNCH for launch intervals


@dataclass
class SweepResult:
    phase_ns: np.ndarray  # int64 [windows, len(phases.ALL)]
    total_ns: np.ndarray  # int64 [windows, len(TOTAL_PHASES)]


def sweep(windows: Windows, ops: Ops, launches: Ops) -> SweepResult:
    """``launches`` are intervals (phase ignored) inside their windows; they may overlap ops."""
    n = len(windows.ws)
    ops = Ops(
        np.concatenate([ops.window, launches.window]),
        np.concatenate([ops.start, launches.start]),
        np.concatenate([ops.end, launches.end]),
        np.concatenate([ops.phase.astype(np.int8), np.full(len(launches.window), LAUNCH, np.int8)]),
    )
    phase_ns = np.zeros((n, len(phases.ALL)), dtype=np.int64)
    total_ns = np.zeros((n, len(TOTAL_PHASES)), dtype=np.int64)
    order = np.argsort(ops.window, kind="stable")
    sorted_window = ops.window[order]
    # Chunk boundaries fall between windows, after about CHUNK_OPS ops each.
    cuts = np.searchsorted(sorted_window, np.arange(0, n + 1, dtype=np.int64), side="left")  # first op of each window
    lo_window = 0
    while lo_window < n:
        hi_window = int(np.searchsorted(cuts, cuts[lo_window] + CHUNK_OPS, side="right")) - 1
        hi_window = max(hi_window, lo_window + 1)
        sel = order[cuts[lo_window] : cuts[min(hi_window, n)]]
        chunk = Ops(ops.window[sel] - lo_window, ops.start[sel], ops.end[sel], ops.phase[sel])
        part = Windows(windows.ws[lo_window:hi_window], windows.we[lo_window:hi_window])
        phase_ns[lo_window:hi_window], total_ns[lo_window:hi_window] = _sweep_chunk(part, chunk)
        lo_window = hi_window
    wall = windows.we - windows.ws
    assert np.array_equal(phase_ns.sum(axis=1), wall), "phases must sum to wall time"
    return SweepResult(phase_ns, total_ns)


def _sweep_chunk(windows: Windows, ops: Ops) -> tuple[np.ndarray, np.ndarray]:
    n = len(windows.ws)
    n_ops = len(ops.window)
    window = np.concatenate([ops.window, ops.window, np.repeat(np.arange(n, dtype=np.int64), 2)]).astype(
        np.int32 if n < 2**31 else np.int64, copy=False
    )
    time = np.concatenate([ops.start, ops.end, np.stack([windows.ws, windows.we], axis=1).ravel()])
    delta = np.concatenate([np.ones(n_ops, np.int8), -np.ones(n_ops, np.int8), np.zeros(2 * n, np.int8)])
    phase = np.concatenate([ops.phase, ops.phase, np.full(2 * n, BOUNDARY, np.int8)])

    order = np.lexsort((time, window))
    window, time, delta, phase = window[order], time[order], delta[order], phase[order]
    del order

    seg = np.zeros(len(time), dtype=np.int64)  # segment j runs from event j to event j+1 of one window
    seg[:-1] = time[1:] - time[:-1]
    seg[:-1][window[1:] != window[:-1]] = 0

    phase_ns = np.zeros((n, len(phases.ALL)), dtype=np.int64)
    total_ns = np.zeros((n, len(TOTAL_PHASES)), dtype=np.int64)
    covered = np.zeros(len(time), dtype=bool)
    present = set(np.unique(ops.phase).tolist()) - {LAUNCH}
    for name in phases.PRIORITY:
        p = phases.INDEX[name]
        if p not in present:
            continue
        active = _active(phase, delta, p)
        phase_ns[:, p] = _sum_by(window, seg, active & ~covered, n)
        if name in TOTAL_PHASES:
            total_ns[:, TOTAL_PHASES.index(name)] = _sum_by(window, seg, active, n)
        covered |= active
    launching = _active(phase, delta, LAUNCH)
    idle = ~covered
    phase_ns[:, phases.INDEX["launch_gap"]] = _sum_by(window, seg, idle & launching, n)
    phase_ns[:, phases.INDEX["host_wait"]] = _sum_by(window, seg, idle & ~launching, n)
    return phase_ns, total_ns


def _active(phase: np.ndarray, delta: np.ndarray, p: int) -> np.ndarray:
    """Whether any interval of pseudo-phase ``p`` is open on each segment."""
    steps = np.where(phase == p, delta, np.int8(0)).astype(np.int32)
    return np.cumsum(steps, out=steps) > 0


def _sum_by(window: np.ndarray, seg: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    sums = np.bincount(window[mask], weights=seg[mask], minlength=n)
    return np.rint(sums).astype(np.int64)
