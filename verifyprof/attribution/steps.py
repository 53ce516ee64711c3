"""Steps: the ranges being broken down, and which GPU ops belong to each.

A step's GPU ops are all ops *launched from the step's thread while its range is open*, nested
ranges included: GPU op -(pid, correlation)-> the API call that launched it -> the step ranges
open on that call's thread at the call's start. This is NVIDIA's NVTX projection rule, and it
stays right under SGLang's overlap scheduler, where the GPU runs a step's kernels long after
its host range closed. Every kernel of a CUDA graph carries its ``cudaGraphLaunch``'s
correlation, so a graph launched inside a step brings all of its kernels.

Steps are matched one *nesting level* at a time: properly nested ranges of one level never
overlap on a thread, so each level maps every op to at most one step (an int array over ops),
and a kernel inside ``verify`` inside ``spec_step`` belongs to one step of each level.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.attribution.arrays import dense_unique
from verifyprof.attribution.cycles import with_cycle_windows
from verifyprof.attribution.taxonomy import Taxonomy, compile_regex
from verifyprof.contracts import phases
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.ranges import step_name
from verifyprof.trace.events import COPY_KIND_MEMSET, RANGE_KIND_GPU_ANNOTATION, Trace
from verifyprof.trace.nesting import nesting_depth

WHOLE_TRACE = "whole_trace"
_KEY_SHIFT = np.int64(1) << np.int64(40)  # (pid, correlation) -> one int64 key
_ATTR = re.compile(r"(\w+)=([\w.]+)")
NO_STEP = -1


@dataclass
class GpuOps:
    """Every GPU op (kernels, copies, opaque whole-graph rows) as parallel numpy arrays."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    pid: np.ndarray
    correlation: np.ndarray
    phase: np.ndarray  # int8 index into phases.ALL
    is_kernel: np.ndarray
    name_id: np.ndarray
    call: np.ndarray  # row in trace.api of the launching call, -1 if unlinked

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class Calls:
    """The launching API calls referenced by GPU ops (rows of trace.api)."""

    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    graph_launch: np.ndarray  # bool: cudaGraphLaunch / hipGraphLaunch


