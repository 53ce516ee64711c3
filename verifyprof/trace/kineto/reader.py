"""PyTorch profiler (Kineto) JSON, one file or one per rank -> one :class:`Trace`.

Per file (:mod:`kineto_decode`, :mod:`kineto_events`): decode, split events by category, pull
the needed fields column-wise. Then the files are merged here:

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

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.collectives import collective_args_table
from verifyprof.trace.events import (
    API_COLUMNS,
    COPY_COLUMNS,
    DEVICE_COLUMNS,
    KERNEL_COLUMNS,
    NO_ID,
    PROCESS_COLUMNS,
    RANGE_COLUMNS,
    RANGE_KIND_ANNOTATION,
    RANGE_KIND_GPU_ANNOTATION,
    StringTable,
    Trace,
    conform,
)
from verifyprof.trace.kineto.decode import decode_file
from verifyprof.trace.kineto.events import FileEvents, Table, category_counts, extract
from verifyprof.trace.nesting import nesting_depth

RANK_IN_NAME = re.compile(r"-TP-(\d+)")
# cudaLaunchKernel_v7000, cuMemcpyDtoH_v2, cudaMemcpyAsync_ptsz, hipGetDevicePropertiesR0600
ABI_SUFFIX = re.compile(r"(?:_v\d+|_ptsz|_ptds|_spt)+$|(?<=[a-z])R\d{4}$")
FILE_KEY_SHIFT = 32


def strip_abi_suffix(name: str) -> str:
    return ABI_SUFFIX.sub("", name)


@dataclass
class _RankFile:
    """One file's events plus what the merge derives for it."""

    index: int
    path: Path
    events: FileEvents
    header: dict[str, Any]
    rank: int
    world_size: int
    base_ns: int | None
    shift_ns: int = 0
    device_offset: int = 0

    @property
    def key_offset(self) -> int:
        return self.index << FILE_KEY_SHIFT

    def key(self, raw: np.ndarray) -> np.ndarray:
        """Raw pid/tid -> trace-wide key (missing stays -1)."""
        if self.index == 0:
            return raw
        return np.where(raw == NO_ID, NO_ID, raw + self.key_offset)

    def ordinals(self) -> np.ndarray:
        e = self.events
        devices = np.concatenate(
            [e.kernels.columns["device"], e.copies.columns["device"], e.gpu_annotations.columns["device"]]
        )
        return np.unique(devices[devices != NO_ID])


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _rank_of(path: Path, header: dict[str, Any]) -> tuple[int, int]:
    """(rank, world_size), -1 where unknown."""
    info = header.get("distributedInfo")
    rank = world = None
    if isinstance(info, dict):
        rank = _int_or_none(info.get("rank"))
        world = _int_or_none(info.get("world_size"))
    if rank is None:
        match = RANK_IN_NAME.search(path.name)
        rank = int(match.group(1)) if match else None
    return (NO_ID if rank is None else rank), (NO_ID if world is None else world)


def _trace_files(paths: list[Path] | Path | str) -> tuple[list[Path], list[str]]:
    """Files to read: directories expanded, SGLang's merged file dropped beside its rank files."""
    from verifyprof.trace.sources import expand

    if isinstance(paths, (str, Path)):
        paths = [Path(paths)]
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        for file in expand(path) if path.is_dir() else [path]:
            if file not in files:
                files.append(file)
    if not files:
        raise TraceError("no PyTorch-profiler trace files given")
    warnings = []
    merged = [f for f in files if f.name.startswith("merged-")]
    if merged and len(merged) < len(files):
        files = [f for f in files if f not in merged]
        warnings.append(
            f"skipped {', '.join(f.name for f in merged)}: SGLang's merge of the per-rank files also given"
        )
    return files, warnings


