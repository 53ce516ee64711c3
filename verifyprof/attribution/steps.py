"""Steps: the ranges being broken down, and which GPU ops belong to each.

A step's GPU ops are all ops *launched from the step's thread while its range is open*, nested
ranges included: GPU op -(pid, correlation)-> the API call that launched it -> the step ranges
open on that call's thread at the call's start. This is NVIDIA's NVTX projection rule, and it
stays right under SGLang's overlap scheduler, where the GPU runs a step's kernels long after
its host range closed. Every kernel of a CUDA graph carries its ``cudaGraphLaunch``'s
correlation, so a graph launched inside a step brings all of its kernels.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from verifyprof.attribution import phases
from verifyprof.attribution.taxonomy import Taxonomy
from verifyprof.errors import NoStepsError
from verifyprof.ranges import split_text
from verifyprof.trace.model import (
    COPY_KIND_MEMSET,
    RANGE_KIND_GPU_ANNOTATION,
    Trace,
)

WHOLE_TRACE = "whole_trace"
_KEY_SHIFT = np.int64(1) << np.int64(40)  # (pid, correlation) -> one int64 key
_DIGITS = re.compile(r"\d+")
_ATTR = re.compile(r"(\w+)=([\w.]+)")


def op_key(pid: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    return pid.astype(np.int64) * _KEY_SHIFT + correlation.astype(np.int64)


def gpu_ops(trace: Trace, taxonomy: Taxonomy) -> pd.DataFrame:
    """Every GPU op (kernels, copies, opaque whole-graph rows) with its phase index."""
    kernels = trace.kernels
    kernel_phase = taxonomy.phase_of_ids(trace.strings, kernels["name_id"].to_numpy())
    parts = [
        pd.DataFrame(
            {
                "start": kernels["start"].to_numpy(),
                "end": kernels["end"].to_numpy(),
                "device": kernels["device"].to_numpy(),
                "pid": kernels["pid"].to_numpy(),
                "correlation": kernels["correlation"].to_numpy(),
                "phase": kernel_phase[kernels["name_id"].to_numpy()] if len(kernels) else np.empty(0, np.int8),
                "is_kernel": np.ones(len(kernels), dtype=bool),
                "name_id": kernels["name_id"].to_numpy(),
            }
        )
    ]
    copies = trace.copies
    if len(copies):
        copy_phase = np.where(copies["kind"].to_numpy() == COPY_KIND_MEMSET, phases.INDEX["memset"], phases.INDEX["memcpy"])
        parts.append(
            pd.DataFrame(
                {
                    "start": copies["start"].to_numpy(),
                    "end": copies["end"].to_numpy(),
                    "device": copies["device"].to_numpy(),
                    "pid": copies["pid"].to_numpy(),
                    "correlation": copies["correlation"].to_numpy(),
                    "phase": copy_phase.astype(np.int8),
                    "is_kernel": np.zeros(len(copies), dtype=bool),
                    "name_id": copies["name_id"].to_numpy(),
                }
            )
        )
    graphs = trace.graphs
    if len(graphs):
        # Whole-graph rows whose kernels are also recorded would be counted twice: drop them.
        known = op_key(kernels["pid"].to_numpy(), kernels["correlation"].to_numpy())
        keys = op_key(graphs["pid"].to_numpy(), graphs["correlation"].to_numpy())
        opaque = graphs[~np.isin(keys, known)]
        if len(opaque):
            parts.append(
                pd.DataFrame(
                    {
                        "start": opaque["start"].to_numpy(),
                        "end": opaque["end"].to_numpy(),
                        "device": opaque["device"].to_numpy(),
                        "pid": opaque["pid"].to_numpy(),
                        "correlation": opaque["correlation"].to_numpy(),
                        "phase": np.full(len(opaque), phases.INDEX["graph"], dtype=np.int8),
                        "is_kernel": np.zeros(len(opaque), dtype=bool),
                        "name_id": np.full(len(opaque), -1, dtype=np.int32),
                    }
                )
            )
    ops = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    ops["phase"] = ops["phase"].astype(np.int8)
    return ops


def link_calls(trace: Trace, ops: pd.DataFrame) -> pd.DataFrame:
    """Add the launching API call of each op: ``call`` (row in trace.api, -1 if unlinked),
    ``tid``, ``call_start``, ``call_end``, ``graph_launch`` (launched by cudaGraphLaunch)."""
    api = trace.api
    api_keys = op_key(api["pid"].to_numpy(), api["correlation"].to_numpy())
    index = pd.Index(api_keys)
    if not index.is_unique:
        index = pd.Index(pd.Series(api_keys).drop_duplicates(keep="first"))
        rows = pd.Series(np.arange(len(api_keys))).loc[~pd.Series(api_keys).duplicated(keep="first")].to_numpy()
    else:
        rows = np.arange(len(api_keys))
    found = index.get_indexer(op_key(ops["pid"].to_numpy(), ops["correlation"].to_numpy()))
    call = np.where(found >= 0, rows[np.maximum(found, 0)] if len(rows) else -1, -1)
    linked = call >= 0
    safe = np.maximum(call, 0)
    out = ops.copy()
    out["call"] = call
    if len(api):
        out["tid"] = np.where(linked, api["tid"].to_numpy()[safe], -1)
        out["call_start"] = np.where(linked, api["start"].to_numpy()[safe], -1)
        out["call_end"] = np.where(linked, api["end"].to_numpy()[safe], -1)
        graph_ids = trace.strings.matching(r"GraphLaunch")
        out["graph_launch"] = linked & graph_ids[api["name_id"].to_numpy()[safe]] if len(graph_ids) else False
    else:
        out["tid"] = -1
        out["call_start"] = -1
        out["call_end"] = -1
        out["graph_launch"] = False
    return out


def step_name(text: str) -> str:
    """The group a step belongs to: verifyprof's base name, or the text with numbers as N."""
    if text.startswith("verifyprof."):
        return split_text(text)[0]
    return _DIGITS.sub("N", text)


