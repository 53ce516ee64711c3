"""Phase times of many (step, device) windows in one vectorised sweep.

Each window is a span ``[ws, we)`` with a set of GPU ops (start, end, phase) inside it and a
launch span ``[ls, le)``. Boundaries of all windows are sorted once by (window, time); between
two consecutive boundaries of a window nothing changes, so each elementary segment is booked
to the highest-priority phase active on it, or, if none, to ``launch_gap`` (inside the launch
span, from the step's first launch call to the later of its last launch call's end and its last
op's start: the GPU starves while the step's work is still being issued and scheduled, which is
what CUDA graphs remove) or ``host_wait``
(outside it). Active counts per phase are running sums of +1/-1 deltas, and since each op opens
and closes inside its own window, the sums return to zero at every window's end. The phases of
a window therefore sum to ``we - ws`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifyprof.attribution import phases

TOTAL_PHASES = phases.COLLECTIVES + phases.COPIES  # also reported un-prioritised ("totals")


@dataclass
class Windows:
    ws: np.ndarray  # int64 per window
    we: np.ndarray
    ls: np.ndarray  # launch span; ls == le when nothing was launched
    le: np.ndarray


@dataclass
class SweepResult:
    phase_ns: np.ndarray  # int64 [windows, len(phases.ALL)]
    total_ns: np.ndarray  # int64 [windows, len(TOTAL_PHASES)]


def sweep(windows: Windows, op_window: np.ndarray, op_start: np.ndarray, op_end: np.ndarray, op_phase: np.ndarray) -> SweepResult:
    n = len(windows.ws)
    n_ops = len(op_window)
    window = np.concatenate(
        [op_window, op_window, np.repeat(np.arange(n, dtype=np.int64), 4)]
    ).astype(np.int64, copy=False)
    time = np.concatenate([op_start, op_end, np.stack([windows.ws, windows.we, windows.ls, windows.le], axis=1).ravel()])
    delta = np.concatenate([np.ones(n_ops, np.int32), -np.ones(n_ops, np.int32), np.zeros(4 * n, np.int32)])
    phase = np.concatenate([op_phase, op_phase, np.full(4 * n, -1, np.int8)]).astype(np.int8, copy=False)

    order = np.lexsort((time, window))
    window, time, delta, phase = window[order], time[order], delta[order], phase[order]
    del order

    seg = np.zeros(len(time), dtype=np.int64)  # segment j runs from event j to event j+1 of one window
    same = window[1:] == window[:-1]
    seg[:-1] = np.where(same, time[1:] - time[:-1], 0)
    del same

    phase_ns = np.zeros((n, len(phases.ALL)), dtype=np.int64)
    total_ns = np.zeros((n, len(TOTAL_PHASES)), dtype=np.int64)
    covered = np.zeros(len(time), dtype=bool)
    present = set(np.unique(op_phase).tolist())
    for name in phases.PRIORITY:
        p = phases.INDEX[name]
        if p not in present:
            continue
        active = np.cumsum(np.where(phase == p, delta, 0), dtype=np.int32) > 0
        exclusive = active & ~covered
        phase_ns[:, p] = _sum_by(window, seg, exclusive, n)
        if name in TOTAL_PHASES:
            total_ns[:, TOTAL_PHASES.index(name)] = _sum_by(window, seg, active, n)
        covered |= active

    idle = ~covered
    seg_end = time + seg
    in_launch = (time >= windows.ls[window]) & (seg_end <= windows.le[window])
    phase_ns[:, phases.INDEX["launch_gap"]] = _sum_by(window, seg, idle & in_launch, n)
    phase_ns[:, phases.INDEX["host_wait"]] = _sum_by(window, seg, idle & ~in_launch, n)

    wall = windows.we - windows.ws
    assert np.array_equal(phase_ns.sum(axis=1), wall), "phases must sum to wall time"
    return SweepResult(phase_ns, total_ns)


def _sum_by(window: np.ndarray, seg: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    sums = np.bincount(window[mask], weights=seg[mask], minlength=n)
    return np.rint(sums).astype(np.int64)