def _load(index: int, path: Path, fast: bool) -> _RankFile:
    decoded = decode_file(path, fast=fast)
    events = extract(decoded)
    rank, world = _rank_of(path, decoded.header)
    base = _int_or_none(decoded.header.get("baseTimeNanoseconds"))
    return _RankFile(index, path, events, decoded.header, rank, world, base)


def _align_clocks(files: list[_RankFile], warnings: list[str]) -> int:
    """Shift each file onto the earliest file's clock; returns that file's base (epoch ns)."""
    bases = [f.base_ns for f in files if f.base_ns is not None]
    reference = min(bases) if bases else 0
    for f in files:
        f.shift_ns = 0 if f.base_ns is None else f.base_ns - reference
    if len(files) > 1 and len(bases) < len(files):
        missing = ", ".join(f.path.name for f in files if f.base_ns is None)
        warnings.append(f"no baseTimeNanoseconds in {missing}: assumed on the same clock as the other ranks")
    return reference


def _assign_device_offsets(files: list[_RankFile]) -> None:
    """Renumber devices of later ranks that reuse an ordinal an earlier rank already drives."""
    owner_of_device: dict[int, object] = {}
    offset_of_owner: dict[object, int] = {}
    for f in sorted(files, key=lambda f: (f.rank < 0, f.rank, f.index)):
        owner: object = f.rank if f.rank >= 0 else ("file", f.index)
        ordinals = f.ordinals()
        if owner in offset_of_owner:
            offset = offset_of_owner[owner]
        elif any(owner_of_device.get(int(d), owner) != owner for d in ordinals):
            offset = max(owner_of_device) + 1 - int(ordinals.min())
        else:
            offset = 0
        offset_of_owner[owner] = offset
        f.device_offset = offset
        for d in ordinals:
            owner_of_device[int(d) + offset] = owner


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


def _launching_pid(f: _RankFile, correlation: np.ndarray) -> np.ndarray:
    """Raw pid of the host process that launched each GPU op."""
    main = f.events.main_pid()
    if len(f.events.host_pids()) <= 1:
        return np.full(len(correlation), main, dtype=np.int64)
    api = f.events.api.columns  # several host processes in one file: join on correlation
    calls = pd.Series(api["pid"], index=api["correlation"])
    calls = calls[~calls.index.duplicated()]
    pid = calls.reindex(correlation).to_numpy()
    return np.where(np.isnan(pid), main, pid).astype(np.int64)


def _gpu_frame(f: _RankFile, table: Table, strings: StringTable) -> dict[str, np.ndarray]:
    c = table.columns
    device = np.where(c["device"] == NO_ID, NO_ID, c["device"] + f.device_offset)
    return {
        "start": c["start"] + f.shift_ns,
        "end": c["end"] + f.shift_ns,
        "device": device.astype(np.int32),
        "stream": c["stream"],
        "name_id": _names(strings, table),
        "pid": f.key(_launching_pid(f, c.get("correlation", np.full(len(table), NO_ID)))),
    }


def _kernels(f: _RankFile, strings: StringTable, args_offset: int | None = None) -> dict[str, np.ndarray]:
    """``args_offset``: tag the kernels that carry collective args with their row among all
    files' args (column ``args``), so that the args follow the kernels through the merge's sort."""
    table = f.events.kernels
    frame = _gpu_frame(f, table, strings)
    none = np.full(len(table), NO_ID, dtype=np.int64)
    out = {**frame, "correlation": table.columns["correlation"], "graph_id": none, "graph_node_id": none}
    if args_offset is not None:
        tag = np.full(len(table), NO_ID, dtype=np.int64)
        args = f.events.collectives
        if args is not None:
            tag[args.kernel] = args_offset + np.arange(len(args.kernel))
        out["args"] = tag
    return out