def op_key(pid: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    return pid.astype(np.int64) * _KEY_SHIFT + correlation.astype(np.int64)


def gpu_ops(trace: Trace, taxonomy: Taxonomy) -> GpuOps:
    kernels, copies, graphs = trace.kernels, trace.copies, trace.graphs
    parts: list[dict[str, np.ndarray]] = []
    k_names = kernels["name_id"].to_numpy()
    k_phase = (
        taxonomy.phase_of_ids(trace.strings, k_names)[k_names]
        if len(kernels)
        else np.empty(0, np.int8)
    )
    parts.append(_part(kernels, k_phase, True, k_names))
    if taxonomy.source != "builtin" and len(kernels):  # a user's rule that matches nothing
        names = [str(trace.strings[int(i)]) for i in np.unique(k_names[k_names >= 0])]
        said = set(trace.warnings)
        trace.warnings += [w for w in taxonomy.unmatched(names) if w not in said]
    if len(copies):
        copy_phase = np.where(
            copies["kind"].to_numpy() == COPY_KIND_MEMSET,
            phases.INDEX["memset"],
            phases.INDEX["memcpy"],
        )
        parts.append(_part(copies, copy_phase.astype(np.int8), False, copies["name_id"].to_numpy()))
    if len(graphs):
        # Whole-graph rows whose kernels are also recorded would be counted twice: drop them.
        known = op_key(kernels["pid"].to_numpy(), kernels["correlation"].to_numpy())
        keys = op_key(graphs["pid"].to_numpy(), graphs["correlation"].to_numpy())
        opaque = graphs[~np.isin(keys, known)]
        if len(opaque):
            parts.append(
                _part(
                    opaque,
                    np.full(len(opaque), phases.INDEX["graph"], np.int8),
                    False,
                    np.full(len(opaque), -1, np.int32),
                )
            )
    fields = {
        name: np.concatenate([p[name] for p in parts]) if len(parts) > 1 else parts[0][name]
        for name in parts[0]
    }
    if (
        taxonomy.contexts
    ):  # names whose phase their neighbours decide (MoE routing's top-k and sort)
        fields["phase"] = taxonomy.in_context(
            trace.strings, fields["name_id"], fields["phase"], fields["device"], fields["start"]
        )
    return GpuOps(**fields, call=np.full(len(fields["start"]), -1, dtype=np.int64))


def _part(
    frame: pd.DataFrame, phase: np.ndarray, is_kernel: bool, name_id: np.ndarray
) -> dict[str, np.ndarray]:
    return {
        "start": frame["start"].to_numpy(),
        "end": frame["end"].to_numpy(),
        "device": frame["device"].to_numpy(),
        "pid": frame["pid"].to_numpy(),
        "correlation": frame["correlation"].to_numpy(),
        "phase": phase.astype(np.int8, copy=False),
        "is_kernel": np.full(len(frame), is_kernel),
        "name_id": name_id.astype(np.int32, copy=False),
    }


def link_calls(trace: Trace, ops: GpuOps) -> Calls:
    """Set ``ops.call`` to the launching API row (same process, same correlation id)."""
    api = trace.api
    ops.call = _call_rows(
        api["pid"].to_numpy(), api["correlation"].to_numpy(), ops.pid, ops.correlation
    )
    graph_names = (
        trace.strings.matching(r"GraphLaunch") if len(trace.strings) else np.zeros(0, bool)
    )
    name_ids = api["name_id"].to_numpy()
    return Calls(
        start=api["start"].to_numpy(),
        end=api["end"].to_numpy(),
        tid=api["tid"].to_numpy(),
        graph_launch=graph_names[name_ids] if len(name_ids) else np.zeros(0, bool),
    )


def _call_rows(
    api_pid: np.ndarray, api_corr: np.ndarray, pid: np.ndarray, corr: np.ndarray
) -> np.ndarray:
    """Per op, the row of the API call with its (pid, correlation), -1 if none; the first row
    where a correlation repeats. Correlation ids count up per process, so each process's calls
    go into a table indexed by id (no hashing, no sort); ids too sparse for a table, or
    repeated, take the hash path."""
    out = np.full(len(pid), -1, np.int64)
    for p in np.unique(api_pid):  # a handful of processes
        rows = np.flatnonzero(api_pid == p)
        ids = api_corr[rows]
        low, high = int(ids.min()), int(ids.max())
        if high - low >= 4 * len(rows) + 1024:
            return _call_rows_hashed(api_pid, api_corr, pid, corr)
        table = np.full(high - low + 1, -1, np.int64)
        table[ids - low] = rows
        if np.count_nonzero(table[ids - low] == rows) < len(rows):  # a repeated id
            return _call_rows_hashed(api_pid, api_corr, pid, corr)
        mine = np.flatnonzero(pid == p)
        at = corr[mine] - low
        inside = (at >= 0) & (at < len(table))
        out[mine[inside]] = table[at[inside]]
    return out


def _call_rows_hashed(
    api_pid: np.ndarray, api_corr: np.ndarray, pid: np.ndarray, corr: np.ndarray
) -> np.ndarray:
    index = pd.Index(op_key(api_pid, api_corr))
    rows = np.arange(len(index))
    if not index.is_unique:  # keep the first call of a duplicated correlation
        first = ~index.duplicated(keep="first")
        index, rows = index[first], rows[first]
    found = index.get_indexer(op_key(pid, corr))
    return np.where(found >= 0, rows[np.maximum(found, 0)] if len(rows) else -1, -1).astype(
        np.int64
    )


def find_steps(trace: Trace, regex: str, cycles: bool = False) -> pd.DataFrame:
    """Host ranges whose text matches ``regex`` (re.search): one row per step; with ``cycles``,
    plus the derived cycle windows (:mod:`verifyprof.attribution.cycles`)."""
    where = trace.source[0] if trace.source else None
    try:
        compile_regex(regex, f"--range '{regex:.80}' is not a valid regular expression", where)
    except VerifyprofError as err:
        raise NoStepsError(err.problem, where) from None
    ranges = trace.ranges
    host = ranges[ranges["kind"].to_numpy() != RANGE_KIND_GPU_ANNOTATION]
    matching = trace.strings.matching(regex) if len(trace.strings) else np.zeros(0, bool)
    selected = host[matching[host["name_id"].to_numpy()]] if len(host) else host
    if selected.empty:
        raise NoStepsError(
            _no_steps_message(trace, host, regex), trace.source[0] if trace.source else None
        )
    texts = trace.strings.lookup(selected["name_id"].to_numpy())
    unique_texts = pd.unique(texts)
    names = {t: step_name(t) for t in unique_texts}  # once per distinct text
    attrs = {t: dict(_ATTR.findall(t)) for t in unique_texts}
    steps = pd.DataFrame(
        {
            "name": np.array([names[t] for t in texts], dtype=object),
            "text": np.asarray(texts, dtype=object),
            "pid": selected["pid"].to_numpy(),
            "tid": selected["tid"].to_numpy(),
            "start": selected["start"].to_numpy(),
            "end": selected["end"].to_numpy(),
        }
    )
    steps["attrs"] = [attrs[t] for t in texts]
    steps = steps.sort_values(["tid", "start"], kind="stable").reset_index(drop=True)
    # pandas 3 would make arrow strings: slow to gather
    steps[["name", "text"]] = steps[["name", "text"]].astype(object)
    # steps of one level never overlap on a thread (ranges nest), so each level maps a launch to
    # at most one step
    steps["level"] = nesting_depth(
        steps["tid"].to_numpy(), steps["start"].to_numpy(), steps["end"].to_numpy()
    )
    if cycles:
        steps = with_cycle_windows(steps)
    steps.insert(0, "step", np.arange(len(steps), dtype=np.int64))
    return steps


def whole_trace_steps(
    ops: GpuOps, launch: Launches
) -> tuple[pd.DataFrame, list[tuple[np.ndarray, np.ndarray]]]:
    """One step per device spanning all of that device's GPU work."""
    devices, op_step = np.unique(ops.device, return_inverse=True)
    first = np.full(len(devices), np.iinfo(np.int64).max)
    last = np.full(len(devices), np.iinfo(np.int64).min)
    np.minimum.at(first, op_step, ops.start)
    np.maximum.at(last, op_step, ops.end)
    steps = pd.DataFrame(
        {
            "step": np.arange(len(devices), dtype=np.int64),
            "name": WHOLE_TRACE,
            "text": WHOLE_TRACE,
            "pid": -1,
            "tid": -1,
            "start": first,
            "end": last,
            "level": 0,
        }
    )
    steps["attrs"] = [{} for _ in range(len(steps))]
    launch_step = np.searchsorted(devices, launch.device).astype(np.int64)
    return steps, [(op_step.astype(np.int64), launch_step)]


@dataclass
class Launches:
    """One row per API call that launched GPU work: what the launch-gap accounting needs."""

    call: np.ndarray  # row in trace.api, ascending (so in start order: api is sorted by start)
    device: np.ndarray  # the device of the call's first op
    start: np.ndarray
    end: np.ndarray
    last_op_start: np.ndarray  # latest start among the ops it launched
    graph_launch: np.ndarray
    first_op_start: (
        np.ndarray
    )  # earliest start among the ops it launched (a graph replay's first node)
    last_op_end: np.ndarray  # latest end among them (a graph replay's last node)


def launches(ops: GpuOps, calls: Calls) -> tuple[Launches, np.ndarray]:
    """The launching calls, and for every op its row in them (-1 when unlinked)."""
    linked = np.flatnonzero(ops.call >= 0)
    call = ops.call[linked]
    used, inverse = dense_unique(call, len(calls.start))
    shared = (
        np.bincount(inverse, minlength=len(used))[inverse] > 1
    )  # ops whose call launched others too
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    first = _reduce_by(
        np.minimum, np.arange(len(linked)), inverse, shared, len(used), high
    )  # each call's first op
    last_op_start = _reduce_by(np.maximum, ops.start[linked], inverse, shared, len(used), low)
    first_op_start = _reduce_by(np.minimum, ops.start[linked], inverse, shared, len(used), high)
    last_op_end = _reduce_by(np.maximum, ops.end[linked], inverse, shared, len(used), low)
    op_launch = np.full(len(ops), -1, dtype=np.int64)
    op_launch[linked] = inverse
    table = Launches(
        call=used,
        device=ops.device[linked[first]],
        start=calls.start[used],
        end=calls.end[used],
        last_op_start=last_op_start,
        graph_launch=calls.graph_launch[used] if len(used) else np.zeros(0, bool),
        first_op_start=first_op_start,
        last_op_end=last_op_end,
    )
    return table, op_launch


def _reduce_by(
    ufunc: np.ufunc, values: np.ndarray, group: np.ndarray, shared: np.ndarray, n: int, initial: int
) -> np.ndarray:
    """``ufunc`` of ``values`` per ``group`` (n groups): groups of one value (an eager launch's
    one op) by plain assignment, only the values ``shared`` with others (a graph's nodes) by
    ``ufunc.at``.
    """
    out = np.full(n, initial, dtype=values.dtype)
    out[group[~shared]] = values[~shared]
    ufunc.at(out, group[shared], values[shared])
    return out


def assign_levels(
    steps: pd.DataFrame, launch: Launches, op_launch: np.ndarray, calls: Calls
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per nesting level: the step of every op and of every launch (NO_STEP outside the level's
    steps)."""
    linked = op_launch >= 0
    call_tid = calls.tid[launch.call]
    levels = []
    for level in np.unique(steps["level"].to_numpy()):
        level_steps = steps[steps["level"].to_numpy() == level]
        launch_step = _match_calls(level_steps, call_tid, launch.start)
        op_step = np.full(
            len(op_launch), NO_STEP, dtype=np.int64 if len(steps) >= 2**31 else np.int32
        )
        op_step[linked] = launch_step[op_launch[linked]]
        levels.append((op_step, launch_step))
    return levels


def _match_calls(
    level_steps: pd.DataFrame, call_tid: np.ndarray, call_start: np.ndarray
) -> np.ndarray:
    """The step of one level open on each call's thread at the call's start (vectorised)."""
    out = np.full(len(call_tid), NO_STEP, dtype=np.int64)
    tids = level_steps["tid"].to_numpy()
    # Threads are few (one per TP rank): loop over them, search events of each with numpy.
    for tid in np.unique(tids):
        on_thread = tids == tid
        starts = level_steps["start"].to_numpy()[on_thread]
        ends = level_steps["end"].to_numpy()[on_thread]
        ids = level_steps["step"].to_numpy()[on_thread]
        order = np.argsort(starts, kind="stable")
        starts, ends, ids = starts[order], ends[order], ids[order]
        mine = np.flatnonzero(call_tid == tid)
        pos = np.searchsorted(starts, call_start[mine], side="right") - 1
        ok = pos >= 0
        ok[ok] &= call_start[mine[ok]] < ends[pos[ok]]
        out[mine[ok]] = ids[pos[ok]]
    return out


def _no_steps_message(trace: Trace, host: pd.DataFrame, regex: str) -> str:
    """No range matched: what the trace has, as a ready ``--range`` (of its top-level ranges,
    short enough to type) or ``--whole-trace``."""
    from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX

    asked = (
        "no range is a step: none is verifyprof's, SGLang's or a usual spelling of a speculative"
        " phase (data/ranges.toml)"
        if regex == DEFAULT_STEP_REGEX
        else f"no range matches --range '{regex[:60]}{'...' if len(regex) > 60 else ''}'"
    )
    if host.empty:
        return f"{asked}: the trace has no NVTX ranges or annotations; use --whole-trace"
    top = host[host["depth"].to_numpy() == 0] if "depth" in host.columns else host
    ids, n_ids = np.unique((top if len(top) else host)["name_id"].to_numpy(), return_counts=True)
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for sid, n in zip(ids, n_ids):  # once per distinct range text
        text = trace.strings[int(sid)]
        name = step_name(text)
        counts[name] += int(n)
        example.setdefault(name, text.split(" ")[0])
    names, patterns = [], []
    for name, n in counts.most_common(8):
        pattern = re.sub(r"\\d\+|\d+", r"\\d+", re.escape(example[name]))
        if len(" ".join(["--range", f"'^({'|'.join(patterns + [pattern])})'"])) > 72:
            break
        names.append(f"{name!r} ({n})")
        patterns.append(pattern)
    ready = f"--range '^({'|'.join(patterns)})'" if patterns else "--range REGEX"
    return (
        f"{asked}; the trace's top-level ranges: {', '.join(names)}: break them down with"
        f" {ready}, or the whole trace with --whole-trace"
    )
