"""One decoded Kineto file -> numpy columns per event table, in the file's own ids and clock.

Events are split by ``cat`` once (:class:`~verifyprof.trace.kineto.fields.EventGroups`), then
each needed category is gathered and its fields pulled out column-wise (``map`` over the rows,
no per-event Python code). ``python_function``, ``cpu_op``, flows and the rest are never touched
beyond their category; collective message sizes come from
:mod:`~verifyprof.trace.kineto.message_sizes`. Times become int64 ns once: ``start = round(ts *
1000)``, ``end = start + round(dur * 1000)``, so durations are exact to the file's ns resolution.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import (
    API_KIND_DRIVER,
    API_KIND_RUNTIME,
    COPY_KIND_MEMCPY,
    COPY_KIND_MEMSET,
    MISSING_TIME,
    NO_ID,
    TIME_LIMIT_NS,
)
from verifyprof.trace.kineto.decode import EventFields, KinetoFile
from verifyprof.trace.kineto.fields import (
    EventGroups,
    Names,
    Table,
    id_field,
    number_field,
)
from verifyprof.trace.kineto.message_sizes import CollectiveArgs, file_collective_args


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
    dropped: int = 0  # events without a usable ts/dur
    bad_values: dict[str, int] = field(
        default_factory=dict
    )  # field -> values that were not numbers
    window: tuple[int, int] | None = None  # the profiler's recording window (file clock, ns)

    def problems(self) -> str:
        """What the file held that the reader could not use, for a warning ("" when nothing)."""
        parts = []
        if self.dropped:
            parts.append(f"{self.dropped} events without a usable ts/dur dropped")
        if self.bad_values:
            fields = ", ".join(f"{k} ({n})" for k, n in sorted(self.bad_values.items()))
            parts.append(f"values that are not numbers read as missing: {fields}")
        return "; ".join(parts)

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


LIMIT_US = TIME_LIMIT_NS / 1000.0


def _time_columns(rows: EventFields, events: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """start, end (int64 ns, file clock) and the mask of events that have a timestamp."""
    ts = number_field(rows, events, "ts")
    dur = number_field(rows, events, "dur")
    # a ts or dur beyond TIME_LIMIT_NS would overflow int64 ns: such an event has no usable time
    ok = (np.abs(ts) < LIMIT_US) & ~(np.abs(dur) >= LIMIT_US)
    if not ok.all():
        rows.dropped += int((~ok).sum())
        ts = np.where(ok, ts, 0.0)
        dur = np.where(ok, dur, 0.0)
    start = np.rint(ts * 1000.0).astype(np.int64)
    length = np.rint(np.nan_to_num(dur, nan=0.0) * 1000.0).astype(np.int64)
    # a negative dur makes end < start and a missing one no end: trace.validation drops and
    # counts both (clamping would pass them on as zero-length events)
    end = np.where(np.isnan(dur), MISSING_TIME, start + length)
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
    device = id_field(rows, args, "device", "args.device")
    stream = id_field(rows, args, "stream", "args.stream")
    if (device == NO_ID).any():
        device = np.where(device == NO_ID, id_field(rows, events, "pid"), device)
    if (stream == NO_ID).any():
        stream = np.where(stream == NO_ID, id_field(rows, events, "tid"), stream)
    columns = {
        "start": start,
        "end": end,
        "device": device,
        "stream": stream,
        "correlation": id_field(rows, args, "correlation", "args.correlation"),
    }
    if with_bytes:
        columns["bytes"] = id_field(rows, args, "bytes", "args.bytes")
    table = _masked(Table(columns, Names.of(rows.column(events, "name"))), ok)
    return (table, ok) if mask else table


def _host_spans(rows: EventFields, events: list, arg: str) -> Table:
    """Runtime/driver calls and CPU annotations: a host pid/tid and one id from ``args``."""
    start, end, ok = _time_columns(rows, events)
    columns = {
        "start": start,
        "end": end,
        "pid": id_field(rows, events, "pid"),
        "tid": id_field(rows, events, "tid"),
        arg: id_field(rows, rows.args(events), arg, f"args.{arg}"),
    }
    return _masked(Table(columns, Names.of(rows.column(events, "name"))), ok)


def _gpu_spans(rows: EventFields, events: list) -> Table:
    start, end, ok = _time_columns(rows, events)
    args = rows.args(events)
    device = id_field(rows, args, "device", "args.device")
    if (device == NO_ID).any():
        device = np.where(device == NO_ID, id_field(rows, events, "pid"), device)
    columns = {
        "start": start,
        "end": end,
        "device": device,
        "stream": id_field(rows, events, "tid"),
        "external_id": id_field(rows, args, "external_id", "args.external_id"),
    }
    return _masked(Table(columns, Names.of(rows.column(events, "name"))), ok)


def _concat(tables: list[Table], kinds: list[int]) -> Table:
    """Stack tables of one shape, tagging each part's rows with its ``kind``."""
    uniques: list[str] = []
    codes = []
    for table in tables:  # re-base each part's name codes onto one uniques list
        offset = len(uniques)
        uniques += table.names.uniques
        codes.append(
            np.where(table.names.codes >= 0, table.names.codes + offset, -1).astype(np.int32)
        )
    columns = {c: np.concatenate([t.columns[c] for t in tables]) for c in tables[0].columns}
    columns["kind"] = np.concatenate(
        [np.full(len(t), k, dtype=np.int8) for t, k in zip(tables, kinds)]
    )
    return Table(columns, Names(np.concatenate(codes), uniques))


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


WINDOW_START = "Iteration Start: PyTorch Profiler"
WINDOW_END = "Record Window End"


def _recording_window(rows: EventFields, events: list) -> tuple[int, int] | None:
    """The profiler's recording window from its two instant marks, None without both."""
    names = np.asarray(rows.column(events, "name"), dtype=object)
    ts = number_field(rows, events, "ts") if events else np.empty(0)
    ok = np.isfinite(ts) & (np.abs(ts) < LIMIT_US)
    first, last = ok & (names == WINDOW_START), ok & (names == WINDOW_END)
    if not (first.any() and last.any()):
        return None
    lo, hi = int(np.rint(ts[first].min() * 1000.0)), int(np.rint(ts[last].max() * 1000.0))
    return (lo, hi) if lo <= hi else None


def extract(decoded: KinetoFile) -> FileEvents:
    """The tables one file contributes. Raises TraceError for events that are not objects."""
    try:
        return _extract(decoded)
    except (AttributeError, TypeError) as exc:
        raise TraceError(f"malformed trace events: {exc}", decoded.path) from None


def _extract(decoded: KinetoFile) -> FileEvents:
    rows = decoded.rows
    groups = EventGroups(decoded)
    kernel_events = groups.role("kernel")
    kernels, kernel_ok = _gpu_ops(rows, kernel_events, with_bytes=False, mask=True)
    collectives = file_collective_args(rows, kernel_events, kernels, kernel_ok, groups)
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
        dropped=rows.dropped,
        bad_values=dict(rows.bad_values),
        window=_recording_window(rows, groups.metadata("i")),
    )


def category_counts(files: list[FileEvents]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for f in files:
        total.update(f.categories)
    return dict(total)
