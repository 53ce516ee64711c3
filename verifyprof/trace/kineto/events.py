"""One decoded Kineto file -> numpy columns per event table, in the file's own ids and clock.

Events are split by ``cat`` once (a factorisation over the category strings), then each needed
category is gathered and its fields pulled out column-wise (``map`` over the rows, no per-event
Python code). ``python_function``, ``cpu_op``, flows and the rest are never touched beyond
their category. Times become int64 ns once: ``start = round(ts * 1000)``, ``end = start +
round(dur * 1000)``, so durations are exact to the file's ns resolution.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.collectives import dtype_bytes
from verifyprof.trace.events import (
    API_KIND_DRIVER,
    API_KIND_RUNTIME,
    COPY_KIND_MEMCPY,
    COPY_KIND_MEMSET,
    NO_ID,
)
from verifyprof.trace.kineto.decode import EventFields, KinetoFile, decode_raw

# ``cat`` (lower-cased; very old Kineto capitalised them) -> the role it plays here.
ROLES: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "cpu_op": "op",
}

# Kernels that perform a collective without NCCL's args (symmetric-memory, custom one/two-shot,
# fused allreduces): their size is the tensor of the op that launched them.
COLLECTIVE_KERNEL = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|multimem|cross_device_reduce|one_?shot|two_?shot|lamport",
    re.IGNORECASE,
)


@dataclass
class Names:
    """Per-row codes into ``uniques`` (-1: no name); interned into the trace's table later."""

    codes: np.ndarray
    uniques: list[str]

    @classmethod
    def of(cls, values: list) -> Names:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        return cls(codes.astype(np.int32, copy=False), [u if isinstance(u, str) else str(u) for u in uniques])

    def take(self, keep: np.ndarray) -> Names:
        return Names(self.codes[keep], self.uniques)


@dataclass
class Table:
    """Columns of one event table (all the same length) and the rows' names."""

    columns: dict[str, np.ndarray]
    names: Names

    def __len__(self) -> int:
        return len(self.names.codes)


@dataclass
class FileEvents:
    """What one file contributes, before it is merged into a :class:`Trace`."""

    kernels: Table
    copies: Table  # memcpy then memset rows; column ``kind``
    api: Table  # runtime then driver rows; column ``kind``
    annotations: Table  # CPU user_annotation
    gpu_annotations: Table
    collectives: CollectiveArgs | None = None  # message sizes of collective kernels
    process_names: dict[int, str] = field(default_factory=dict)
    process_labels: dict[int, str] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)  # event count per cat, for meta
    events: int = 0

    @property
    def gpu_rows(self) -> int:
        return len(self.kernels) + len(self.copies) + len(self.gpu_annotations)

    def host_pids(self) -> np.ndarray:
        """OS pids of the host processes: those that made runtime calls or annotations."""
        pids = np.concatenate([self.api.columns["pid"], self.annotations.columns["pid"]])
        return np.unique(pids[pids != NO_ID])

    def main_pid(self) -> int:
        """The process that drives this file's GPU work: most runtime calls, else annotations."""
        for table in (self.api, self.annotations):
            pids = table.columns["pid"]
            pids = pids[pids != NO_ID]
            if len(pids):
                values, counts = np.unique(pids, return_counts=True)
                return int(values[np.argmax(counts)])
        cpu = [pid for pid, label in self.process_labels.items() if label.strip().upper() == "CPU"]
        return cpu[0] if len(cpu) == 1 else NO_ID


def numbers(values: list) -> np.ndarray:
    """float64 column; NaN where a value is absent or not a number."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        # Only malformed files get here (a list or text where a number belongs).
        return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values])


def ids(values: list) -> np.ndarray:
    """int64 id column, exact for integers; -1 where absent or not a number."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        as_float = numbers(values)
        out = np.full(len(values), NO_ID, dtype=np.int64)
        ok = np.isfinite(as_float)
        out[ok] = as_float[ok].astype(np.int64)
        return out