def _merged_collective_args(files: list[_RankFile], kernels: pd.DataFrame, strings: StringTable) -> pd.DataFrame:
    """The ``collective_args`` table, its ``kernel`` column pointing at the merged, sorted rows."""
    parts = [f.events.collectives for f in files if f.events.collectives is not None]
    tag = kernels.pop("args").to_numpy()
    rows = np.flatnonzero(tag >= 0)
    order = tag[rows]  # row in the concatenated args
    cat = lambda field: np.concatenate([getattr(p, field) for p in parts])[order]
    names = np.asarray([n for p in parts for n in p.names], dtype=object)[order]
    return collective_args_table(rows, cat("nbytes"), cat("out_bytes"), cat("group_size"), names, strings)


def _copies(f: _RankFile, strings: StringTable) -> dict[str, np.ndarray]:
    table = f.events.copies
    frame = _gpu_frame(f, table, strings)
    return {
        **frame,
        "kind": table.columns["kind"],
        "bytes": table.columns["bytes"],
        "correlation": table.columns["correlation"],
        "graph_node_id": np.full(len(table), NO_ID, dtype=np.int64),
    }


def _api(f: _RankFile, strings: StringTable) -> dict[str, np.ndarray]:
    table = f.events.api
    c = table.columns
    return {
        "start": c["start"] + f.shift_ns,
        "end": c["end"] + f.shift_ns,
        "pid": f.key(c["pid"]),
        "tid": f.key(c["tid"]),
        "correlation": c["correlation"],
        "name_id": _names(strings, table, strip_abi_suffix),
        "kind": c["kind"],
    }


def _ranges(f: _RankFile, strings: StringTable) -> list[dict[str, np.ndarray]]:
    host = f.events.annotations
    gpu = f.events.gpu_annotations
    h, g = host.columns, gpu.columns
    gpu_frame = _gpu_frame(f, gpu, strings)
    return [
        {
            "start": h["start"] + f.shift_ns,
            "end": h["end"] + f.shift_ns,
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


def _range_depths(ranges: pd.DataFrame) -> np.ndarray:
    """CPU annotations nest per thread; GPU annotations per (process, device, stream)."""
    col = {c: ranges[c].to_numpy() for c in ("kind", "start", "end", "pid", "tid", "device", "stream")}
    depth = np.zeros(len(ranges), dtype=np.int16)
    host = col["kind"] == RANGE_KIND_ANNOTATION
    depth[host] = nesting_depth(col["tid"][host], col["start"][host], col["end"][host])
    gpu = ~host
    streams = _group_ids(col["pid"][gpu], col["device"][gpu], col["stream"][gpu])
    depth[gpu] = nesting_depth(streams, col["start"][gpu], col["end"][gpu])
    return depth


def _frame(parts: list[dict[str, np.ndarray]], columns: dict[str, str]) -> pd.DataFrame:
    if not parts:
        return conform(pd.DataFrame({c: np.empty(0, dtype=dt) for c, dt in columns.items()}), columns)
    merged = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    order = np.argsort(merged["start"], kind="stable")
    if not (order[1:] > order[:-1]).all():
        merged = {c: v[order] for c, v in merged.items()}
    frame = pd.DataFrame(merged)
    out = conform(frame, columns)
    for extra in merged.keys() - columns.keys():
        out[extra] = frame[extra].to_numpy()
    return out


def _device_properties(header: dict[str, Any]) -> tuple[dict[int, dict], dict | None]:
    """deviceProperties by id, plus the one entry to use for an unlisted ordinal, if any.

    ROCm traces number GPU tracks by agent (CPU agents first: device 9 for the only listed
    id 0), so on a node whose listed GPUs are all the same model, any ordinal takes that model.
    """
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return {}, None
    entries = [p for p in props if isinstance(p, dict)]
    by_id = {i: p for p in entries if (i := _int_or_none(p.get("id"))) is not None}
    same_model = len({p.get("name") for p in entries}) == 1
    return by_id, (entries[0] if entries and same_model else None)


def _devices(files: list[_RankFile]) -> pd.DataFrame:
    rows: dict[int, dict[str, Any]] = {}
    for f in files:
        by_id, fallback = _device_properties(f.header)
        for ordinal in f.ordinals().tolist():
            device = ordinal + f.device_offset
            if device in rows:
                continue
            p = by_id.get(ordinal, fallback) or {}
            major, minor = _int_or_none(p.get("computeMajor")), _int_or_none(p.get("computeMinor"))
            sms, memory = _int_or_none(p.get("numSms")), _int_or_none(p.get("totalGlobalMem"))
            rows[device] = {
                "device": device,
                "name": p.get("name") if isinstance(p.get("name"), str) else "",
                "sm_count": NO_ID if sms is None else sms,
                "memory_bytes": NO_ID if memory is None else memory,
                "compute_capability": "" if major is None or minor is None else f"{major}.{minor}",
                "rank": f.rank,
                "ordinal": ordinal,
            }
    frame = pd.DataFrame([rows[d] for d in sorted(rows)], columns=[*DEVICE_COLUMNS, "rank", "ordinal"])
    out = conform(frame, DEVICE_COLUMNS)
    out["rank"] = frame["rank"].to_numpy(np.int32)
    out["ordinal"] = frame["ordinal"].to_numpy(np.int32)
    return out


def _processes(files: list[_RankFile], kernels: pd.DataFrame, copies: pd.DataFrame) -> pd.DataFrame:
    gpu = pd.concat([kernels[["pid", "device"]], copies[["pid", "device"]]], ignore_index=True)
    devices_of = gpu.groupby("pid")["device"].agg(lambda d: int(d.iloc[0]) if d.nunique() == 1 else NO_ID)
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
                    "file": str(f.path),
                }
            )
    frame = pd.DataFrame(rows, columns=[*PROCESS_COLUMNS, "file"])
    out = conform(frame, PROCESS_COLUMNS)
    out["file"] = frame["file"].astype(object).to_numpy()
    return out


