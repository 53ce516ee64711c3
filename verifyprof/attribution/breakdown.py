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

from verifyprof.attribution import phases
from verifyprof.attribution.steps import assign_ops, find_steps, gpu_ops, link_calls, whole_trace_steps
from verifyprof.attribution.summary import COMM_COLUMNS, summarize
from verifyprof.attribution.sweep import TOTAL_PHASES, Ops, Windows, sweep
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.errors import TraceError
from verifyprof.ranges import DEFAULT_STEP_REGEX
from verifyprof.trace.model import Trace

SCHEMA = "verifyprof.breakdown/1"
_NEVER = np.iinfo(np.int64).max
LAUNCH_BRIDGE_NS = 50_000  # host pauses between launches shorter than this are launch overhead


@dataclass
class Breakdown:
    trace: Trace
    steps: pd.DataFrame  # one row per (step, device); phase columns in ns
    options: dict[str, Any]
    linked_ops: int = 0
    unlinked_ops: int = 0
    collectives: pd.DataFrame | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def step_records(self) -> list[dict[str, Any]]:
        rows = self.steps
        phase_cols = list(phases.ALL)
        phase_values = rows[phase_cols].to_numpy(dtype=np.int64)
        total_values = rows[[f"total_{p}" for p in TOTAL_PHASES]].to_numpy(dtype=np.int64)
        count_values = rows[[f"count_{p}" for p in phases.PRIORITY]].to_numpy(dtype=np.int64)
        has_comm = all(c in rows.columns for c in COMM_COLUMNS)
        comm_values = rows[list(COMM_COLUMNS)].to_numpy(dtype=np.int64) if has_comm else None
        plain = rows[["name", "text", "step", "rank", "device", "pid", "tid", "start_ns", "end_ns", "wall_ns", "gpu_span_ns", "kernels", "launches", "graph_launches", "mode"]]
        records = []
        for i, base in enumerate(plain.to_dict("records")):  # one per step row: output assembly
            record = {k: (v.item() if hasattr(v, "item") else v) for k, v in base.items()}
            record["index"] = record.pop("step")
            record["attrs"] = rows["attrs"].iat[i]
            record["phases"] = dict(zip(phase_cols, phase_values[i].tolist()))
            record["totals"] = dict(zip(TOTAL_PHASES, total_values[i].tolist()))
            record["counts"] = dict(zip(phases.PRIORITY, count_values[i].tolist()))
            if comm_values is not None:
                record["comm"] = dict(zip(COMM_COLUMNS, comm_values[i].tolist()))
            records.append(record)
        return records

    def summary(self) -> dict[str, Any]:
        return summarize(self.steps, self.collectives)

    def to_json(self) -> dict[str, Any]:
        trace_info = self.trace.describe()
        trace_info["linked_ops"] = self.linked_ops
        trace_info["unlinked_ops"] = self.unlinked_ops
        return {
            "schema": SCHEMA,
            "trace": trace_info,
            "options": self.options,
            "phases": list(phases.ALL),
            "steps": self.step_records(),
            "summary": self.summary(),
        }


def breakdown(
    trace: Trace,
    step_regex: str = DEFAULT_STEP_REGEX,
    taxonomy: Taxonomy | None = None,
    whole_trace: bool = False,
) -> Breakdown:
    taxonomy = taxonomy or load_taxonomy()
    ops = gpu_ops(trace, taxonomy)
    where = trace.source[0] if trace.source else None
    if ops.empty:
        raise TraceError("no GPU activity in the trace (empty capture: no kernels, copies or graphs)", where)
    ops = link_calls(trace, ops)
    if whole_trace:
        steps = whole_trace_steps(trace, ops)
        device_step = pd.Series(steps["step"].to_numpy(), index=steps["device"].to_numpy())
        pairs = pd.DataFrame({"op": np.arange(len(ops)), "step": device_step.loc[ops["device"].to_numpy()].to_numpy()})
    else:
        steps = find_steps(trace, step_regex)
        pairs = assign_ops(steps, ops)
    rows = step_rows(trace, steps, ops, pairs)
    linked = int((ops["call"].to_numpy() >= 0).sum())
    result = Breakdown(
        trace=trace,
        steps=rows,
        options={"range": None if whole_trace else step_regex, "whole_trace": whole_trace, "taxonomy": taxonomy.source},
        linked_ops=linked,
        unlinked_ops=int(len(ops) - linked),
    )
    from verifyprof.attribution.comm import collective_calls, step_collectives

    calls = collective_calls(trace, ops)
    if calls is not None:
        result.collectives = step_collectives(calls, pairs, rows)
    return result


