"""The ops of one step window as frames: what the report's timeline draws.

A breakdown sums a step's time into phases; a timeline shows *where in the step* each phase
was. For chosen (step, device) windows of a breakdown: the step's GPU ops (device, stream,
start, end, name, phase), the API calls that launched them (the host row), and the idle gaps
between the ops labelled by kind with the breakdown's own rules: the same context intervals
(:func:`~verifyprof.attribution.context.context_intervals`) swept by the same
:func:`~verifyprof.attribution.sweep.sweep`, with each gap as a window, so a timeline's gaps add
up to the step's non-busy phases (idle kinds and ``other_work``) exactly. Ops are capped per
window (the longest kept): a page stays small whatever the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.attribution.assignment import AttributedSteps, attributed_steps
from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.context import (
    DeviceBusy,
    busy_of,
    context_intervals,
    op_call_ends,
    queue_seams,
    ranges_of,
    seam_intervals,
)
from verifyprof.attribution.steps import Calls, GpuOps, Launches
from verifyprof.attribution.sweep import Intervals, Windows, sweep
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.contracts import phases
from verifyprof.trace.events import Trace

MAX_OPS = 4000  # per window: a 1M-kernel step still draws in a browser


@dataclass
class StepTimeline:
    """One (step, device) window: its ops, launching calls and idle gaps (absolute ns)."""

    step: int
    device: int
    rank: int
    name: str
    text: str
    start_ns: int
    end_ns: int
    ops: pd.DataFrame  # device, stream, start, end, name, phase, kind
    calls: pd.DataFrame  # tid, start, end, name
    gaps: pd.DataFrame  # device, start, end, kind (the non-busy phase with most of the gap)
    ops_total: int  # before the cap
    # non-busy time by phase over all gaps (before the cap): the step's idle phases
    idle_ns: dict[str, int]


def step_timelines(
    trace: Trace,
    result: Breakdown,
    windows: list[tuple[int, int]],
    taxonomy: Taxonomy | None = None,
    max_ops: int = MAX_OPS,
    attributed: AttributedSteps | None = None,
) -> list[StepTimeline]:
    """Timelines of the (step, device) windows of ``result`` (a breakdown of ``trace``, not
    released); ``attributed``: the steps the breakdown was made of, when a run holds them."""
    shared = _timeline_inputs(trace, result, taxonomy, attributed)
    out = []
    for step, device in windows:
        row = result.steps[
            (result.steps["step"] == step) & (result.steps["device"] == device)
        ].iloc[0]
        out.append(_window_timeline(trace, shared, row, step, device, max_ops))
    return out


@dataclass(frozen=True)
class _TimelineInputs:
    """What every window's timeline reads: the ops and launches as the breakdown linked them,
    each level's steps, and the breakdown's context (busy time, queue seams)."""

    ops: GpuOps
    calls: Calls
    launch: Launches
    levels: dict[int, tuple[np.ndarray, np.ndarray]]  # level -> (op step, launch step)
    step_level: dict[int, int]
    streams: np.ndarray
    seam: np.ndarray
    busy: DeviceBusy
    graph_op: np.ndarray


def _timeline_inputs(
    trace: Trace, result: Breakdown, taxonomy: Taxonomy | None, attributed: AttributedSteps | None
) -> _TimelineInputs:
    source = result.options.get("taxonomy")
    taxonomy = taxonomy or load_taxonomy(None if source in (None, "builtin") else source)
    # the steps as the breakdown assigned them (no range: the whole trace, a step per device)
    regex = result.options.get("range")
    if attributed is None or not attributed.matches(taxonomy, regex):
        attributed = attributed_steps(trace, taxonomy, regex)
    ops, calls = attributed.ops, attributed.calls
    launch, op_launch, assigned = attributed.launch, attributed.op_launch, attributed.assigned
    levels = assigned.by_level()
    step_level = dict(zip(assigned.steps["step"].tolist(), assigned.steps["level"].tolist()))
    streams = _op_streams(trace, ops)
    # the breakdown's context, as it builds it
    seam = queue_seams(ops.device, ops.start, ops.end, op_call_ends(ops, calls))
    busy = busy_of(ops, launch, seam)
    graph_op = np.zeros(len(ops), bool)
    graph_op[op_launch >= 0] = launch.graph_launch[op_launch[op_launch >= 0]]
    return _TimelineInputs(ops, calls, launch, levels, step_level, streams, seam, busy, graph_op)


def _window_timeline(
    trace: Trace, shared: _TimelineInputs, row: pd.Series, step: int, device: int, max_ops: int
) -> StepTimeline:
    """The timeline of one (step, device) window, ``row`` its breakdown row."""
    ops, launch = shared.ops, shared.launch
    op_step, launch_step = shared.levels[shared.step_level[step]]
    mine = np.flatnonzero((op_step == step) & (ops.device == device))
    ws, we = int(row["start_ns"]), int(row["end_ns"])
    frame = _op_frame(trace, shared, mine)
    in_launch = np.flatnonzero((launch_step == step) & (launch.device == device))
    call_frame = pd.DataFrame(
        {
            "tid": shared.calls.tid[launch.call[in_launch]],
            "start": launch.start[in_launch],
            "end": launch.end[in_launch],
            "name": (
                trace.strings.lookup(trace.api["name_id"].to_numpy()[launch.call[in_launch]])
                if len(in_launch)
                else []
            ),
        }
    )
    seams = seam_intervals(
        shared.seam[mine],
        ops.start[mine],
        np.zeros(len(mine), np.int64),
        shared.graph_op[mine],
        np.array([ws]),
    )
    gaps, idle = labelled_gaps(
        frame["start"].to_numpy(),
        frame["end"].to_numpy(),
        launch,
        in_launch,
        shared.busy,
        ws,
        we,
        device,
        seams,
    )
    gaps.insert(0, "device", device)
    return StepTimeline(
        step=int(step),
        device=int(device),
        rank=int(row["rank"]),
        name=str(row["name"]),
        text=str(row["text"]),
        start_ns=ws,
        end_ns=we,
        ops=longest(frame, max_ops),
        calls=longest(call_frame, max_ops),
        gaps=longest(gaps, max_ops),
        ops_total=len(frame),
        idle_ns=idle,
    )


def _op_frame(trace: Trace, shared: _TimelineInputs, mine: np.ndarray) -> pd.DataFrame:
    """The window's ops (rows ``mine`` of the op table), all of them."""
    ops = shared.ops
    return pd.DataFrame(
        {
            "device": ops.device[mine].astype(np.int64),
            "stream": shared.streams[mine],
            "start": ops.start[mine],
            "end": ops.end[mine],
            "name": _op_names(trace, ops, mine),
            "phase": np.asarray(phases.ALL, dtype=object)[ops.phase[mine]],
            "kind": np.where(
                ops.is_kernel[mine], "kernel", np.where(ops.name_id[mine] >= 0, "copy", "graph")
            ),
        }
    )


