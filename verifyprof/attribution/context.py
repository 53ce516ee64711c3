"""What the GPU and the host were doing around a window's own ops: the context intervals that
split a step's non-busy time by what the GPU waited for (see :mod:`verifyprof.attribution.sweep`).

* launch calls of the step (bridged across short host pauses): GPU idle -> ``launch_gap``
* a graph-launch call, from its start to its first node: GPU idle -> ``graph_launch``
* a graph replay, from its first node to its last: GPU idle -> ``graph_gap``
* the device busy with any op at all, or inside any graph replay (merged per device): where none
  of the step's own ops runs -> ``other_work``, the GPU running other steps' work inside this
  step's window (its own replays' gaps stay ``graph_gap``: that slot ranks above)
* an op queued (its call returned) while the device sat idle for longer than ``BLOCKED_IDLE_NS``:
  the stream was blocked (an event wait on work outside the step, a sync) -> ``host_wait``
* the short idle *seam* before an op that sat in its device's queue (its call had returned before
  the device finished the op before it): the device's latency in starting it, owned by the op's
  step (``launch_gap`` eager, ``graph_launch`` for a graph's first node); for every other step
  the seam is part of the device's busy time -> ``other_work``
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.attribution.arrays import narrow, rows_by_value
from verifyprof.attribution.steps import NO_STEP, Launches
from verifyprof.attribution.sweep import (
    BLOCKED,
    GRAPH_CALL,
    GRAPH_REPLAY,
    LAUNCH,
    OTHER_BUSY,
    SEAM_EAGER,
    SEAM_GRAPH,
    Intervals,
)

LAUNCH_BRIDGE_NS = 50_000  # host pauses between launches shorter than this are launch overhead
MAX_CALL_NS = (
    50_000  # a launch call's own time counted as launch overhead at most (launches take ~5 us)
)
# queued this long on an idle device: blocked (an event, a sync), not launch latency (5-20
# us)
BLOCKED_IDLE_NS = 100_000


@dataclass
class DeviceBusy:
    """Per device, the merged intervals when it ran any op (sorted, disjoint)."""

    starts: dict[int, np.ndarray]
    ends: dict[int, np.ndarray]


def device_busy(device: np.ndarray, start: np.ndarray, end: np.ndarray) -> DeviceBusy:
    starts, ends = {}, {}
    for dev, rows in rows_by_value(device):  # a handful of devices
        s, e = start[rows], end[rows]
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        reach = np.maximum.accumulate(e)
        heads = np.flatnonzero(np.r_[True, s[1:] > reach[:-1]])
        starts[dev] = s[heads]
        ends[dev] = np.maximum.reduceat(e, heads)
    return DeviceBusy(starts, ends)


def ranges_of(lo: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand ``count[i]`` consecutive indices from ``lo[i]``: (i of each, the index),
    vectorised."""
    which = np.repeat(np.arange(len(count)), count)
    return which, np.repeat(lo, count) + (
        np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    )


def op_call_ends(ops, calls) -> np.ndarray:  # (GpuOps, Calls)
    """When each op's launching call returned (int64 max for unlinked ops)."""
    big = np.iinfo(np.int64).max
    if len(calls.end) == 0:
        return np.full(len(ops), big, np.int64)
    return np.where(ops.call >= 0, calls.end[np.maximum(ops.call, 0)], big)


def busy_of(ops, launch: Launches, seam: np.ndarray) -> DeviceBusy:  # ops: GpuOps
    """The device-busy union the breakdown uses: every op, every graph replay from its first node
    to its last, and the seams before queued ops (the device starting its next op)."""
    replay, queued = launch.graph_launch, seam >= 0
    return device_busy(
        np.r_[ops.device, launch.device[replay], ops.device[queued]],
        np.r_[ops.start, launch.first_op_start[replay], seam[queued]],
        np.r_[ops.end, launch.last_op_end[replay], ops.start[queued]],
    )