def _file_meta(f: _RankFile) -> dict[str, Any]:
    header = {k: v for k, v in f.header.items() if isinstance(v, (int, float, str)) and k != "deviceProperties"}
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
    files_in, warnings = _trace_files(paths)
    files = [_load(i, p, fast) for i, p in enumerate(files_in)]
    empty = [f for f in files if f.events.gpu_rows == 0]
    if len(empty) == len(files):
        where = files[0].path if len(files) == 1 else files[0].path.parent
        what = "the trace" if len(files) == 1 else f"none of the {len(files)} trace files"
        raise TraceError(
            f"{what} holds no GPU events (kernel, gpu_memcpy, gpu_memset): an empty or CPU-only capture; "
            "profile with ProfilerActivity.CUDA and run GPU work inside the profiled window",
            where,
        )
    for f in empty:
        warnings.append(f"{f.path.name}: no GPU events (empty capture for rank {f.rank})")
    base = _align_clocks(files, warnings)
    _assign_device_offsets(files)

    strings = StringTable()
    offsets = np.cumsum([0] + [len(f.events.collectives.kernel) if f.events.collectives is not None else 0 for f in files])
    tagged = offsets[-1] > 0
    kernels = _frame([_kernels(f, strings, int(o) if tagged else None) for f, o in zip(files, offsets)], KERNEL_COLUMNS)
    collective_args = _merged_collective_args(files, kernels, strings) if tagged else None
    copies = _frame([_copies(f, strings) for f in files], COPY_COLUMNS)
    api = _frame([_api(f, strings) for f in files], API_COLUMNS)
    ranges = _frame([part for f in files for part in _ranges(f, strings)], RANGE_COLUMNS)
    ranges["depth"] = _range_depths(ranges)

    unlinked = int((kernels["correlation"].to_numpy() == NO_ID).sum())
    if unlinked:
        warnings.append(f"{unlinked} kernels carry no correlation id: they cannot be tied to a launch")
    worlds = [f.world_size for f in files if f.world_size > 0]
    counts = category_counts([f.events for f in files])
    return Trace(
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
        },
        warnings=warnings,
    )