def longest(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    """At most ``limit`` rows, the longest (what a reader can see), in start order."""
    if len(frame) > limit:
        frame = frame.loc[(frame["end"] - frame["start"]).nlargest(limit).index]
    return frame.sort_values("start", kind="stable").reset_index(drop=True)


def own_gaps(start: np.ndarray, end: np.ndarray, ws: int, we: int) -> tuple[np.ndarray, np.ndarray]:
    """The spans of ``[ws, we)`` where none of the step's own ops runs."""
    order = np.argsort(start, kind="stable")
    s, e = np.clip(start[order], ws, we), np.clip(end[order], ws, we)
    reach = np.maximum.accumulate(e) if len(e) else e
    gap_start, gap_end = np.r_[ws, reach], np.r_[s, we]
    keep = gap_end > gap_start
    return gap_start[keep], gap_end[keep]


def labelled_gaps(
    start: np.ndarray,
    end: np.ndarray,
    launch,
    in_launch: np.ndarray,
    busy: DeviceBusy,
    ws: int,
    we: int,
    device: int,
    seams: list,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The step's gaps, each labelled by the non-busy phase with most of it, and those phases'
    totals.

    The window's context intervals (launch calls, graph replays and calls, other work, blocked
    queues) are cut to the gaps and swept with each gap as a window: the breakdown's rules, so
    the totals equal the step's non-busy phases."""
    gap_start, gap_end = own_gaps(start, end, ws, we)
    context = context_intervals(
        launch,
        in_launch,
        np.zeros(len(in_launch), np.int64),
        np.array([ws]),
        np.array([we]),
        busy,
        np.array([device]),
        seams,
    )
    # the gaps each context interval meets
    first = np.searchsorted(gap_end, context.start, side="right")
    stop = np.searchsorted(gap_start, context.end, side="left")
    count = np.maximum(stop - first, 0)
    which, gap = ranges_of(first, count)
    lo, hi = (
        np.maximum(context.start[which], gap_start[gap]),
        np.minimum(context.end[which], gap_end[gap]),
    )
    keep = hi > lo
    order = np.argsort(gap[keep], kind="stable")
    pieces = Intervals(
        gap[keep][order].astype(np.int64),
        lo[keep][order],
        hi[keep][order],
        context.slot[which][keep][order],
    )
    nothing = Intervals(
        np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8)
    )
    phase_ns = sweep(Windows(gap_start, gap_end), nothing, pieces).phase_ns
    names = np.asarray(phases.ALL, dtype=object)
    gaps = pd.DataFrame(
        {
            "start": gap_start,
            "end": gap_end,
            "kind": names[phase_ns.argmax(axis=1)] if len(gap_start) else [],
        }
    )
    totals = phase_ns.sum(axis=0)
    return gaps, {str(names[i]): int(totals[i]) for i in np.flatnonzero(totals)}


def _op_streams(trace: Trace, ops) -> np.ndarray:
    """Stream of every op, in gpu_ops' order: kernels, copies, then opaque graph rows (matched by
    key)."""
    parts = [trace.kernels["stream"].to_numpy(np.int64), trace.copies["stream"].to_numpy(np.int64)]
    rest = len(ops) - sum(len(p) for p in parts)
    if rest:
        from verifyprof.attribution.steps import op_key

        g = trace.graphs
        index = pd.Index(op_key(g["pid"].to_numpy(), g["correlation"].to_numpy()))
        tail = slice(len(ops) - rest, len(ops))
        found = index.get_indexer(op_key(ops.pid[tail], ops.correlation[tail]))
        parts.append(np.where(found >= 0, g["stream"].to_numpy(np.int64)[np.maximum(found, 0)], -1))
    return np.concatenate(parts)


def _op_names(trace: Trace, ops, rows: np.ndarray) -> np.ndarray:
    ids = ops.name_id[rows]
    names = np.full(len(rows), "CUDA graph (opaque)", dtype=object)
    known = ids >= 0
    if known.any():
        names[known] = trace.strings.lookup(ids[known])
    return names
