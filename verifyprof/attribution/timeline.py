"""The ops of one step window as frames: what the report's timeline draws.

A breakdown sums a step's time into phases; a timeline shows *where in the step* each phase
was. For chosen (step, device) windows of a breakdown: the step's GPU ops (device, stream,
start, end, name, phase), the API calls that launched them (the host row), and the idle gaps
between the ops labelled by idle kind with the breakdown's own rule (GPU idle while a launch
interval of the step covers it: ``launch_gap``; otherwise ``host_wait``), so a timeline's gaps
add up to the breakdown's idle phases of that step. Ops are capped per window (the longest
kept): a page stays small whatever the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.attribution.breakdown import Breakdown, launch_intervals
from verifyprof.attribution.steps import assign_levels, find_steps, gpu_ops, launches, link_calls
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.contracts import phases
from verifyprof.trace.events import Trace

MAX_OPS = 4000  # per window: a 1M-kernel step still draws in a browser
OP_KINDS = ("kernel", "copy", "graph")


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
    gaps: pd.DataFrame  # device, start, end, kind (an idle phase name)
    ops_total: int  # before the cap
    idle_ns: dict[str, int]  # idle time by kind, all gaps (before the cap)


def step_timelines(trace: Trace, result: Breakdown, windows: list[tuple[int, int]], taxonomy: Taxonomy | None = None,
                   max_ops: int = MAX_OPS) -> list[StepTimeline]:
    """Timelines of the (step, device) windows of ``result`` (a breakdown of ``trace``, not released)."""
    source = result.options.get("taxonomy")
    taxonomy = taxonomy or load_taxonomy(None if source in (None, "builtin") else source)
    ops = gpu_ops(trace, taxonomy)
    calls = link_calls(trace, ops)
    launch, op_launch = launches(ops, calls)
    regex = result.options.get("range")
    if regex is None:  # whole trace: a step is all of one device's ops
        op_step = np.searchsorted(np.unique(ops.device), ops.device)
        launch_step = np.searchsorted(np.unique(ops.device), launch.device)
        levels = {0: (op_step, launch_step)}
        step_level = {int(s): 0 for s in result.steps["step"]}
    else:
        steps = find_steps(trace, regex)
        levels = dict(zip(np.unique(steps["level"].to_numpy()).tolist(), assign_levels(steps, launch, op_launch, calls)))
        step_level = dict(zip(steps["step"].tolist(), steps["level"].tolist()))
    streams = _op_streams(trace, ops)
    out = []
    for step, device in windows:
        row = result.steps[(result.steps["step"] == step) & (result.steps["device"] == device)].iloc[0]
        op_step, launch_step = levels[step_level[step]]
        mine = np.flatnonzero((op_step == step) & (ops.device == device))
        ws, we = int(row["start_ns"]), int(row["end_ns"])
        frame = pd.DataFrame({
            "device": ops.device[mine].astype(np.int64), "stream": streams[mine], "start": ops.start[mine], "end": ops.end[mine],
            "name": _op_names(trace, ops, mine), "phase": np.asarray(phases.ALL, dtype=object)[ops.phase[mine]],
            "kind": np.where(ops.is_kernel[mine], "kernel", np.where(ops.name_id[mine] >= 0, "copy", "graph")),
        })
        in_launch = np.flatnonzero((launch_step == step) & (launch.device == device))
        call_frame = pd.DataFrame({"tid": calls.tid[launch.call[in_launch]], "start": launch.start[in_launch], "end": launch.end[in_launch],
                                   "name": trace.strings.lookup(trace.api["name_id"].to_numpy()[launch.call[in_launch]]) if len(in_launch) else []})
        launch_iv = launch_intervals(np.zeros(len(in_launch), np.int64), launch.start[in_launch],
                                     np.maximum(launch.end[in_launch], launch.last_op_start[in_launch]), np.array([ws]), np.array([we]))
        gaps = idle_gaps(frame["start"].to_numpy(), frame["end"].to_numpy(), launch_iv.start, launch_iv.end, ws, we)
        gaps.insert(0, "device", device)
        widths = (gaps["end"] - gaps["start"]).groupby(gaps["kind"]).sum()
        out.append(StepTimeline(step=int(step), device=int(device), rank=int(row["rank"]), name=str(row["name"]), text=str(row["text"]),
                                start_ns=ws, end_ns=we, ops=longest(frame, max_ops), calls=longest(call_frame, max_ops),
                                gaps=longest(gaps, max_ops), ops_total=len(frame), idle_ns={str(k): int(v) for k, v in widths.items()}))
    return out


def longest(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    """At most ``limit`` rows, the longest (what a reader can see), in start order."""
    if len(frame) > limit:
        frame = frame.loc[(frame["end"] - frame["start"]).nlargest(limit).index]
    return frame.sort_values("start", kind="stable").reset_index(drop=True)


def idle_gaps(start: np.ndarray, end: np.ndarray, launch_start: np.ndarray, launch_end: np.ndarray, ws: int, we: int) -> pd.DataFrame:
    """The window's time with none of ``start/end`` running, split into launch_gap (a launch
    interval covers it) and host_wait pieces; adjacent pieces of one kind are merged."""
    order = np.argsort(start, kind="stable")
    s, e = np.clip(start[order], ws, we), np.clip(end[order], ws, we)
    reach = np.maximum.accumulate(e) if len(e) else e
    gap_start = np.r_[ws, reach]
    gap_end = np.r_[s, we]
    keep = gap_end > gap_start
    gap_start, gap_end = gap_start[keep], gap_end[keep]
    lo, hi = np.clip(launch_start, ws, we), np.clip(launch_end, ws, we)
    cuts = np.unique(np.r_[gap_start, gap_end, lo, hi])
    seg_s, seg_e = cuts[:-1], cuts[1:]
    mid = seg_s + (seg_e - seg_s) // 2
    in_gap = _covered(mid, gap_start, gap_end)
    launched = _covered(mid, np.sort(lo), np.maximum.accumulate(hi[np.argsort(lo)]) if len(lo) else hi)
    seg_s, seg_e, launched = seg_s[in_gap], seg_e[in_gap], launched[in_gap]
    kind = np.where(launched, "launch_gap", "host_wait")
    new = np.r_[True, (seg_s[1:] != seg_e[:-1]) | (kind[1:] != kind[:-1])] if len(seg_s) else np.zeros(0, bool)
    heads = np.flatnonzero(new)
    return pd.DataFrame({"start": seg_s[heads], "end": np.maximum.reduceat(seg_e, heads) if len(heads) else seg_e, "kind": kind[heads]})


def _covered(points: np.ndarray, starts: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Whether each point lies in some [start, end) of intervals sorted by start (``reach``: running max of ends)."""
    if len(starts) == 0:
        return np.zeros(len(points), bool)
    pos = np.searchsorted(starts, points, side="right") - 1
    return (pos >= 0) & (points < reach[np.clip(pos, 0, None)])


def _op_streams(trace: Trace, ops) -> np.ndarray:
    """Stream of every op, in gpu_ops' order: kernels, copies, then opaque graph rows (matched by key)."""
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
