"""The rows of one nesting level and one group of devices: one per (step, device) window, with
its wall-clock window, counts, mode and phases (the sweep's split of the window's time).

:func:`verifyprof.attribution.breakdown.breakdown` runs :func:`level_rows` once per (level,
device group) task, over the :class:`LevelInputs` they share, then adds the steps that launched
nothing (:func:`add_idle_steps`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from verifyprof.attribution.arrays import codes, text_column
from verifyprof.attribution.assignment import step_modes
from verifyprof.attribution.context import (
    DeviceBusy,
    context_intervals,
    device_major_order,
    launch_windows,
    seam_intervals,
)
from verifyprof.attribution.steps import NO_STEP, GpuOps, Launches
from verifyprof.attribution.sweep import Intervals, Windows, sweep
from verifyprof.contracts import phases
from verifyprof.trace.events import Trace

GROUP_OPS = 1 << 18  # ops per (level, device group) task: bounds the working memory


@dataclass(frozen=True)
class LevelInputs:
    """What every (level, device group) task reads; none of them writes it."""

    trace: Trace
    steps: pd.DataFrame
    ops: GpuOps
    launch: Launches
    op_launch: np.ndarray
    busy: DeviceBusy
    seam: np.ndarray
    devices: np.ndarray  # every device, ascending
    device_code: np.ndarray  # per op: its device's position in ``devices`` (int16)
    launch_code: np.ndarray  # per launch: the same, of its first op's device

    @cached_property
    def step_texts(self) -> dict[str, tuple[pa.Array, np.ndarray] | None]:
        """The steps' names and texts as (distinct values, each step's code), coded once for
        every task's text columns; None for a column with a missing value."""
        out: dict[str, tuple[pa.Array, np.ndarray] | None] = {}
        for column in ("name", "text"):
            code, unique = pd.factorize(self.steps[column].to_numpy())
            ok = not (code < 0).any() and all(isinstance(u, str) for u in unique)
            out[column] = (pa.array(list(unique), pa.string()), code) if ok else None
        return out


@dataclass(frozen=True)
class GroupWindows:
    """The windows of one level and device group, numbered device by device."""

    member: np.ndarray  # the level's ops on the group's devices, in window order
    window: np.ndarray  # per member: its window
    bounds: np.ndarray  # per window: its first member
    keys: np.ndarray  # per window: its window_key, ascending
    step: np.ndarray  # per window: the step (int64)
    device: np.ndarray  # per window: the device
    stride: int