def queue_seams(
    device: np.ndarray, start: np.ndarray, end: np.ndarray, call_end: np.ndarray
) -> np.ndarray:
    """Per op, the start of the idle seam before it while it sat queued (its launch call returned
    before the device finished the op before it), or -1; seams over ``BLOCKED_IDLE_NS`` are
    blocked queues, not start latency, and are left to ``blocked_intervals``."""
    seam = np.full(len(start), -1, np.int64)
    for dev in np.unique(device):  # a handful of devices
        idx = np.flatnonzero(device == dev)
        order = idx[np.argsort(start[idx], kind="stable")]
        prev = np.r_[np.iinfo(np.int64).min // 2, np.maximum.accumulate(end[order])[:-1]]
        s = start[order]
        queued = (call_end[order] <= prev) & (prev < s) & (s - prev <= BLOCKED_IDLE_NS)
        seam[order[queued]] = prev[queued]
    return seam


def seam_intervals(
    seam: np.ndarray, start: np.ndarray, window: np.ndarray, graph: np.ndarray, ws: np.ndarray
) -> list[Intervals]:
    """The seams of a level's member ops, each in its window, by launch kind."""
    has = seam >= 0
    out = []
    for kind, slot in ((~graph, SEAM_EAGER), (graph, SEAM_GRAPH)):
        m = has & kind
        out.append(_intervals([(window[m], np.maximum(seam[m], ws[window[m]]), start[m])], slot))
    return out


def busy_in_windows(
    busy: DeviceBusy, ws: np.ndarray, we: np.ndarray, device: np.ndarray
) -> Intervals:
    """The device-busy intervals clipped to each window (window = row of ``ws``)."""
    parts = []
    for dev in np.unique(device):
        windows = np.flatnonzero(device == dev)
        s, e = busy.starts.get(int(dev)), busy.ends.get(int(dev))
        if s is None or len(s) == 0:
            continue
        which, lo, hi = overlaps(s, e, ws[windows], we[windows])
        parts.append((windows[which], lo, hi))
    return _intervals(parts, OTHER_BUSY)


def overlaps(
    s: np.ndarray, e: np.ndarray, qs: np.ndarray, qe: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every overlap of the query spans ``[qs, qe)`` with the sorted, disjoint intervals ``[s, e)``:
    (the query of each, the overlap's start and end), by two binary searches per query."""
    lo = np.searchsorted(e, qs, side="right")  # first interval ending after the query starts
    hi = np.searchsorted(s, qe, side="left")  # past the last one starting before it ends
    which, pos = ranges_of(lo, np.maximum(hi - lo, 0))
    return which, np.maximum(s[pos], qs[which]), np.minimum(e[pos], qe[which])


def graph_intervals(
    launch: Launches, mine: np.ndarray, window: np.ndarray, ws: np.ndarray, we: np.ndarray
) -> tuple[Intervals, Intervals]:
    """Per graph launch of a window: (its call up to its first node, its replay first-to-last
    node)."""
    graph = launch.graph_launch[mine]
    rows, owner = mine[graph], window[graph]
    first, last = launch.first_op_start[rows], launch.last_op_end[rows]
    call = _intervals(
        [(owner, np.maximum(launch.start[rows], ws[owner]), np.minimum(first, we[owner]))],
        GRAPH_CALL,
    )
    replay = _intervals(
        [(owner, np.maximum(first, ws[owner]), np.minimum(last, we[owner]))], GRAPH_REPLAY
    )
    return call, replay


def issue_intervals(
    launch: Launches, mine: np.ndarray, window: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """When each launch call of a window was issuing or queueing its work: the call itself, up to
    ``MAX_CALL_NS`` (a runtime call that keeps the host far longer, e.g. a synchronous copy
    waiting or a lazy module load, is the host stuck, not launch overhead), then from the call's
    return to its last op's start (the op queued behind earlier work)."""
    start, end, last = launch.start[mine], launch.end[mine], launch.last_op_start[mine]
    own_end = np.minimum(end, start + MAX_CALL_NS)
    queued = last > end
    return (
        np.concatenate([window, window[queued]]),
        np.concatenate([start, end[queued]]),
        np.concatenate([own_end, last[queued]]),
    )


def blocked_intervals(
    busy: DeviceBusy,
    launch: Launches,
    mine: np.ndarray,
    window: np.ndarray,
    window_device: np.ndarray,
    ws: np.ndarray,
    we: np.ndarray,
) -> Intervals:
    """Where a launched op waited in its queue while its device sat idle for long: each stretch
    over ``BLOCKED_IDLE_NS`` of the op's queued time (call returned, op not started) in which
    the device ran nothing, within the op's window (a whole-trace window opens at its first op,
    after that op's call: a wait before it, e.g. behind another process's work, is outside)."""
    start = np.maximum(launch.end[mine], ws[window])
    end = np.minimum(launch.last_op_start[mine], we[window])
    queued = end > start
    parts = []
    for dev in np.unique(window_device):
        s, e = busy.starts.get(int(dev)), busy.ends.get(int(dev))
        rows = (
            np.flatnonzero(queued & (window_device[window] == dev))
            if len(window)
            else np.zeros(0, np.int64)
        )
        if s is None or len(s) == 0 or len(rows) == 0:
            continue
        gap_start, gap_end = (
            np.r_[np.iinfo(np.int64).min // 2, e],
            np.r_[s, np.iinfo(np.int64).max // 2],
        )
        long_gap = gap_end - gap_start > BLOCKED_IDLE_NS
        gap_start, gap_end = gap_start[long_gap], gap_end[long_gap]
        which, lo_t, hi_t = overlaps(gap_start, gap_end, start[rows], end[rows])
        long = hi_t - lo_t > BLOCKED_IDLE_NS  # a short wait on an idle GPU is launch latency
        parts.append((window[rows[which]][long], lo_t[long], hi_t[long]))
    return _intervals(parts, BLOCKED)


def context_intervals(
    launch: Launches,
    mine: np.ndarray,
    launch_window: np.ndarray,
    ws: np.ndarray,
    we: np.ndarray,
    busy: DeviceBusy,
    window_device: np.ndarray,
    seams: list[Intervals],
) -> Intervals:
    """Every context interval of one level's windows, sorted by window (as the sweep needs)."""
    parts = [
        launch_intervals(*issue_intervals(launch, mine, launch_window), ws, we, window_device),
        *graph_intervals(launch, mine, launch_window, ws, we),
        busy_in_windows(busy, ws, we, window_device),
        blocked_intervals(busy, launch, mine, launch_window, window_device, ws, we),
        *seams,
    ]
    window = np.concatenate([p.window for p in parts]).astype(np.int64)
    order = device_major_order(window_device[window], window)  # = np.argsort(window, kind="stable")
    return Intervals(
        window[order],
        np.concatenate([p.start for p in parts])[order],
        np.concatenate([p.end for p in parts])[order],
        np.concatenate([p.slot for p in parts])[order],
    )


def _intervals(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], slot: int) -> Intervals:
    if not parts:
        return Intervals(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int8),
        )
    owner = np.concatenate([p[0] for p in parts]).astype(np.int64)
    start = np.concatenate([p[1] for p in parts])
    end = np.concatenate([p[2] for p in parts])
    keep = end > start
    return Intervals(owner[keep], start[keep], end[keep], np.full(int(keep.sum()), slot, np.int8))


def launch_windows(
    launch_step: np.ndarray,
    launch_code: np.ndarray,
    in_group: np.ndarray,
    first_code: int,
    window_keys: np.ndarray,
    stride: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The launches of one level and device group (rows of the launch table), each with its
    window (``window_keys``: (device code - ``first_code``) * ``stride`` + step, ascending);
    ``launch_code``: each launch's device code, ``in_group``: whether a code is in the group."""
    n = len(window_keys)
    mine = np.flatnonzero((launch_step != NO_STEP) & in_group[launch_code])
    key = (launch_code[mine].astype(np.int64) - first_code) * stride + launch_step[mine]
    launch_window = np.searchsorted(window_keys, key)
    found = (launch_window < n) & (window_keys[np.minimum(launch_window, n - 1)] == key)
    return mine[found], launch_window[found]


def launch_intervals(
    window: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    ws: np.ndarray,
    we: np.ndarray,
    window_device: np.ndarray,
    bridge_ns: int = LAUNCH_BRIDGE_NS,
) -> Intervals:
    """When the host was issuing a window's work: GPU idle then is a launch gap.

    Per launching call: from the call's start to the later of its end and the start of the last
    op it launched (being issued, or queued behind earlier work). Calls closer than
    ``bridge_ns`` are joined (the Python between eager launches of one forward, which a CUDA
    graph removes); a longer pause means the host was doing something else: host wait.
    """
    base = ws[window]
    start = np.maximum(start, base)
    end = np.maximum(
        np.minimum(end, we[window]), start
    )  # clipped to the window; never ends before it starts
    order = order_by_window(
        window, start - base, int((we - ws).max(initial=0)), window_device[window]
    )
    window, start, end = window[order], start[order], end[order]
    del order, base
    reach = _running_max_by_group(end, window)
    new_run = (
        np.r_[True, (window[1:] != window[:-1]) | (start[1:] - reach[:-1] >= bridge_ns)]
        if len(window)
        else np.zeros(0, bool)
    )
    heads = np.flatnonzero(new_run)
    merged_start = start[heads]
    merged_end = np.maximum.reduceat(end, heads) if len(heads) else end
    keep = merged_end > merged_start
    return Intervals(
        window[heads][keep],
        merged_start[keep],
        merged_end[keep],
        np.full(int(keep.sum()), LAUNCH, np.int8),
    )


def order_by_window(
    window: np.ndarray, offset: np.ndarray, max_offset: int, device: np.ndarray
) -> np.ndarray:
    """Indices sorting by (window, offset >= 0), windows numbered device by device (``device``:
    each element's): one packed int64 key when the bits fit, else a lexsort. Ties come in any order.
    """
    bits = max(max_offset, 1).bit_length()
    if len(window) == 0 or int(window.max()).bit_length() + bits > 63:
        return np.lexsort((offset, window))
    key = window.astype(np.int64) << bits
    key |= offset
    return device_major_order(device, key)


def device_major_order(device: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The stable argsort of a device-major ``key``, as a radix sort by device and then a stable
    sort of each device's keys: those come in time order, so they are nearly sorted and the
    merge sort runs in near-linear time, where sorting the devices' interleaved keys would not."""
    by_device = np.argsort(narrow(device), kind="stable")  # a radix sort for 16-bit ints
    return by_device[np.argsort(key[by_device], kind="stable")]


def _running_max_by_group(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Cumulative max of ``values`` restarting at each change of (sorted) ``groups``."""
    if len(values) == 0:
        return values
    lo = values.min()
    span = int(values.max() - lo) + 1
    shift = groups.astype(np.int64) * span  # lift each group above all earlier ones
    if int(groups.max()) * span < 2**62:
        return np.maximum.accumulate(values - lo + shift) - shift + lo
    return pd.Series(values).groupby(groups).cummax().to_numpy()