def _time_columns(rows: EventFields, events: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """start, end (int64 ns, file clock) and the mask of events that have a timestamp."""
    ts = numbers(rows.column(events, "ts"))
    dur = numbers(rows.column(events, "dur"))
    ok = np.isfinite(ts)
    if not ok.all():
        ts = np.where(ok, ts, 0.0)
    start = np.rint(ts * 1000.0).astype(np.int64)
    length = np.rint(np.nan_to_num(dur, nan=0.0) * 1000.0)
    end = start + np.maximum(length, 0.0).astype(np.int64)
    return start, end, ok


def _masked(table: Table, keep: np.ndarray) -> Table:
    if keep.all():
        return table
    return Table({c: v[keep] for c, v in table.columns.items()}, table.names.take(keep))


def _gpu_ops(rows: EventFields, events: list, with_bytes: bool, mask: bool = False):
    """Kernels, copies: on a GPU track, whose pid is the device and tid the stream.

    ``mask=True`` also returns which events became rows (those with a timestamp)."""
    start, end, ok = _time_columns(rows, events)
    args = rows.args(events)
    device = ids(rows.column(args, "device"))
    stream = ids(rows.column(args, "stream"))
    if (device == NO_ID).any():
        device = np.where(device == NO_ID, ids(rows.column(events, "pid")), device)
    if (stream == NO_ID).any():
        stream = np.where(stream == NO_ID, ids(rows.column(events, "tid")), stream)
    columns = {
        "start": start,
        "end": end,
        "device": device,
        "stream": stream,
        "correlation": ids(rows.column(args, "correlation")),
    }
    if with_bytes:
        columns["bytes"] = ids(rows.column(args, "bytes"))
    table = _masked(Table(columns, Names.of(rows.column(events, "name"))), ok)
    return (table, ok) if mask else table


def _host_spans(rows: EventFields, events: list, arg: str) -> Table:
    """Runtime/driver calls and CPU annotations: a host pid/tid and one id from ``args``."""
    start, end, ok = _time_columns(rows, events)
    columns = {
        "start": start,
        "end": end,
        "pid": ids(rows.column(events, "pid")),
        "tid": ids(rows.column(events, "tid")),
        arg: ids(rows.column(rows.args(events), arg)),
    }
    return _masked(Table(columns, Names.of(rows.column(events, "name"))), ok)


def _gpu_spans(rows: EventFields, events: list) -> Table:
    start, end, ok = _time_columns(rows, events)
    args = rows.args(events)
    device = ids(rows.column(args, "device"))
    if (device == NO_ID).any():
        device = np.where(device == NO_ID, ids(rows.column(events, "pid")), device)
    columns = {
        "start": start,
        "end": end,
        "device": device,
        "stream": ids(rows.column(events, "tid")),
        "external_id": ids(rows.column(args, "external_id")),
    }
    return _masked(Table(columns, Names.of(rows.column(events, "name"))), ok)


@dataclass
class CollectiveArgs:
    """Message sizes of some of a file's kernels (``kernel``: row in the file's kernel table)."""

    kernel: np.ndarray
    nbytes: np.ndarray
    out_bytes: np.ndarray
    group_size: np.ndarray
    names: list[str]  # the collective as the trace names it ("allreduce", "_allgather_base", an op name)


def _file_collective_args(rows: EventFields, events: list, kernels: Table, ok: np.ndarray, groups: _Groups) -> CollectiveArgs | None:
    """NCCL kernels carry their message in ``args`` (``In msg nelems``, ``dtype``, ...); other
    collective kernels take the first tensor of the ``cpu_op`` that launched them (same External id)."""
    if not events:
        return None
    args = rows.args(events)
    in_nelems = numbers(rows.column(args, "in_nelems"))
    row_of = np.cumsum(ok) - 1  # event index -> row in the kernel table (events without ts dropped)
    nccl = np.flatnonzero(np.isfinite(in_nelems) & ok)
    kernel = [row_of[nccl]]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, list]] = []
    if len(nccl):
        sub = [args[i] for i in nccl.tolist()]  # the collective kernels only
        size = _per_value(rows.column(sub, "dtype"), dtype_bytes).astype(np.int64)
        out_nelems = numbers(rows.column(sub, "out_nelems"))
        nbytes = np.where(size > 0, in_nelems[nccl] * size, NO_ID)
        out_bytes = np.where((size > 0) & np.isfinite(out_nelems), np.nan_to_num(out_nelems) * size, NO_ID)
        group = ids(rows.column(sub, "group_size"))
        names = _per_value(rows.column(sub, "collective_name"), lambda n: n if isinstance(n, str) else "").tolist()
        parts.append((nbytes.astype(np.int64), out_bytes.astype(np.int64), group, names))
    by_op = _op_launched(rows, args, kernels, ok, in_nelems, groups)
    if by_op is not None:
        kernel.append(by_op[0])
        parts.append(by_op[1:])
    if not parts:
        return None
    return CollectiveArgs(
        kernel=np.concatenate(kernel).astype(np.int64),
        nbytes=np.concatenate([p[0] for p in parts]),
        out_bytes=np.concatenate([p[1] for p in parts]),
        group_size=np.concatenate([p[2] for p in parts]).astype(np.int32),
        names=[n for p in parts for n in p[3]],
    )


