"""One rank file's events -> rows of the model tables, on the trace's clock, keys and devices.

Kernels, copies and GPU annotations get the pid of the host process that launched them. Kernels
carry ``correlation`` (a replayed CUDA graph's kernels all carry their ``cudaGraphLaunch``'s);
Kineto records no graph ids, so ``graph_id`` and ``graph_node_id`` are -1. API names lose their
ABI suffix (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from verifyprof.trace.collectives import collective_args_table
from verifyprof.trace.events import (
    MISSING_TIME,
    NO_ID,
    RANGE_KIND_ANNOTATION,
    RANGE_KIND_GPU_ANNOTATION,
    StringTable,
    conform,
)
from verifyprof.trace.kineto.fields import Table
from verifyprof.trace.kineto.rank_files import RankFile
from verifyprof.trace.nesting import nesting_depth

# cudaLaunchKernel_v7000, cuMemcpyDtoH_v2, cudaMemcpyAsync_ptsz, hipGetDevicePropertiesR0600
ABI_SUFFIX = re.compile(r"(?:_v\d+|_ptsz|_ptds|_spt)+$|(?<=[a-z])R\d{4}$")


def strip_abi_suffix(name: str) -> str:
    return ABI_SUFFIX.sub("", name)


def _names(strings: StringTable, table: Table, transform=None) -> np.ndarray:
    uniques = table.names.uniques
    if transform is not None:
        uniques = [transform(u) for u in uniques]  # once per distinct name
    mapping = strings.intern(uniques) if uniques else np.empty(0, dtype=np.int32)
    codes = table.names.codes
    out = np.full(len(codes), NO_ID, dtype=np.int32)
    ok = codes >= 0
    out[ok] = mapping[codes[ok]]
    return out


def _launching_pid(f: RankFile, correlation: np.ndarray) -> np.ndarray:
    """Raw pid of the host process that launched each GPU op."""
    main = f.events.main_pid()
    if len(f.events.host_pids()) <= 1:
        return np.full(len(correlation), main, dtype=np.int64)
    api = f.events.api.columns  # several host processes in one file: join on correlation
    calls = pd.Series(api["pid"], index=api["correlation"])
    calls = calls[~calls.index.duplicated()]
    pid = calls.reindex(correlation).to_numpy()
    return np.where(np.isnan(pid), main, pid).astype(np.int64)


def shifted(times: np.ndarray, shift: int) -> np.ndarray:
    """Times moved onto the trace clock; a missing time (``MISSING_TIME``) stays missing."""
    if not shift:
        return times
    return np.where(times == MISSING_TIME, MISSING_TIME, times + shift)


def _gpu_frame(f: RankFile, table: Table, strings: StringTable) -> dict[str, np.ndarray]:
    c = table.columns
    device = np.where(c["device"] == NO_ID, NO_ID, c["device"] + f.device_offset)
    return {
        "start": c["start"] + f.shift_ns,
        "end": shifted(c["end"], f.shift_ns),
        "device": device.astype(np.int32),
        "stream": c["stream"],
        "name_id": _names(strings, table),
        "pid": f.key(_launching_pid(f, c.get("correlation", np.full(len(table), NO_ID)))),
    }


def kernel_rows(
    f: RankFile, strings: StringTable, args_offset: int | None = None
) -> dict[str, np.ndarray]:
    """``args_offset``: tag the kernels that carry collective args with their row among all
    files' args (column ``args``), so that the args follow the kernels through the merge's sort."""
    table = f.events.kernels
    frame = _gpu_frame(f, table, strings)
    none = np.full(len(table), NO_ID, dtype=np.int64)
    out = {
        **frame,
        "correlation": table.columns["correlation"],
        "graph_id": none,
        "graph_node_id": none,
    }
    if args_offset is not None:
        tag = np.full(len(table), NO_ID, dtype=np.int64)
        args = f.events.collectives
        if args is not None:
            tag[args.kernel] = args_offset + np.arange(len(args.kernel))
        out["args"] = tag
    return out


def merged_collective_args(
    files: list[RankFile], kernels: pd.DataFrame, strings: StringTable
) -> pd.DataFrame:
    """The ``collective_args`` table, its ``kernel`` column pointing at the merged, sorted rows."""
    parts = [f.events.collectives for f in files if f.events.collectives is not None]
    tag = kernels.pop("args").to_numpy()
    rows = np.flatnonzero(tag >= 0)
    order = tag[rows]  # row in the concatenated args
    cat = lambda field: np.concatenate([getattr(p, field) for p in parts])[order]
    names = np.asarray([n for p in parts for n in p.names], dtype=object)[order]
    return collective_args_table(
        rows, cat("nbytes"), cat("out_bytes"), cat("group_size"), names, strings
    )


def copy_rows(f: RankFile, strings: StringTable) -> dict[str, np.ndarray]:
    table = f.events.copies
    frame = _gpu_frame(f, table, strings)
    return {
        **frame,
        "kind": table.columns["kind"],
        "bytes": table.columns["bytes"],
        "correlation": table.columns["correlation"],
        "graph_node_id": np.full(len(table), NO_ID, dtype=np.int64),
    }


def api_rows(f: RankFile, strings: StringTable) -> dict[str, np.ndarray]:
    table = f.events.api
    c = table.columns
    return {
        "start": c["start"] + f.shift_ns,
        "end": shifted(c["end"], f.shift_ns),
        "pid": f.key(c["pid"]),
        "tid": f.key(c["tid"]),
        "correlation": c["correlation"],
        "name_id": _names(strings, table, strip_abi_suffix),
        "kind": c["kind"],
    }


def range_rows(f: RankFile, strings: StringTable) -> list[dict[str, np.ndarray]]:
    host = f.events.annotations
    gpu = f.events.gpu_annotations
    h, g = host.columns, gpu.columns
    gpu_frame = _gpu_frame(f, gpu, strings)
    return [
        {
            "start": h["start"] + f.shift_ns,
            "end": shifted(h["end"], f.shift_ns),
            "pid": f.key(h["pid"]),
            "tid": f.key(h["tid"]),
            "name_id": _names(strings, host),
            "domain_id": np.full(len(host), NO_ID, dtype=np.int32),
            "kind": np.full(len(host), RANGE_KIND_ANNOTATION, dtype=np.int8),
            "device": np.full(len(host), NO_ID, dtype=np.int32),
            "payload": np.full(len(host), np.nan),
            "depth": np.zeros(len(host), dtype=np.int16),
            "stream": np.full(len(host), NO_ID, dtype=np.int64),
            "external_id": h["external_id"],
        },
        {
            **{k: gpu_frame[k] for k in ("start", "end", "pid", "name_id", "device", "stream")},
            "tid": np.full(len(gpu), NO_ID, dtype=np.int64),
            "domain_id": np.full(len(gpu), NO_ID, dtype=np.int32),
            "kind": np.full(len(gpu), RANGE_KIND_GPU_ANNOTATION, dtype=np.int8),
            "payload": np.full(len(gpu), np.nan),
            "depth": np.zeros(len(gpu), dtype=np.int16),
            "external_id": g["external_id"],
        },
    ]


def _group_ids(*columns: np.ndarray) -> np.ndarray:
    """One id per distinct combination of the columns' values."""
    if len(columns[0]) == 0:
        return np.empty(0, dtype=np.int64)
    inverse = np.unique(np.column_stack(columns), axis=0, return_inverse=True)[1]
    return inverse.reshape(-1).astype(np.int64)


