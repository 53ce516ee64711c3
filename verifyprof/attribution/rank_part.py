"""The map side of a multi-file breakdown: one trace file -> a compact :class:`RankPart`.

A part holds what the reduce (:mod:`verifyprof.attribution.reduce`) needs to rebuild the
breakdown of all files read as one trace, and nothing of the event tables: the file's steps
frame, the (thread, start) of each step (the order steps are numbered by), the collective
kernels with the step each belongs to on every nesting level (for cross-rank matching), and the
file's devices, processes, counts and warnings. A 1M-kernel file's part is a few MB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.attribution.arrays import distinct
from verifyprof.attribution.breakdown import breakdown
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.contracts.schema import COMM_COLUMNS
from verifyprof.trace.events import NO_ID, Trace

KERNEL_FIELDS = ("op", "device", "family", "start", "end", "bytes")


@dataclass
class RankPart:
    """One file's share of a multi-file breakdown (picklable: it crosses process boundaries)."""

    path: str
    index: int  # position in the file list: the merge's pid/tid key offset and tie-breaker
    format: str
    rows: pd.DataFrame  # the file's steps frame, without comm_* columns (matched in the reduce)
    step_keys: pd.DataFrame  # per local step: tid, start (whole trace: device)
    collectives: pd.DataFrame | None  # per collective kernel: KERNEL_FIELDS, group, step_<level>
    devices: pd.DataFrame
    processes: pd.DataFrame
    driver_pids: np.ndarray  # processes that launched GPU work (nsys rank inference)
    ordinals: np.ndarray  # device ids its GPU ops ran on
    rank: int
    world_size: int
    base_ns: int | None  # epoch ns of its clock's zero, None when the file does not say
    meta: dict[str, Any]
    counts: dict[str, int]
    warnings: list[str]
    options: dict[str, Any]
    linked_ops: int
    unlinked_ops: int
    stage: str = ""  # SGLang's -EXTEND / -DECODE: collectives are matched within one stage
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def one_rank_per_file(self) -> bool:
        """A Kineto file: one rank's trace, its process ids its own and its clock's zero at
        ``baseTimeNanoseconds``; an nsys export may hold several ranks' processes (told apart
        by the processes that drive each GPU) and starts at its session's start time."""
        return self.format == "kineto"


def rank_part(
    trace: Trace,
    index: int = 0,
    step_regex: str | None = None,  # None: the default ranges
    taxonomy: Taxonomy | None = None,
    whole_trace: bool = False,
    stage: str = "",
) -> RankPart:
    """Break ``trace`` (one file) down and keep what the reduce needs; releases its event tables."""
    taxonomy = taxonomy or load_taxonomy()
    ordinals, drivers = _gpu_users(trace)
    result = breakdown(  # calls are matched across all parts in the reduce, not here
        trace,
        step_regex=step_regex,
        taxonomy=taxonomy,
        whole_trace=whole_trace,
        release=True,
        match_collectives=False,
    )
    steps = result.step_table
    collectives = _collective_kernel_steps(trace, result.collective_ops)
    rows = result.steps.drop(columns=[c for c in COMM_COLUMNS if c in result.steps.columns])
    if whole_trace:
        per_device = rows.drop_duplicates("device").set_index("device")["step"]
        step_keys = pd.DataFrame({"device": per_device.sort_values().index.to_numpy(np.int64)})
        if collectives is not None:
            collectives["step_0"] = (
                per_device.reindex(collectives["device"].to_numpy())
                .fillna(NO_ID)
                .to_numpy(np.int64)
            )
    else:
        step_keys = pd.DataFrame(
            {"tid": steps["tid"].to_numpy(np.int64), "start": steps["start"].to_numpy(np.int64)}
        )
    info = trace.describe()
    files = trace.meta.get("kineto_files") or [{}]
    base = (
        files[0].get("base_time_ns")
        if trace.format == "kineto"
        else trace.meta.get("capture_start_utc_ns")
    )
    return RankPart(
        path=str(trace.source[0]) if trace.source else "",
        index=index,
        format=trace.format,
        rows=rows,
        step_keys=step_keys,
        collectives=collectives,
        devices=trace.devices.copy(),
        processes=trace.processes.copy(),
        driver_pids=drivers,
        ordinals=ordinals,
        rank=int(files[0].get("rank", NO_ID)),
        world_size=int(trace.meta.get("world_size", NO_ID) or NO_ID),
        base_ns=None if base is None else int(base),
        meta={
            k: v
            for k, v in trace.meta.items()
            if isinstance(v, (str, int, float, bool)) or v is None
        },
        counts={k: info[k] for k in ("kernels", "copies", "ranges")},
        warnings=list(trace.warnings),
        options=result.options,
        linked_ops=result.linked_ops,
        unlinked_ops=result.unlinked_ops,
        stage=stage,
        extra={
            "gpu_uuids": dict(trace.meta.get("gpu_uuids") or {}),
            # records only: the rows already marked the steps they touch
            "integrity": [p.without_rows() for p in result.integrity or []],
            "rows_read": dict(trace.meta.get("rows_read") or {}),
        },
    )


def _gpu_users(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Device ids GPU work ran on, and the processes that launched it."""
    tables = (trace.kernels, trace.copies, trace.graphs)
    devices = distinct(np.concatenate([t["device"].to_numpy() for t in tables]))
    pids = distinct(np.concatenate([t["pid"].to_numpy() for t in tables]))
    return devices[devices >= 0].astype(np.int64), pids[pids >= 0].astype(np.int64)


def _collective_kernel_steps(trace: Trace, kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    """The breakdown's collective kernels (op == kernel row) with the step of each nesting level
    they belong to, and the communicator size their args give (-1 unknown: the reduce knows the
    set).
    """
    if kernels is None:
        return None
    frame = kernels[[*KERNEL_FIELDS, *(c for c in kernels.columns if c.startswith("step_"))]].copy()
    frame.insert(len(KERNEL_FIELDS), "group", _arg_group_sizes(trace, kernels["op"].to_numpy()))
    return frame.reset_index(drop=True)


def _arg_group_sizes(trace: Trace, index: np.ndarray) -> np.ndarray:
    """The communicator size recorded with each collective kernel (-1 where the trace has none):
    the reduce falls back to the size of the whole set of ranks, which one file cannot know."""
    group = np.full(len(index), NO_ID, dtype=np.int64)
    args = trace.collective_args
    if args.empty:
        return group
    rows = args["kernel"].to_numpy()
    at = np.searchsorted(rows, index)
    hit = (at < len(rows)) & (rows[np.minimum(at, len(rows) - 1)] == index)
    group[hit] = args["group_size"].to_numpy()[at[hit]]
    return group