def _per_value(values: list, fn) -> np.ndarray:
    """``fn`` of each value, computed once per distinct value (unhashable ones give fn(None))."""
    series = pd.Series([v if isinstance(v, (str, int, float)) or v is None else None for v in values], dtype=object)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    mapped = np.asarray([fn(u) for u in uniques] + [fn(None)], dtype=object)
    return mapped[np.where(codes >= 0, codes, len(uniques))]


def _op_launched(rows: EventFields, args: list, kernels: Table, ok: np.ndarray, in_nelems: np.ndarray, groups: _Groups):
    """(kernel rows, bytes, out bytes, group size, names) for collective kernels without NCCL args."""
    uniques = kernels.names.uniques
    collective_names = np.array([bool(COLLECTIVE_KERNEL.search(u)) for u in uniques] + [False])  # once per name
    codes = kernels.names.codes
    wanted_rows = np.flatnonzero(collective_names[np.where(codes >= 0, codes, len(uniques))])
    if not len(wanted_rows):
        return None
    event_index = np.flatnonzero(ok)[wanted_rows]
    keep = ~np.isfinite(in_nelems[event_index])
    event_index, wanted_rows = event_index[keep], wanted_rows[keep]
    ops = groups.role("op") if len(event_index) else []
    if not ops:
        return None
    external = ids(rows.column([args[i] for i in event_index.tolist()], "external_id"))
    op_args = rows.args(ops)
    op_external = ids(rows.column(op_args, "external_id"))
    launched = np.flatnonzero(np.isin(op_external, external[external != NO_ID]))
    if not len(launched):
        return None
    chosen = [op_args[i] for i in launched.tolist()]  # the few ops that launched a collective kernel
    sizes = [_first_tensor_bytes(d, t) for d, t in zip(rows.column(chosen, "input_dims"), rows.column(chosen, "input_type"))]
    op_names = rows.column([ops[i] for i in launched.tolist()], "name")
    by_external = pd.DataFrame({"bytes": [NO_ID if b is None else b for b in sizes], "name": op_names}, index=op_external[launched])
    by_external = by_external[~by_external.index.duplicated(keep="first") & (by_external["bytes"].to_numpy() > 0)]
    found = by_external.reindex(external)
    hit = ~found["bytes"].isna().to_numpy()
    if not hit.any():
        return None
    nbytes = found["bytes"].to_numpy()[hit].astype(np.int64)
    names = [n if isinstance(n, str) else "" for n in found["name"].to_numpy()[hit]]
    return wanted_rows[hit], nbytes, nbytes.copy(), np.full(len(nbytes), NO_ID, dtype=np.int32), names  # allreduce: out = in


def _first_tensor_bytes(dims_value, types_value) -> int | None:
    """Bytes of an op's first tensor input (``Input Dims`` / ``Input type``): dims product x dtype size."""
    dims, types = decode_raw(dims_value), decode_raw(types_value)
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    for shape, dtype in zip(dims, types):
        if isinstance(shape, list) and shape and all(isinstance(d, int) and d >= 0 for d in shape):
            size = dtype_bytes(dtype)
            return math.prod(shape) * size if size > 0 else None
    return None


def _concat(tables: list[Table], kinds: list[int]) -> Table:
    """Stack tables of one shape, tagging each part's rows with its ``kind``."""
    uniques: list[str] = []
    codes = []
    for table in tables:  # re-base each part's name codes onto one uniques list
        offset = len(uniques)
        uniques += table.names.uniques
        codes.append(np.where(table.names.codes >= 0, table.names.codes + offset, -1).astype(np.int32))
    columns = {c: np.concatenate([t.columns[c] for t in tables]) for c in tables[0].columns}
    columns["kind"] = np.concatenate([np.full(len(t), k, dtype=np.int8) for t, k in zip(tables, kinds)])
    return Table(columns, Names(np.concatenate(codes), uniques))


