"""Per step and per device: where the wall time went, phase by phase.

For every (step, device) pair: ``wall_ns`` runs from the range's start (or its first GPU op,
if earlier) to the later of the range's end and its last GPU op's end; ``gpu_span_ns`` from
first op start to last op end (nsys's GPU projection); ``phases`` split ``wall_ns`` exactly
(see :mod:`verifyprof.attribution.sweep`). Steps that launched nothing get one row with
``device = -1`` and all their time in ``host_wait``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.attribution.context import (
    DeviceBusy,
    busy_of,
    context_intervals,
    device_major_order,
    launch_windows,
    op_call_ends,
    queue_seams,
    seam_intervals,
)
from verifyprof.attribution.steps import (
    NO_STEP,
    GpuOps,
    Launches,
    assign_levels,
    find_steps,
    gpu_ops,
    launches,
    link_calls,
    whole_trace_steps,
)
from verifyprof.attribution.summary import summarize
from verifyprof.attribution.sweep import Intervals, Windows, sweep
from verifyprof.attribution.syncs import SYNC_COLUMNS, sync_calls, sync_columns
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.contracts import phases
from verifyprof.contracts.errors import TraceError
from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX
from verifyprof.contracts.schema import SCHEMA, BreakdownFrame, step_records
from verifyprof.trace.events import Trace

GROUP_OPS = 1 << 18  # ops per (level, device group) task: bounds the working memory


@dataclass
class Breakdown:
    trace: Trace
    steps: pd.DataFrame  # one row per (step, device); phase columns in ns
    options: dict[str, Any]
    linked_ops: int = 0
    unlinked_ops: int = 0
    collectives: pd.DataFrame | None = None
    collective_kernels: dict[str, Any] | None = (
        None  # summary of every collective kernel (comm.summarize_kernels)
    )
    step_table: pd.DataFrame | None = (
        None  # the steps found (find_steps), the rows' step ids index it
    )
    collective_ops: pd.DataFrame | None = (
        None  # every collective kernel (comm.collective_kernels) + step_<level>
    )
    extra: dict[str, Any] = field(default_factory=dict)

    def step_records(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The JSON records of step rows ``start:stop`` (all by default)."""
        return step_records(self.steps.iloc[start:stop])

    def header(self) -> dict[str, Any]:
        """Everything of the JSON before ``steps``."""
        return {
            "schema": SCHEMA,
            "trace": self.trace_info(),
            "options": self.options,
            "phases": list(phases.ALL),
        }

    def summary(self) -> dict[str, Any]:
        return summarize(self.steps, self.collectives, self.collective_kernels)

    def trace_info(self) -> dict[str, Any]:
        info = self.trace.describe()
        info["linked_ops"] = self.linked_ops
        info["unlinked_ops"] = self.unlinked_ops
        return info

    def frame(self) -> BreakdownFrame:
        """What the model consumes: the steps frame and the trace description (no event tables)."""
        return BreakdownFrame(
            steps=self.steps, trace=self.trace_info(), options=self.options, summary=None
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.header(), "steps": self.step_records(), "summary": self.summary()}


def breakdown(
    trace: Trace,
    step_regex: str = DEFAULT_STEP_REGEX,
    taxonomy: Taxonomy | None = None,
    whole_trace: bool = False,
    release: bool = False,
) -> Breakdown:
    """``release=True`` lets the breakdown drop the trace's event tables once it has read them
    (``Trace.release_events``): for one-shot runs such as the CLI."""
    taxonomy = taxonomy or load_taxonomy()
    ops = gpu_ops(trace, taxonomy)
    where = trace.source[0] if trace.source else None
    if len(ops) == 0:
        raise TraceError(
            "no GPU activity in the trace (empty capture: no kernels, copies or graphs)", where
        )
    calls = link_calls(trace, ops)
    launch, op_launch = launches(ops, calls)
    seam = queue_seams(
        ops.device, ops.start, ops.end, op_call_ends(ops, calls)
    )  # before the calls are released
    syncs = sync_calls(trace, ops.pid, ops.start)  # before the events are released
    if release:
        calls.start = calls.end = np.empty(0, np.int64)  # launches holds what is needed of them
        calls.tid = calls.tid.copy()
        trace.release_events()
    if whole_trace:
        steps, levels = whole_trace_steps(ops, launch)
    else:
        steps = find_steps(trace, step_regex)
        levels = assign_levels(steps, launch, op_launch, calls)
    devices, device_code = device_codes(ops.device)
    shared = LevelInputs(
        trace,
        steps,
        ops,
        launch,
        op_launch,
        busy_of(ops, launch, seam),
        seam,
        devices,
        device_code,
        np.searchsorted(devices, launch.device).astype(device_code.dtype),
    )  # a launch's device is an op's
    groups = device_groups(shared)
    try:
        parts = [
            level_rows(shared, op_step, launch_step, group)
            for op_step, launch_step in levels
            for group in groups
        ]
    except TraceError as err:  # the sweep's invariant broken: name the file
        raise TraceError(err.problem, err.path or where) from None
    rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    rows = (
        _add_idle_steps(rows, steps)
        .sort_values(["step", "device"], kind="stable")
        .reset_index(drop=True)
    )
    rows.insert(
        rows.columns.get_loc("wall_ns") + 1, "cost_ns", rows["wall_ns"] - rows["other_work"]
    )  # what the step occupies
    for column, values in sync_columns(syncs, rows).items():
        rows.insert(rows.columns.get_loc("mode") + 1 + SYNC_COLUMNS.index(column), column, values)
    linked = int((ops.call >= 0).sum())
    result = Breakdown(
        trace=trace,
        steps=rows,
        options={
            "range": None if whole_trace else step_regex,
            "whole_trace": whole_trace,
            "taxonomy": taxonomy.source,
        },
        linked_ops=linked,
        unlinked_ops=int(len(ops) - linked),
    )
    from verifyprof.attribution.comm import (
        collective_calls,
        collective_kernels,
        step_collectives,
        summarize_kernels,
    )

    kernels = collective_kernels(trace, ops)
    result.step_table = steps
    if kernels is not None:
        op = kernels["op"].to_numpy()
        result.collective_ops = kernels.assign(
            **{f"step_{n}": op_step[op].astype(np.int64) for n, (op_step, _) in enumerate(levels)}
        )
    result.collective_kernels = summarize_kernels(kernels) if kernels is not None else None
    collective = collective_calls(trace, ops, kernels)
    del kernels
    if collective is not None:
        result.collectives = step_collectives(collective, [op_step for op_step, _ in levels], rows)
    return result


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