def range_depths(ranges: pd.DataFrame) -> np.ndarray:
    """CPU annotations nest per thread; GPU annotations per (process, device, stream)."""
    col = {
        c: ranges[c].to_numpy() for c in ("kind", "start", "end", "pid", "tid", "device", "stream")
    }
    depth = np.zeros(len(ranges), dtype=np.int16)
    host = col["kind"] == RANGE_KIND_ANNOTATION
    depth[host] = nesting_depth(col["tid"][host], col["start"][host], col["end"][host])
    gpu = ~host
    streams = _group_ids(col["pid"][gpu], col["device"][gpu], col["stream"][gpu])
    depth[gpu] = nesting_depth(streams, col["start"][gpu], col["end"][gpu])
    return depth


def table_frame(parts: list[dict[str, np.ndarray]], columns: dict[str, str]) -> pd.DataFrame:
    if not parts:
        return conform(
            pd.DataFrame({c: np.empty(0, dtype=dt) for c, dt in columns.items()}), columns
        )
    merged = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    order = np.argsort(merged["start"], kind="stable")
    if not (order[1:] > order[:-1]).all():
        merged = {c: v[order] for c, v in merged.items()}
    frame = pd.DataFrame(merged)
    out = conform(frame, columns)
    for extra in merged.keys() - columns.keys():
        out[extra] = frame[extra].to_numpy()
    return out
