"""Phase times of many (step, device) windows in one vectorised sweep.

Each window is a span ``[ws, we)`` holding GPU ops (start, end, phase) and *context intervals*
(see ``breakdown``): when the window's work was being issued or queued (launch calls), when a
graph-launch call of it ran on the host, when one of its graph replays ran, and when the device
was busy with anything at all.
All boundaries are encoded as one int64 per event, ``window | time since window start |
(phase slot, open/close)``, and sorted once; between two consecutive boundaries of a window
nothing changes, so each elementary segment is booked to the highest-priority phase active on
it or, where none of the window's own ops runs, to the highest-priority context interval
covering it: ``other_work`` (the device runs other steps' work), ``graph_gap`` (between nodes of
one replay), ``graph_launch`` (the graph-launch call on the host), ``launch_gap`` (this step's
work still being issued: what CUDA graphs remove), else ``host_wait`` (the host is doing
something else: Python, scheduling, syncs). Active counts are
running sums of +1/-1; every interval opens and closes inside its own window, so the sums
return to zero at each window's end, and a window's phases sum to ``we - ws`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifyprof.contracts import phases
from verifyprof.contracts.errors import TraceError

N_BUSY = len(phases.PRIORITY)
# Slots of the non-busy intervals, lowest priority first; each books its uncovered time to a phase.
LAUNCH = N_BUSY  # this step's launch calls (bridged): GPU idle -> launch_gap
BLOCKED = (
    N_BUSY + 1
)  # queued work blocked while the device sat idle (event wait, sync) -> host_wait
GRAPH_CALL = N_BUSY + 2  # a graph-launch call up to its first node -> graph_launch
OTHER_BUSY = (
    N_BUSY + 3
)  # the device busy (any op, any graph replay, any op's queue seam) -> other_work
SEAM_EAGER = (
    N_BUSY + 4
)  # idle just before one of this step's queued eager ops (launch latency) -> launch_gap
SEAM_GRAPH = N_BUSY + 5  # idle just before one of this step's queued graph nodes -> graph_launch
GRAPH_REPLAY = N_BUSY + 6  # first to last node of one of this step's graph replays -> graph_gap
BOUNDARY = N_BUSY + 7  # slot of window start/end markers
IDLE_SLOTS = {
    LAUNCH: "launch_gap",
    BLOCKED: "host_wait",
    GRAPH_CALL: "graph_launch",
    OTHER_BUSY: "other_work",
    SEAM_EAGER: "launch_gap",
    SEAM_GRAPH: "graph_launch",
    GRAPH_REPLAY: "graph_gap",
}  # lowest priority first
SLOT_BITS = 6  # 5 bits of slot (<= 32 slots) + 1 bit open/close
CHUNK_INTERVALS = 1 << 18  # intervals per sweep chunk: bounds memory on million-kernel traces
IDLE_HOST = phases.INDEX["host_wait"]
assert BOUNDARY < 32
# every slot but the boundaries, lowest priority first: a segment is booked to the phase of the
# highest-ranked slot open on it (the idle slots, then the busy phases, highest last)
RANKED_SLOTS = (*IDLE_SLOTS, *(phases.INDEX[name] for name in reversed(phases.PRIORITY)))
SLOT_RANK = np.full(BOUNDARY + 1, -1, np.int8)  # per slot, its rank in RANKED_SLOTS (-1: none)
SLOT_RANK[list(RANKED_SLOTS)] = np.arange(len(RANKED_SLOTS))
# the phase booked, by the highest open rank + 1 (0: no slot open)
RANK_PHASE = np.array(
    [IDLE_HOST, *(phases.INDEX[IDLE_SLOTS[s]] if s in IDLE_SLOTS else s for s in RANKED_SLOTS)],
    np.int8,
)
assert len(RANKED_SLOTS) < 53  # one bit each in an int64 that float64 holds exactly


@dataclass
class Windows:
    ws: np.ndarray  # int64 per window
    we: np.ndarray


@dataclass
class Intervals:
    window: np.ndarray  # int64 window index per interval
    start: np.ndarray
    end: np.ndarray
    slot: np.ndarray  # int8: phase index (busy phases) or one of IDLE_SLOTS


@dataclass
class SweepResult:
    phase_ns: np.ndarray  # int64 [windows, len(phases.ALL)]
    total_ns: np.ndarray  # int64 [windows, len(phases.TOTALS)]


def sweep(
    windows: Windows, busy: Intervals, launches: Intervals, chunk_intervals: int = CHUNK_INTERVALS
) -> SweepResult:
    """Phase times per window. ``busy`` and ``launches`` must each be sorted by window; windows
    are swept in chunks of about ``chunk_intervals`` intervals so memory stays flat."""
    n = len(windows.ws)
    phase_ns = np.zeros((n, len(phases.ALL)), dtype=np.int64)
    total_ns = np.zeros((n, len(phases.TOTALS)), dtype=np.int64)
    busy_at = np.searchsorted(
        busy.window, np.arange(n + 1), side="left"
    )  # first interval of each window
    launch_at = np.searchsorted(launches.window, np.arange(n + 1), side="left")
    lo = 0
    while lo < n:
        hi = (
            int(
                np.searchsorted(
                    busy_at + launch_at, busy_at[lo] + launch_at[lo] + chunk_intervals, side="right"
                )
            )
            - 1
        )
        hi = min(max(hi, lo + 1), n)
        bu, la = slice(busy_at[lo], busy_at[hi]), slice(launch_at[lo], launch_at[hi])
        chunk = Intervals(
            np.concatenate([busy.window[bu], launches.window[la]]) - lo,
            np.concatenate([busy.start[bu], launches.start[la]]),
            np.concatenate([busy.end[bu], launches.end[la]]),
            np.concatenate([busy.slot[bu], launches.slot[la]]),
        )
        phase_ns[lo:hi], total_ns[lo:hi] = _sweep_chunk(
            Windows(windows.ws[lo:hi], windows.we[lo:hi]), chunk
        )
        lo = hi
    wall = windows.we - windows.ws
    if not np.array_equal(
        phase_ns.sum(axis=1), wall
    ):  # an invariant: only inconsistent timestamps break it
        raise TraceError(
            "timestamps cannot be attributed consistently (phases do not sum to the step's wall"
            " time): clocks of merged files too far apart, or corrupt times"
        )
    return SweepResult(phase_ns, total_ns)


def _sweep_chunk(windows: Windows, intervals: Intervals) -> tuple[np.ndarray, np.ndarray]:
    n = len(windows.ws)
    window, time, slot, opening = _sorted_events(windows, intervals)
    seg = np.empty(len(time), dtype=np.int64)  # segment j: event j to event j+1 of the same window
    np.subtract(time[1:], time[:-1], out=seg[:-1])
    seg[-1:] = 0
    seg[:-1][window[1:] != window[:-1]] = 0
    del time

    n_phases = len(phases.ALL)
    active = _open_slots(slot, opening)
    del slot, opening
    # the phase booked on each segment: the highest-ranked slot open on it (none: host wait)
    top = RANK_PHASE[np.frexp(active.astype(np.float64))[1]]  # exponent = highest bit + 1
    total_ns = np.zeros((n, len(phases.TOTALS)), dtype=np.int64)
    for t, name in enumerate(phases.TOTALS):
        on = (active & (1 << int(SLOT_RANK[phases.INDEX[name]]))) != 0
        if on.any():
            total_ns[:, t] = _sum_by(window[on], seg[on], n)
    del active
    flat = window * n_phases
    flat += top
    phase_ns = (
        np.rint(np.bincount(flat, weights=seg, minlength=n * n_phases))
        .astype(np.int64)
        .reshape(n, n_phases)
    )
    return phase_ns, total_ns


def _sorted_events(
    windows: Windows, intervals: Intervals
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All interval and window boundaries, sorted by (window, time): window, time, slot, opening."""
    n = len(windows.ws)
    window_bits = max(n, 1).bit_length()
    origin = int(windows.ws.min(initial=0))
    span = int(windows.we.max(initial=0)) - origin
    if window_bits + max(span, 1).bit_length() + SLOT_BITS <= 63:
        base = None  # offsets from one origin: no per-event gather of the window start
        time_bits = max(span, 1).bit_length()
    else:
        base = windows.ws  # offsets from each window's own start: windows are short
        time_bits = int(max(int((windows.we - windows.ws).max(initial=0)), 1)).bit_length()
    all_windows = np.arange(n, dtype=np.int64)
    parts = (  # (window, time, slot, opening)
        (intervals.window, intervals.start, intervals.slot, 1),
        (intervals.window, intervals.end, intervals.slot, 0),
        (all_windows, windows.ws, BOUNDARY, 1),
        (all_windows, windows.we, BOUNDARY, 0),
    )
    if window_bits + time_bits + SLOT_BITS <= 63:
        shift = time_bits + SLOT_BITS
        keys = []
        for (
            w,
            t,
            slot,
            opening,
        ) in parts:  # one packed int64 per event: window | offset | slot | open
            key = t - (origin if base is None else base[w])
            key <<= SLOT_BITS
            key |= (np.asarray(slot, dtype=np.int64) << 1) | opening
            key |= w.astype(np.int64) << shift
            keys.append(key)
        key = np.concatenate(keys)
        del keys
        key.sort(kind="stable")
        code = (key & ((1 << SLOT_BITS) - 1)).astype(np.int8)
        window = key >> shift
        key >>= SLOT_BITS
        key &= (1 << time_bits) - 1
        return window, key, code >> 1, (code & 1).astype(bool)
    # spans too long to pack: sort two keys
    window = np.concatenate([p[0] for p in parts])
    time = np.concatenate([p[1] for p in parts])
    slot = np.concatenate([np.broadcast_to(np.asarray(p[2], np.int8), len(p[0])) for p in parts])
    opening = np.concatenate([np.full(len(p[0]), bool(p[3])) for p in parts])
    order = np.lexsort((time, window))
    return window[order], time[order], slot[order], opening[order]