class _Groups:
    """The file's events split by category, gathered lazily per role."""

    def __init__(self, decoded: KinetoFile):
        self.rows = decoded.rows
        self.events = decoded.events
        cats = self.rows.column(self.events, "cat")
        self.codes, uniques = pd.factorize(np.asarray(cats, dtype=object))
        self.uniques = list(uniques)
        counts = np.bincount(self.codes[self.codes >= 0], minlength=len(self.uniques))
        self.categories = {str(u): int(n) for u, n in zip(self.uniques, counts)}

    def _take(self, mask: np.ndarray) -> list:
        return list(map(self.events.__getitem__, np.flatnonzero(mask).tolist()))

    def role(self, role: str) -> list:
        """Complete (``ph: X``) events whose category plays ``role``."""
        wanted = [j for j, u in enumerate(self.uniques) if isinstance(u, str) and ROLES.get(u.lower()) == role]
        if not wanted:
            return []
        mask = self.codes == wanted[0] if len(wanted) == 1 else np.isin(self.codes, wanted)
        events = self._take(mask)
        phases = self.rows.column(events, "ph")
        if phases.count("X") != len(phases):
            keep = np.asarray(phases, dtype=object) == "X"
            events = list(map(events.__getitem__, np.flatnonzero(keep).tolist()))
        return events

    def metadata(self) -> list:
        """``ph: M`` events (they carry no ``cat``)."""
        events = self._take(self.codes < 0)
        phases = self.rows.column(events, "ph")
        return [e for e, ph in zip(events, phases) if ph == "M"]  # a few dozen rows


def _metadata(rows: EventFields, events: list) -> tuple[dict[int, str], dict[int, str]]:
    names: dict[int, str] = {}
    labels: dict[int, str] = {}
    if not events:
        return names, labels
    kinds = rows.column(events, "name")
    pids = rows.column(events, "pid")
    args = rows.args(events)
    values = rows.column(args, "name")
    label_values = rows.column(args, "labels")
    for kind, pid, value, label in zip(kinds, pids, values, label_values):
        if not isinstance(pid, int):
            continue
        if kind == "process_name" and isinstance(value, str):
            names.setdefault(pid, value)
        elif kind == "process_labels" and isinstance(label, str):
            labels.setdefault(pid, label)
    return names, labels


def extract(decoded: KinetoFile) -> FileEvents:
    """The tables one file contributes. Raises TraceError for events that are not objects."""
    try:
        return _extract(decoded)
    except (AttributeError, TypeError) as exc:
        raise TraceError(f"malformed trace events: {exc}", decoded.path) from None


def _extract(decoded: KinetoFile) -> FileEvents:
    rows = decoded.rows
    groups = _Groups(decoded)
    kernel_events = groups.role("kernel")
    kernels, kernel_ok = _gpu_ops(rows, kernel_events, with_bytes=False, mask=True)
    collectives = _file_collective_args(rows, kernel_events, kernels, kernel_ok, groups)
    memcpy = _gpu_ops(rows, groups.role("memcpy"), with_bytes=True)
    memset = _gpu_ops(rows, groups.role("memset"), with_bytes=True)
    runtime = _host_spans(rows, groups.role("runtime"), "correlation")
    driver = _host_spans(rows, groups.role("driver"), "correlation")
    annotations = _host_spans(rows, groups.role("annotation"), "external_id")
    gpu_annotations = _gpu_spans(rows, groups.role("gpu_annotation"))
    process_names, process_labels = _metadata(rows, groups.metadata())
    return FileEvents(
        kernels=kernels,
        collectives=collectives,
        copies=_concat([memcpy, memset], [COPY_KIND_MEMCPY, COPY_KIND_MEMSET]),
        api=_concat([runtime, driver], [API_KIND_RUNTIME, API_KIND_DRIVER]),
        annotations=annotations,
        gpu_annotations=gpu_annotations,
        process_names=process_names,
        process_labels=process_labels,
        categories=groups.categories,
        events=len(decoded.events),
    )


def category_counts(files: list[FileEvents]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for f in files:
        total.update(f.categories)
    return dict(total)