def find_steps(trace: Trace, regex: str) -> pd.DataFrame:
    """Host ranges whose text matches ``regex`` (re.search): one row per step."""
    try:
        re.compile(regex)
    except re.error as exc:
        raise NoStepsError(f"--range {regex!r} is not a valid regular expression: {exc}") from None
    ranges = trace.ranges
    host = ranges[ranges["kind"].to_numpy() != RANGE_KIND_GPU_ANNOTATION]
    matching = trace.strings.matching(regex) if len(trace.strings) else np.zeros(0, bool)
    selected = host[matching[host["name_id"].to_numpy()]] if len(host) else host
    if selected.empty:
        raise NoStepsError(_no_steps_message(trace, host, regex), trace.source[0] if trace.source else None)
    texts = trace.strings.lookup(selected["name_id"].to_numpy())
    unique_texts = pd.unique(texts)
    names = {t: step_name(t) for t in unique_texts}  # once per distinct text
    attrs = {t: dict(_ATTR.findall(t)) for t in unique_texts}
    steps = pd.DataFrame(
        {
            "name": [names[t] for t in texts],
            "text": texts,
            "pid": selected["pid"].to_numpy(),
            "tid": selected["tid"].to_numpy(),
            "start": selected["start"].to_numpy(),
            "end": selected["end"].to_numpy(),
        }
    )
    steps["attrs"] = [attrs[t] for t in texts]
    steps = steps.sort_values(["tid", "start"], kind="stable").reset_index(drop=True)
    steps["level"] = _nesting_levels(steps)
    steps.insert(0, "step", np.arange(len(steps), dtype=np.int64))
    return steps


def whole_trace_steps(trace: Trace, ops: pd.DataFrame) -> pd.DataFrame:
    """One step per device spanning all of that device's GPU work."""
    spans = ops.groupby("device", sort=True).agg(start=("start", "min"), end=("end", "max")).reset_index()
    steps = pd.DataFrame(
        {
            "step": np.arange(len(spans), dtype=np.int64),
            "name": WHOLE_TRACE,
            "text": WHOLE_TRACE,
            "pid": -1,
            "tid": -1,
            "start": spans["start"].to_numpy(),
            "end": spans["end"].to_numpy(),
            "device": spans["device"].to_numpy(),
            "level": 0,
        }
    )
    steps["attrs"] = [{} for _ in range(len(steps))]
    return steps


def assign_ops(steps: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """(op row, step) pairs: a launch belongs to every step range open on its thread at its start."""
    linked = ops[ops["call"].to_numpy() >= 0]
    calls = (
        linked[["call", "tid", "call_start"]]
        .drop_duplicates("call")
        .sort_values("call_start", kind="stable")
        .reset_index(drop=True)
    )
    pairs = []
    for level in np.unique(steps["level"].to_numpy()):
        level_steps = steps[steps["level"].to_numpy() == level][["step", "tid", "start", "end"]].sort_values("start")
        matched = pd.merge_asof(
            calls,
            level_steps,
            left_on="call_start",
            right_on="start",
            by="tid",
            direction="backward",
        )
        inside = matched["step"].notna().to_numpy() & (matched["call_start"].to_numpy() < matched["end"].fillna(-1).to_numpy())
        pairs.append(pd.DataFrame({"call": matched["call"].to_numpy()[inside], "step": matched["step"].to_numpy()[inside].astype(np.int64)}))
    call_steps = pd.concat(pairs, ignore_index=True) if pairs else pd.DataFrame({"call": [], "step": []})
    op_rows = pd.DataFrame({"op": np.flatnonzero(ops["call"].to_numpy() >= 0), "call": linked["call"].to_numpy()})
    return op_rows.merge(call_steps, on="call", how="inner")[["op", "step"]]


def _nesting_levels(steps: pd.DataFrame) -> np.ndarray:
    """Nesting level of each step among the selected steps of its thread (0 = outermost).

    Steps of one level on one thread never overlap when ranges nest properly (push/pop), so
    each level can be matched to launches with one ``merge_asof``. Loops over threads, not rows.
    """
    levels = np.zeros(len(steps), dtype=np.int16)
    for _, idx in steps.groupby("tid", sort=False).indices.items():
        starts = steps["start"].to_numpy()[idx]
        ends = steps["end"].to_numpy()[idx]
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        opened = np.arange(len(s))  # ranges started before this one (sorted by start)
        closed = np.searchsorted(np.sort(e), s, side="right")  # ranges ended at or before it starts
        depth = np.maximum(opened - closed, 0)
        levels[idx[order]] = depth
    return levels


def _no_steps_message(trace: Trace, host: pd.DataFrame, regex: str) -> str:
    if host.empty:
        return f"no range matches --range {regex!r}: the trace has no NVTX ranges or annotations (use --whole-trace)"
    ids, n_ids = np.unique(host["name_id"].to_numpy(), return_counts=True)
    counts: Counter[str] = Counter()
    for sid, n in zip(ids, n_ids):  # once per distinct range text
        counts[step_name(trace.strings[int(sid)])] += int(n)
    common = ", ".join(f"{name!r} ({n})" for name, n in counts.most_common(8))
    return f"no range matches --range {regex!r}; most frequent range names: {common}"