def _open_slots(slot: np.ndarray, opening: np.ndarray) -> np.ndarray:
    """Per event (and the segment after it), a bit per ranked slot (``SLOT_RANK``) with an
    interval open: each slot's running count of opens minus closes over its own events (its
    events taken together by one radix sort of the slots), its bit flipped where the count turns
    positive or back to zero, and the flips accumulated by XOR over all events."""
    flips = np.zeros(len(slot), np.int64)
    order = np.argsort(slot, kind="stable")  # a radix sort for 8-bit ints: each slot's events
    ordered = slot[order]
    heads = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]).tolist()
    for lo, hi in zip(heads, heads[1:] + [len(order)]):
        rank = int(SLOT_RANK[ordered[lo]])
        if rank < 0:  # window boundaries
            continue
        at = order[lo:hi]
        count = np.cumsum(np.where(opening[at], np.int8(1), np.int8(-1)), dtype=np.int32)
        on = count > 0
        flip = on.copy()
        flip[1:] ^= on[:-1]
        flips[at[flip]] = 1 << rank
    return np.bitwise_xor.accumulate(flips)


def _sum_by(window: np.ndarray, seg: np.ndarray, n: int) -> np.ndarray:
    return np.rint(np.bincount(window, weights=seg, minlength=n)).astype(np.int64)