def device_codes(device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    devices, code = np.unique(device, return_inverse=True)
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


def level_rows(
    shared: LevelInputs, op_step: np.ndarray, launch_step: np.ndarray, group: np.ndarray
) -> pd.DataFrame:
    """One row per (step, device) of one nesting level and one group of devices (codes into
    ``shared.devices``), with window, counts, mode and phases."""
    trace, steps, ops, launch, op_launch, seam = (
        shared.trace,
        shared.steps,
        shared.ops,
        shared.launch,
        shared.op_launch,
        shared.seam,
    )
    in_group = np.zeros(len(shared.devices), bool)
    in_group[group] = True
    member = np.flatnonzero((op_step != NO_STEP) & in_group[shared.device_code])
    member = member.astype(np.int32 if len(op_step) < 2**31 else np.int64)
    if len(member) == 0:
        return pd.DataFrame()
    devices = shared.devices[group]  # ascending: groups are consecutive codes
    stride = max(len(steps), 1)
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
    n = len(bounds)
    window_step = (window_keys % stride).astype(np.int64)
    window_device = devices[window_keys // stride]

    start, end = ops.start[member], ops.end[member]
    first = np.minimum.reduceat(start, bounds)
    last = np.maximum.reduceat(end, bounds)
    is_kernel = ops.is_kernel[member]
    kernels = np.bincount(window[is_kernel], minlength=n).astype(np.int64)

    info = {
        c: steps[c].to_numpy()[window_step]
        for c in ("name", "text", "pid", "tid", "start", "end", "attrs")
    }  # step == position
    ws = np.minimum(info["start"], first)
    we = np.maximum(info["end"], last)

    mine, launch_window = launch_windows(
        launch_step, shared.launch_code, in_group, int(group[0]), window_keys, stride
    )
    n_launches = np.bincount(launch_window, minlength=n).astype(np.int64)
    n_graph_launches = np.bincount(launch_window[launch.graph_launch[mine]], minlength=n).astype(
        np.int64
    )
    op_row = op_launch[member]
    graph_kernel = is_kernel & (op_row >= 0)
    graph_kernel[graph_kernel] = launch.graph_launch[op_row[graph_kernel]]
    graph_kernels = np.bincount(window[graph_kernel], minlength=n)
    seams = seam_intervals(seam[member], start, window, _graph_op(op_row, launch), ws)
    context = context_intervals(
        launch, mine, launch_window, ws, we, shared.busy, window_device, seams
    )

    del graph_kernel, op_row, is_kernel
    phase = ops.phase[member]
    result = sweep(Windows(ws, we), Intervals(window, start, end, phase), context)
    n_busy = len(phases.PRIORITY)
    counts = np.bincount(window * n_busy + phase, minlength=n * n_busy).reshape(n, n_busy)

    rows = pd.DataFrame(
        {
            "step": window_step,
            "name": info["name"],
            "text": info["text"],
            "pid": info["pid"],
            "tid": info["tid"],
            "device": window_device.astype(np.int64),
            "rank": _ranks(trace, window_device, info["pid"]),
            "start_ns": ws,
            "end_ns": we,
            "wall_ns": we - ws,
            "gpu_span_ns": last - first,
            "kernels": kernels,
            "launches": n_launches,
            "graph_launches": n_graph_launches,
            "mode": np.where(
                kernels == 0, "none", np.where(graph_kernels * 2 >= kernels, "graph", "eager")
            ),
            "attrs": info["attrs"],
            **_phase_columns(result.phase_ns, result.total_ns, counts),
        }
    )
    return rows


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


def _add_idle_steps(rows: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
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
    """Rank of each row: by the process that drives the device, else by the step's process."""
    procs = trace.processes
    if procs.empty:
        return np.full(len(devices), -1, dtype=np.int64)
    known = procs[procs["rank"].to_numpy() >= 0]
    by_device = (
        known[known["device"].to_numpy() >= 0].drop_duplicates("device").set_index("device")["rank"]
    )
    by_pid = known.drop_duplicates("pid").set_index("pid")["rank"]
    from_device = by_device.reindex(devices).to_numpy(dtype=float)
    from_pid = by_pid.reindex(pids).to_numpy(dtype=float)
    ranks = np.where(~np.isnan(from_device), from_device, from_pid)
    return np.nan_to_num(ranks, nan=-1).astype(np.int64)