def step_rows(trace: Trace, steps: pd.DataFrame, ops: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, device) with window, counts, mode and phase times."""
    op_idx = pairs["op"].to_numpy()
    member = pd.DataFrame(
        {
            "step": pairs["step"].to_numpy(),
            "device": ops["device"].to_numpy()[op_idx],
            "start": ops["start"].to_numpy()[op_idx],
            "end": ops["end"].to_numpy()[op_idx],
            "phase": ops["phase"].to_numpy()[op_idx],
            "is_kernel": ops["is_kernel"].to_numpy()[op_idx],
            "call": ops["call"].to_numpy()[op_idx],
            "call_start": ops["call_start"].to_numpy()[op_idx],
            "call_end": ops["call_end"].to_numpy()[op_idx],
            "graph_launch": ops["graph_launch"].to_numpy()[op_idx],
        }
    )
    grouped = member.groupby(["step", "device"], sort=True)
    keys = grouped.agg(
        first=("start", "min"),
        last=("end", "max"),
        kernels=("is_kernel", "sum"),
        graph_kernels=("graph_launch", "sum"),
    ).reset_index()
    calls = member.loc[member["call"].to_numpy() >= 0, ["step", "device", "call", "graph_launch"]].drop_duplicates(["step", "device", "call"])
    call_counts = calls.groupby(["step", "device"]).agg(launches=("call", "size"), graph_launches=("graph_launch", "sum")).reset_index()
    keys = keys.merge(call_counts, on=["step", "device"], how="left")
    keys["launches"] = keys["launches"].fillna(0).astype(np.int64)
    keys["graph_launches"] = keys["graph_launches"].fillna(0).astype(np.int64)
    keys["has_ops"] = True

    # Steps that launched nothing still get a row (device -1): all their time is host time.
    idle_steps = np.setdiff1d(steps["step"].to_numpy(), keys["step"].to_numpy())
    if len(idle_steps):
        zeros = np.zeros(len(idle_steps), dtype=np.int64)
        empty = pd.DataFrame(
            {"step": idle_steps, "device": zeros - 1, "first": zeros, "last": zeros, "kernels": zeros,
             "graph_kernels": zeros, "launches": zeros,
             "graph_launches": zeros, "has_ops": np.zeros(len(idle_steps), dtype=bool)}
        ).astype(keys.dtypes.to_dict())
        keys = pd.concat([keys, empty], ignore_index=True)
    keys = keys.sort_values(["step", "device"], kind="stable").reset_index(drop=True)
    step_info = steps.set_index("step").loc[keys["step"].to_numpy()]
    range_start = step_info["start"].to_numpy()
    range_end = step_info["end"].to_numpy()
    has_ops = keys["has_ops"].to_numpy(dtype=bool)
    first = keys["first"].to_numpy(dtype=np.int64)
    last = keys["last"].to_numpy(dtype=np.int64)
    ws = np.where(has_ops, np.minimum(range_start, first), range_start)
    we = np.where(has_ops, np.maximum(range_end, last), range_end)
    window_of = pd.MultiIndex.from_frame(keys[["step", "device"]]).get_indexer(pd.MultiIndex.from_frame(member[["step", "device"]]))
    window_of = window_of.astype(np.int64)
    result = sweep(
        Windows(ws=ws, we=we),
        Ops(window_of, member["start"].to_numpy(), member["end"].to_numpy(), member["phase"].to_numpy()),
        launch_intervals(member, window_of, ws, we),
    )

    kernels = keys["kernels"].to_numpy(dtype=np.int64)
    graph_kernels = keys["graph_kernels"].to_numpy(dtype=np.int64)
    mode = np.where(kernels == 0, "none", np.where(graph_kernels * 2 >= kernels, "graph", "eager"))
    rows = pd.DataFrame(
        {
            "step": keys["step"].to_numpy(),
            "name": step_info["name"].to_numpy(),
            "text": step_info["text"].to_numpy(),
            "pid": step_info["pid"].to_numpy(),
            "tid": step_info["tid"].to_numpy(),
            "device": keys["device"].to_numpy(dtype=np.int64),
            "rank": _ranks(trace, keys["device"].to_numpy(), step_info["pid"].to_numpy()),
            "start_ns": ws,
            "end_ns": we,
            "wall_ns": we - ws,
            "gpu_span_ns": np.where(has_ops, last - first, 0),
            "kernels": kernels,
            "launches": keys["launches"].to_numpy(dtype=np.int64),
            "graph_launches": keys["graph_launches"].to_numpy(dtype=np.int64),
            "mode": mode,
        }
    )
    rows["attrs"] = step_info["attrs"].to_numpy()
    for p, name in enumerate(phases.ALL):
        rows[name] = result.phase_ns[:, p]
    for t, name in enumerate(TOTAL_PHASES):
        rows[f"total_{name}"] = result.total_ns[:, t]
    # GPU ops per phase: lets the model count allreduce calls per step from one rank's trace.
    n_phases = len(phases.PRIORITY)
    counts = np.bincount(window_of * n_phases + member["phase"].to_numpy().astype(np.int64), minlength=len(keys) * n_phases)
    counts = counts.reshape(len(keys), n_phases)
    for p, name in enumerate(phases.PRIORITY):
        rows[f"count_{name}"] = counts[:, p]
    return rows


def launch_intervals(member: pd.DataFrame, window: np.ndarray, ws: np.ndarray, we: np.ndarray, bridge_ns: int = LAUNCH_BRIDGE_NS) -> Ops:
    """When the host was issuing a window's work: the GPU idle then is a launch gap.

    Two kinds of interval: each op's ``[launch call start, op start)`` (being issued, or queued
    behind earlier work), and the host time between two consecutive launch calls of the window
    when shorter than ``bridge_ns`` (the Python between eager launches of one forward, which a
    CUDA graph removes). A longer pause means the host was doing something else: host wait.
    """
    linked = member["call"].to_numpy() >= 0
    call_start = member["call_start"].to_numpy()[linked]
    op_start = member["start"].to_numpy()[linked]
    op_window = window[linked]
    queued = call_start < op_start
    starts = [np.maximum(call_start[queued], ws[op_window[queued]])]
    ends = [op_start[queued]]
    windows = [op_window[queued]]

    calls = pd.DataFrame({"window": op_window, "call": member["call"].to_numpy()[linked], "start": call_start, "end": member["call_end"].to_numpy()[linked]})
    calls = calls.drop_duplicates(["window", "call"]).sort_values(["window", "start"], kind="stable")
    w, s, e = calls["window"].to_numpy(), calls["start"].to_numpy(), calls["end"].to_numpy()
    prev_end = calls.groupby("window", sort=False)["end"].cummax().to_numpy()  # calls may nest (driver in runtime)
    gap = s[1:] - prev_end[:-1]
    bridge = (w[1:] == w[:-1]) & (gap > 0) & (gap < bridge_ns)
    starts.append(prev_end[:-1][bridge])
    ends.append(s[1:][bridge])
    windows.append(w[1:][bridge])
    # the calls themselves: the host is inside the launch API
    starts.append(np.maximum(s, ws[w]))
    ends.append(e)
    windows.append(w)
    start, end, win = np.concatenate(starts), np.concatenate(ends), np.concatenate(windows)
    start, end = np.maximum(start, ws[win]), np.minimum(end, we[win])
    keep = end > start
    return Ops(win[keep].astype(np.int64), start[keep], end[keep], np.zeros(int(keep.sum()), np.int8))


def _ranks(trace: Trace, devices: np.ndarray, pids: np.ndarray) -> np.ndarray:
    """Rank of each row: by the process that drives the device, else by the step's process."""
    procs = trace.processes
    ranks = np.full(len(devices), -1, dtype=np.int64)
    if procs.empty:
        return ranks
    known = procs[procs["rank"].to_numpy() >= 0]
    by_device = known[known["device"].to_numpy() >= 0].drop_duplicates("device").set_index("device")["rank"]
    by_pid = known.drop_duplicates("pid").set_index("pid")["rank"]
    from_device = by_device.reindex(devices).to_numpy()
    from_pid = by_pid.reindex(pids).to_numpy()
    ranks = np.where(~np.isnan(from_device.astype(float)), from_device, from_pid)
    return np.nan_to_num(ranks.astype(float), nan=-1).astype(np.int64)