def device_codes(device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    devices, code = codes(device)
    return devices, code.astype(np.int16 if len(devices) < 2**15 else np.int64)


def device_groups(shared: LevelInputs, group_ops: int = GROUP_OPS) -> list[np.ndarray]:
    """The devices split into consecutive groups of about ``group_ops`` ops each (a device is
    never split: its windows need all its busy time). Each group is one task: the working memory
    is a group's, not the whole trace's."""
    per_device = np.bincount(shared.device_code, minlength=len(shared.devices))
    groups, current, size = [], [], 0
    for code, n in enumerate(per_device.tolist()):
        if current and size + n > group_ops:
            groups.append(np.array(current))
            current, size = [], 0
        current.append(code)
        size += n
    groups.append(np.array(current))
    return groups


def group_windows(
    shared: LevelInputs, op_step: np.ndarray, group: np.ndarray, in_group: np.ndarray
) -> GroupWindows | None:
    """The level's ops on the group's devices sorted into their windows; None if there are
    none."""
    member = np.flatnonzero((op_step != NO_STEP) & in_group[shared.device_code])
    member = member.astype(np.int32 if len(op_step) < 2**31 else np.int64)
    if len(member) == 0:
        return None
    devices = shared.devices[group]  # ascending: groups are consecutive codes
    stride = max(len(shared.steps), 1)
    dev_code = shared.device_code[member] - int(group[0])
    key = window_key(op_step[member], dev_code, stride, len(devices))
    order = device_major_order(dev_code, key)
    del dev_code
    member = member[order]
    key = key[order]
    del order
    change = np.empty(len(key), dtype=bool)
    change[0] = True
    np.not_equal(key[1:], key[:-1], out=change[1:])
    bounds = np.flatnonzero(change)
    window = np.cumsum(change, dtype=np.int32 if len(bounds) < 2**31 else np.int64)
    window -= 1  # window index per member
    del change
    window_keys = key[bounds]
    del key
    return GroupWindows(
        member=member,
        window=window,
        bounds=bounds,
        keys=window_keys,
        step=(window_keys % stride).astype(np.int64),
        device=devices[window_keys // stride],
        stride=stride,
    )


def level_rows(
    shared: LevelInputs, op_step: np.ndarray, launch_step: np.ndarray, group: np.ndarray
) -> pd.DataFrame:
    """One row per (step, device) of one nesting level and one group of devices (codes into
    ``shared.devices``), with window, counts, mode and phases."""
    ops, launch = shared.ops, shared.launch
    in_group = np.zeros(len(shared.devices), bool)
    in_group[group] = True
    win = group_windows(shared, op_step, group, in_group)
    if win is None:
        return pd.DataFrame()
    member, window, n = win.member, win.window, len(win.bounds)

    start, end = ops.start[member], ops.end[member]
    first = np.minimum.reduceat(start, win.bounds)
    last = np.maximum.reduceat(end, win.bounds)
    is_kernel = ops.is_kernel[member]
    kernels = np.bincount(window[is_kernel], minlength=n).astype(np.int64)

    info = {
        c: shared.steps[c].to_numpy()[win.step]
        for c in ("name", "text", "pid", "tid", "start", "end", "attrs")
    }  # step == position
    ws = np.minimum(info["start"], first)
    we = np.maximum(info["end"], last)

    mine, launch_window = launch_windows(
        launch_step, shared.launch_code, in_group, int(group[0]), win.keys, win.stride
    )
    n_launches = np.bincount(launch_window, minlength=n).astype(np.int64)
    n_graph_launches = np.bincount(launch_window[launch.graph_launch[mine]], minlength=n).astype(
        np.int64
    )
    op_row = shared.op_launch[member]
    graph_kernel = is_kernel & (op_row >= 0)
    graph_kernel[graph_kernel] = launch.graph_launch[op_row[graph_kernel]]
    graph_kernels = np.bincount(window[graph_kernel], minlength=n)
    seams = seam_intervals(shared.seam[member], start, window, _graph_op(op_row, launch), ws)
    context = context_intervals(launch, mine, launch_window, ws, we, shared.busy, win.device, seams)

    del graph_kernel, op_row, is_kernel
    phase = ops.phase[member]
    result = sweep(Windows(ws, we), Intervals(window, start, end, phase), context)
    n_busy = len(phases.PRIORITY)
    counts = np.bincount(window * n_busy + phase, minlength=n * n_busy).reshape(n, n_busy)

    return pd.DataFrame(
        {
            "step": win.step,
            "name": _texts(shared, "name", win.step, info),
            "text": _texts(shared, "text", win.step, info),
            "pid": info["pid"],
            "tid": info["tid"],
            "device": win.device.astype(np.int64),
            "rank": _ranks(shared.trace, win.device, info["pid"]),
            "start_ns": ws,
            "end_ns": we,
            "wall_ns": we - ws,
            "gpu_span_ns": last - first,
            "kernels": kernels,
            "launches": n_launches,
            "graph_launches": n_graph_launches,
            "mode": step_modes(kernels, graph_kernels),
            "attrs": info["attrs"],
            **_phase_columns(result.phase_ns, result.total_ns, counts),
        }
    )


def _texts(shared: LevelInputs, column: str, step: np.ndarray, info: dict[str, np.ndarray]):
    """The steps' ``column`` per row, built from the coded texts (not converted one by one)."""
    coded = shared.step_texts[column]
    return info[column] if coded is None else text_column(coded[0], coded[1][step])


def window_key(step: np.ndarray, dev_code: np.ndarray, stride: int, n_dev: int) -> np.ndarray:
    """(device, step) as one sortable int: windows are numbered device by device, so that a
    device's launches and ops, which come in time order and so in step order, are already
    nearly sorted by window (the sorts below merge runs instead of sorting interleaved keys)."""
    wide = np.int64 if stride * n_dev >= 2**31 else np.int32
    key = dev_code.astype(wide)
    key *= stride
    key += step
    return key


def _graph_op(op_row: np.ndarray, launch: Launches) -> np.ndarray:
    """Whether each op (by its launch row, -1 if unlinked) came from a graph launch."""
    out = op_row >= 0
    out[out] = launch.graph_launch[op_row[out]]
    return out


def _phase_columns(
    phase_ns: np.ndarray, total_ns: np.ndarray, counts: np.ndarray
) -> dict[str, np.ndarray]:
    columns = {name: phase_ns[:, p] for p, name in enumerate(phases.ALL)}
    columns.update({f"total_{name}": total_ns[:, t] for t, name in enumerate(phases.TOTALS)})
    columns.update({f"count_{name}": counts[:, p] for p, name in enumerate(phases.PRIORITY)})
    return columns


def add_idle_steps(rows: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Steps that launched nothing still get a row (device -1): all their time is host time."""
    seen = rows["step"].to_numpy() if len(rows) else np.zeros(0, np.int64)
    idle = steps[~np.isin(steps["step"].to_numpy(), seen)]
    if idle.empty:
        return rows
    wall = (idle["end"] - idle["start"]).to_numpy()
    zeros = np.zeros(len(idle), dtype=np.int64)
    phase_ns = np.zeros((len(idle), len(phases.ALL)), dtype=np.int64)
    phase_ns[:, phases.INDEX["host_wait"]] = wall
    extra = pd.DataFrame(
        {
            "step": idle["step"].to_numpy(),
            "name": idle["name"].to_numpy(),
            "text": idle["text"].to_numpy(),
            "pid": idle["pid"].to_numpy(),
            "tid": idle["tid"].to_numpy(),
            "device": zeros - 1,
            "rank": zeros - 1,
            "start_ns": idle["start"].to_numpy(),
            "end_ns": idle["end"].to_numpy(),
            "wall_ns": wall,
            "gpu_span_ns": zeros,
            "kernels": zeros,
            "launches": zeros,
            "graph_launches": zeros,
            "mode": "none",
            "attrs": idle["attrs"].to_numpy(),
            **_phase_columns(
                phase_ns,
                np.zeros((len(idle), len(phases.TOTALS)), np.int64),
                np.zeros((len(idle), len(phases.PRIORITY)), np.int64),
            ),
        }
    )
    return pd.concat([rows, extra], ignore_index=True) if len(rows) else extra


def _ranks(trace: Trace, devices: np.ndarray, pids: np.ndarray) -> np.ndarray:
    """Rank of each row: by the process that drives the device, else by the step's process (the
    first process with a rank of each device or pid)."""
    procs = trace.processes
    out = np.full(len(devices), -1, dtype=np.int64)
    if procs.empty:
        return out
    rank = procs["rank"].to_numpy()
    known = rank >= 0
    rank, device = rank[known], procs["device"].to_numpy()[known]
    found, by_pid = _first_of(procs["pid"].to_numpy()[known], rank, pids)
    out[found] = by_pid
    on_device = device >= 0
    found, by_device = _first_of(device[on_device], rank[on_device], devices)
    out[found] = by_device  # the device's process first
    return out


def _first_of(
    keys: np.ndarray, values: np.ndarray, query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each ``query`` whose key is in ``keys``: (its positions, the value at the key's first
    row)."""
    unique, first = np.unique(keys, return_index=True)
    if len(unique) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    at = np.searchsorted(unique, query)
    hit = np.flatnonzero((at < len(unique)) & (unique[np.minimum(at, len(unique) - 1)] == query))
    return hit, values[first[at[hit]]].astype(np.int64)
