"""Host synchronisations inside each step: what keeps a step from being captured as a CUDA graph,
and the host time a cycle exposes after each one even when every phase is a graph replay.

A sync is a call that blocks the host on the GPU: ``cuda{Stream,Device,Event}Synchronize`` (what
``.item()``, ``.cpu()``, ``nonzero`` and data-dependent routing end in) and the synchronous copies
(``cudaMemcpy`` without ``Async``). Per step row (on the step's host thread, inside its window):

* ``host_syncs``: how many;
* ``sync_ns``: host time spent blocked in them;
* ``post_sync_ns``: GPU idle after each one, from its return to the next GPU op of the process
  (capped at the step's own wall): the host work the GPU must wait for after a sync, which no
  graph hides (REFERENCE 6.8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.trace.events import Trace

SYNC_CALL = re.compile(r"^cu(da)?(Stream|Device|Event|Ctx)Synchroni[sz]e|^cu(da)?Memcpy(?!.*Async)")
SYNC_COLUMNS = ("host_syncs", "sync_ns", "post_sync_ns")


@dataclass
class SyncCalls:
    """The trace's blocking calls, sorted by (tid, start), with the GPU gap after each."""

    tid: np.ndarray
    pid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    gap_after: np.ndarray  # ns from the call's return to the process's next GPU op (-1: none)
    op_pid: np.ndarray | None = None  # per GPU op, its process and device: which processes
    op_device: np.ndarray | None = None  # drive a device, asked only for whole-trace rows
    _device_pids: dict[int, np.ndarray] | None = None

    def pids_on(self, device: int) -> np.ndarray:
        """The processes that drive ``device`` (ascending; found once, when first asked)."""
        if self._device_pids is None:
            pid, dev = self.op_pid, self.op_device
            self._device_pids = (
                {int(d): np.unique(pid[dev == d]) for d in np.unique(dev)}  # a handful of devices
                if pid is not None and dev is not None
                else {}
            )
        return self._device_pids.get(int(device), np.zeros(0, np.int64))

    @classmethod
    def empty(cls) -> SyncCalls:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, z, z)


def sync_calls(
    trace: Trace, op_pid: np.ndarray, op_start: np.ndarray, op_device: np.ndarray
) -> SyncCalls:
    """The blocking API calls of ``trace`` (read before its event tables are released)."""
    api = trace.api
    if api.empty or not len(trace.strings):
        return SyncCalls.empty()
    names = trace.strings.matching(SYNC_CALL.pattern)
    rows = api[names[api["name_id"].to_numpy()]]
    if rows.empty:
        return SyncCalls.empty()
    rows = rows.sort_values(["tid", "start"], kind="stable")
    pid, end = rows["pid"].to_numpy(np.int64), rows["end"].to_numpy(np.int64)
    return SyncCalls(
        tid=rows["tid"].to_numpy(np.int64),
        pid=pid,
        start=rows["start"].to_numpy(np.int64),
        end=end,
        gap_after=_next_op_gap(pid, end, op_pid, op_start),
        op_pid=op_pid,
        op_device=op_device,
    )


def _next_op_gap(
    pid: np.ndarray, t: np.ndarray, op_pid: np.ndarray, op_start: np.ndarray
) -> np.ndarray:
    """Per (pid, t): the next GPU op start of that process at or after t, minus t (-1: none)."""
    gap = np.full(len(t), -1, np.int64)
    for p in np.unique(pid):  # a handful of processes
        # a process's ops come nearly in time order: a merge sort is near-linear on them
        starts = np.sort(op_start[op_pid == p], kind="stable")
        mine = np.flatnonzero(pid == p)
        at = np.searchsorted(starts, t[mine], side="left")
        found = at < len(starts)
        gap[mine[found]] = starts[at[found]] - t[mine[found]]
    return gap


def sync_columns(calls: SyncCalls, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """The :data:`SYNC_COLUMNS` of each step row: calls on its thread starting in its window (a
    whole-trace row, tid -1, takes every thread's)."""
    n = len(rows)
    out = {c: np.zeros(n, np.int64) for c in SYNC_COLUMNS}
    if n == 0 or len(calls.start) == 0:
        return out
    tid = rows["tid"].to_numpy(np.int64)
    start, end = rows["start_ns"].to_numpy(np.int64), rows["end_ns"].to_numpy(np.int64)
    cap = np.maximum(end - start, 0)
    gap = np.clip(calls.gap_after, 0, None)
    blocked = calls.end - calls.start
    for t in np.unique(tid):  # a handful of threads
        if t < 0:  # whole-trace rows: each device's own processes' calls
            _whole_trace_rows(calls, rows, np.flatnonzero(tid == t), out, gap, blocked, cap)
            continue
        mine = np.flatnonzero(tid == t)
        on = _thread(calls.tid, t)
        s, b, g = calls.start[on], blocked[on], gap[on]
        lo = np.searchsorted(s, start[mine], side="left")
        hi = np.searchsorted(s, end[mine], side="left")
        out["host_syncs"][mine] = hi - lo
        out["sync_ns"][mine] = _window_sums(b, lo, hi)
        out["post_sync_ns"][mine] = np.minimum(_window_sums(g, lo, hi), cap[mine])
    return out


def _whole_trace_rows(
    calls: SyncCalls,
    rows: pd.DataFrame,
    mine: np.ndarray,
    out: dict[str, np.ndarray],
    gap: np.ndarray,
    blocked: np.ndarray,
    cap: np.ndarray,
) -> None:
    """A whole-trace row spans one device: the calls of the processes that drive it (one file
    per rank or one export with every rank give the same count)."""
    devices = rows["device"].to_numpy(np.int64)
    start, end = rows["start_ns"].to_numpy(np.int64), rows["end_ns"].to_numpy(np.int64)
    for i in mine:  # one row per device
        pids = calls.pids_on(int(devices[i]))
        keep = np.isin(calls.pid, pids) & (calls.start >= start[i]) & (calls.start < end[i])
        out["host_syncs"][i] = int(keep.sum())
        out["sync_ns"][i] = int(blocked[keep].sum())
        out["post_sync_ns"][i] = min(int(gap[keep].sum()), int(cap[i]))


def _thread(tids: np.ndarray, t: int) -> slice:
    lo, hi = np.searchsorted(tids, t, side="left"), np.searchsorted(tids, t, side="right")
    return slice(int(lo), int(hi))


def _window_sums(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    total = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    return total[hi] - total[lo]
