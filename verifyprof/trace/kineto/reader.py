"""PyTorch profiler (Kineto) JSON, one file or one per rank -> one :class:`Trace`.

Per file (:mod:`~verifyprof.trace.kineto.decode`, :mod:`~verifyprof.trace.kineto.file_events`):
decode, split events by category, pull the needed fields column-wise;
:mod:`~verifyprof.trace.kineto.rank_files` says what each file is,
:mod:`~verifyprof.trace.kineto.tables` turns it into model rows. Then the files are merged here:

* **rank**: ``distributedInfo.rank``, else ``-TP-(\\d+)`` in the file name (SGLang's
  ``{id}-TP-{r}[-DP-..][-PP-..][-EP-..][-EXTEND|-DECODE].trace.json.gz``), else -1.
* **one clock**: a file's ``ts`` count from its ``baseTimeNanoseconds`` (epoch ns = base +
  ts*1000). Each file is shifted by ``base - min(base)``; ``meta['base_time_ns']`` is that
  minimum, so ``epoch_ns = t + base_time_ns``. One file keeps its own timestamps unchanged.
* **keys**: pid and tid become ``raw + (file_index << 32)`` (file 0 keeps the raw ids).
  Kernels, copies and GPU annotations get the pid of the host process that launched them.
* **devices**: the GPU track's ordinal (``args.device``, else the track pid). When ranks in
  different files reuse an ordinal (``CUDA_VISIBLE_DEVICES`` per rank, several nodes), later
  ranks are renumbered after the earlier ones; ``devices.ordinal`` keeps the trace's number and
  ``devices.rank`` / ``processes.device`` say which rank drives which device.

Every table is sorted by ``start``. Kernels carry ``correlation`` (a replayed CUDA graph's
kernels all carry their ``cudaGraphLaunch``'s); Kineto records no graph ids, so ``graph_id`` and
``graph_node_id`` are -1 and the ``graphs`` table is empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.contracts.errors import TraceError
from verifyprof.contracts.plumbing.paths import shown
from verifyprof.trace.events import (
    API_COLUMNS,
    COPY_COLUMNS,
    DEVICE_COLUMNS,
    KERNEL_COLUMNS,
    NO_ID,
    PROCESS_COLUMNS,
    RANGE_COLUMNS,
    StringTable,
    Trace,
    conform,
)
from verifyprof.trace.kineto.file_events import category_counts
from verifyprof.trace.kineto.rank_files import (
    RankFile,
    align_clocks,
    assign_device_offsets,
    check_one_run,
    int_or_none,
    load_file,
    trace_files,
)
from verifyprof.trace.kineto.tables import (
    api_rows,
    copy_rows,
    kernel_rows,
    merged_collective_args,
    range_depths,
    range_rows,
    table_frame,
)
from verifyprof.trace.validation import checked


def _device_properties(header: dict[str, Any]) -> tuple[dict[int, dict], dict | None]:
    """deviceProperties by id, plus the one entry to use for an unlisted ordinal, if any.

    ROCm traces number GPU tracks by agent (CPU agents first: device 9 for the only listed
    id 0), so on a node whose listed GPUs are all the same model, any ordinal takes that model.
    """
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return {}, None
    entries = [p for p in props if isinstance(p, dict)]
    by_id = {i: p for p in entries if (i := int_or_none(p.get("id"))) is not None}
    same_model = len({p.get("name") for p in entries}) == 1
    return by_id, (entries[0] if entries and same_model else None)


def _devices(files: list[RankFile]) -> pd.DataFrame:
    rows: dict[int, dict[str, Any]] = {}
    for f in files:
        by_id, fallback = _device_properties(f.header)
        for ordinal in f.ordinals().tolist():
            device = ordinal + f.device_offset
            if device in rows:
                continue
            p = by_id.get(ordinal, fallback) or {}
            major, minor = int_or_none(p.get("computeMajor")), int_or_none(p.get("computeMinor"))
            sms, memory = (
                int_or_none(p.get("numSms")),
                int_or_none(p.get("totalGlobalMem"), 1 << 63),
            )
            rows[device] = {
                "device": device,
                "name": p.get("name") if isinstance(p.get("name"), str) else "",
                "sm_count": NO_ID if sms is None else sms,
                "memory_bytes": NO_ID if memory is None else memory,
                "compute_capability": "" if major is None or minor is None else f"{major}.{minor}",
                "rank": f.rank,
                "ordinal": ordinal,
            }
    frame = pd.DataFrame(
        [rows[d] for d in sorted(rows)], columns=[*DEVICE_COLUMNS, "rank", "ordinal"]
    )
    out = conform(frame, DEVICE_COLUMNS)
    out["rank"] = frame["rank"].to_numpy(np.int32)
    out["ordinal"] = frame["ordinal"].to_numpy(np.int32)
    return out


def _processes(files: list[RankFile], kernels: pd.DataFrame, copies: pd.DataFrame) -> pd.DataFrame:
    gpu = pd.concat([kernels[["pid", "device"]], copies[["pid", "device"]]], ignore_index=True)
    devices_of = gpu.groupby("pid")["device"].agg(
        lambda d: int(d.iloc[0]) if d.nunique() == 1 else NO_ID
    )
    rows = []
    for f in files:
        pids = f.events.host_pids().tolist()
        main = f.events.main_pid()
        if not pids and main != NO_ID:
            pids = [main]
        for raw in pids:
            key = int(f.key(np.array([raw]))[0])
            rows.append(
                {
                    "pid": key,
                    "host_pid": raw,
                    "name": f.events.process_names.get(raw, ""),
                    "rank": f.rank,
                    "device": int(devices_of.get(key, NO_ID)),
                    "file": shown(f.path),
                }
            )
    frame = pd.DataFrame(rows, columns=[*PROCESS_COLUMNS, "file"])
    out = conform(frame, PROCESS_COLUMNS)
    out["file"] = frame["file"].astype(object).to_numpy()
    return out


def _file_meta(f: RankFile) -> dict[str, Any]:
    header = {
        k: v
        for k, v in f.header.items()
        if isinstance(v, (int, float, str)) and k != "deviceProperties"
    }
    return {
        "path": str(f.path),
        "rank": f.rank,
        "world_size": f.world_size,
        "base_time_ns": f.base_ns,
        "shift_ns": f.shift_ns,
        "device_offset": f.device_offset,
        "events": f.events.events,
        **header,
    }


def read_kineto(paths: list[Path] | Path | str, *, fast: bool = True) -> Trace:
    """Read PyTorch-profiler JSON(.gz) files (one per rank) into one trace on one clock.

    ``fast=False`` skips the typed decoder (tests compare both paths).
    """
    files_in, warnings = trace_files(paths)
    files = [load_file(i, p, fast) for i, p in enumerate(files_in)]
    warnings += [f"{f.path.name}: {f.events.problems()}" for f in files if f.events.problems()]
    _check_gpu_events(files, warnings)
    base = align_clocks(files, warnings)
    check_one_run(files)
    assign_device_offsets(files)

    strings = StringTable()
    offsets = np.cumsum(
        [0]
        + [
            len(f.events.collectives.kernel) if f.events.collectives is not None else 0
            for f in files
        ]
    )
    tagged = offsets[-1] > 0
    kernels = table_frame(
        [kernel_rows(f, strings, int(o) if tagged else None) for f, o in zip(files, offsets)],
        KERNEL_COLUMNS,
    )
    collective_args = merged_collective_args(files, kernels, strings) if tagged else None
    copies = table_frame([copy_rows(f, strings) for f in files], COPY_COLUMNS)
    api = table_frame([api_rows(f, strings) for f in files], API_COLUMNS)
    ranges = table_frame([part for f in files for part in range_rows(f, strings)], RANGE_COLUMNS)
    ranges["depth"] = range_depths(ranges)

    worlds = [f.world_size for f in files if f.world_size > 0]
    counts = category_counts([f.events for f in files])
    return checked(
        Trace(
            source=[f.path for f in files],
            format="kineto",
            strings=strings,
            kernels=kernels,
            copies=copies,
            api=api,
            ranges=ranges,
            devices=_devices(files),
            processes=_processes(files, kernels, copies),
            **({"collective_args": collective_args} if collective_args is not None else {}),
            meta={
                "files": len(files),
                "base_time_ns": base,
                "world_size": max(worlds) if worlds else NO_ID,
                "events": sum(f.events.events for f in files),
                "python_function_events": counts.get("python_function", 0),
                "categories": counts,
                "kineto_files": [_file_meta(f) for f in files],
                **_capture_window(files),
            },
            warnings=warnings,
        )
    )


def _capture_window(files: list[RankFile]) -> dict[str, tuple[int, int]]:
    """``capture_window_ns``: the span of the files' recording windows on the trace clock, where
    every file marks its window (the profiler's "Iteration Start" and "Record Window End")."""
    windows = [(f.events.window, f.shift_ns) for f in files]
    if not all(w for w, _ in windows):
        return {}
    lo = min(w[0] + shift for w, shift in windows if w)
    hi = max(w[1] + shift for w, shift in windows if w)
    return {"capture_window_ns": (lo, hi)}


def _check_gpu_events(files: list[RankFile], warnings: list[str]) -> None:
    """Refuses files none of which holds a GPU event; warns of each one that holds none."""
    empty = [f for f in files if f.events.gpu_rows == 0]
    if len(empty) == len(files):
        where = files[0].path if len(files) == 1 else files[0].path.parent
        what = "the trace" if len(files) == 1 else f"none of the {len(files)} trace files"
        dropped = sum(f.events.dropped for f in files)
        if dropped:
            raise TraceError(
                f"{what} holds no usable GPU events: {dropped} events have no usable ts/dur "
                "(missing, not a number, or out of range)",
                where,
            )
        raise TraceError(
            f"{what} holds no GPU events (kernel, gpu_memcpy, gpu_memset): an empty or CPU-only"
            " capture; profile with ProfilerActivity.CUDA and run GPU work inside the profiled"
            " window",
            where,
        )
    for f in empty:
        warnings.append(f"{f.path.name}: no GPU events (empty capture for rank {f.rank})")
