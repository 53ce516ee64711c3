"""Nsight Systems SQLite export -> :class:`Trace`.

Exports from nsys 2022.2 (schema 2.9) to current (3.2x) differ in table and column sets, so
columns are selected by name (``PRAGMA table_info``) and absent (lazy) tables read as empty.
The file is opened read-only (``mode=ro``) and never written: no indexes, no temp tables in it.

Speed: an export has no indexes, and a real capture has millions of kernel and runtime rows.
Rows are read column-wise (:mod:`verifyprof.trace.sqlite_columns`: ADBC into numpy, no Python
tuples), large tables in rowid slices on parallel connections, and joined in numpy. Only what the model needs is fetched: runtime/driver rows whose name is a launch, copy,
memset or synchronize call (filtered in SQL by ``nameId``), then kept if a GPU op references
their correlation id or they synchronize.

Decisions the event model leaves to the reader:

* ``pid`` = ``host_pid`` = OS pid, ``(globalPid >> 24) & 0xFFFFFF`` (runtime calls and NVTX
  ranges: the same bits of ``globalTid``); ``tid`` = the full ``globalTid``.
* Event tables (kernels, copies, graphs, api, ranges) are sorted by ``start``.
* Runtime API names lose their ABI suffix (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``).
  nsys 2022.2 records every runtime call twice under one correlation id (with and without the
  suffix); one row per (process, correlation id) is kept, the suffixed one.
* NVTX: push/pop (eventType 59) and start/end (60) ranges; marks and ranges with no end are
  dropped (the latter counted in ``warnings``). Text is ``text`` or the registered ``textId``
  string. ``domain_id`` names the domain (eventType 75 rows), ``"domain <n>"`` when the export
  lacks the domain's create row. ``payload`` is the first numeric payload column set. ``depth``
  counts the ranges of the same kind still open on the thread when the range starts.
* ``devices``: ``TARGET_INFO_GPU`` (absent in some exports: then the device ids seen in GPU
  activity, with unknown name and sizes).
* ``collective_args``: NCCL message sizes from NCCL's NVTX payloads, joined to the kernels they
  launched (:mod:`verifyprof.trace.nccl_nvtx`); only exports made with ``--include-blobs=true``
  hold them (a warning says when NCCL's payload schemas are there but the values are not).
* ``processes``: every pid with events, named from ``PROCESSES`` (or its main thread's name).
  ``device`` is the one device a process launched work on (-1 if none or several). ``rank``
  is only inferred when it is unambiguous: several processes each drive exactly one device, all
  distinct; then rank = the order of its device id. Otherwise -1 (nsys does not record ranks).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Self

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from verifyprof.errors import TraceError
from verifyprof.trace.nccl_nvtx import nccl_collective_args
from verifyprof.trace.model import (
    API_KIND_DRIVER,
    API_KIND_RUNTIME,
    COPY_KIND_MEMCPY,
    COPY_KIND_MEMSET,
    NO_ID,
    RANGE_KIND_PUSHPOP,
    RANGE_KIND_STARTEND,
    StringTable,
    Trace,
)
from verifyprof.trace.sqlite_columns import (
    Query,
    Rows,
    SlicedQuery,
    TableQuery,
    readonly_uri,
    rowid_slices,
    run_queries,
)

FORMAT = "nsys-sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
DRIVER = "CUPTI_ACTIVITY_KIND_DRIVER"
NVTX = "NVTX_EVENTS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # nsys >= 2023 / nsys 2022.x

NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTX_DOMAIN_CREATE = 75
NVTX_PAYLOADS = ("uint64Value", "int64Value", "doubleValue", "uint32Value", "int32Value", "floatValue")

# CUPTI memcpy kinds (ENUM_CUDA_MEMCPY_OPER, stable across schema versions) -> copy names
COPY_NAMES = {
    0: "Memcpy", 1: "Memcpy HtoD", 2: "Memcpy DtoH", 3: "Memcpy HtoA", 4: "Memcpy AtoH", 5: "Memcpy AtoA",
    6: "Memcpy AtoD", 7: "Memcpy DtoA", 8: "Memcpy DtoD", 9: "Memcpy HtoH", 10: "Memcpy PtoP",
    11: "Memcpy UVM HtoD", 12: "Memcpy UVM DtoH", 13: "Memcpy UVM DtoD",
}
MEMSET_NAME = "Memset"

# Runtime/driver calls the model keeps: they launch GPU work or block the host on it.
API_CANDIDATE_SQL = (
    "value GLOB 'cu*' AND (value LIKE '%Launch%' OR value LIKE '%Memcpy%' OR value LIKE '%Memset%'"
    " OR value LIKE '%Synchronize%')"
)
API_NAME = re.compile(r"^cu(da)?[A-Z]\w*$")
ABI_SUFFIX = re.compile(r"_v\d+$")
SYNC_NAME = re.compile(r"Synchronize")

GRAPH_WARNING = (
    "{n} CUDA graph launch(es) recorded only as whole graphs (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) without their "
    "kernels: captured with --cuda-graph-trace=graph; per-kernel phases inside graphs are unavailable, "
    "re-capture with --cuda-graph-trace=node"
)


def read_nsys_sqlite(path: Path) -> Trace:
    """Read an nsys SQLite export (never modifying it) into the event model."""
    path = Path(path)
    with _Export(path) as export:
        trace = export.read()
    _release_free_memory()
    return trace


def _release_free_memory() -> None:
    """Hand the heap the reader's threads freed (Arrow batches) back to the OS, so that the
    next stage starts from the trace's own footprint (glibc keeps freed arena memory otherwise)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


class _Export:
    """One export opened read-only: a sqlite3 connection for small queries, ADBC for bulk reads."""

    def __init__(self, path: Path):
        self.path = path
        self.uri = readonly_uri(path)
        self.con: sqlite3.Connection | None = None

    def __enter__(self) -> Self:
        _check_header(self.path)
        try:
            self.con = sqlite3.connect(self.uri, uri=True)
            rows = self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise TraceError(f"corrupt or truncated SQLite file ({exc})", self.path) from None
        self.tables = {name for (name,) in rows}
        self.columns: dict[str, list[str]] = {}
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    # --- small helpers ------------------------------------------------------------------------

    def cols(self, table: str) -> list[str]:
        if table not in self.columns:
            self.columns[table] = [row[1] for row in self.sql(f'PRAGMA table_info("{table}")')] if table in self.tables else []
        return self.columns[table]

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        assert self.con is not None
        try:
            return self.con.execute(query, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceError(f"corrupt or truncated SQLite export ({exc})", self.path) from None

    def has_rows(self, table: str) -> bool:
        return table in self.tables and bool(self.sql(f'SELECT EXISTS (SELECT 1 FROM "{table}")')[0][0])

    def fetch(self, jobs: list[Query]) -> None:
        """Run every job's queries on parallel read-only ADBC connections (results land in the jobs)."""
        try:
            run_queries(self.uri, jobs)
        except Exception as exc:  # noqa: BLE001 - ADBC surfaces SQLite corruption as driver errors of several types
            raise TraceError(f"corrupt or truncated SQLite export ({_one_line(exc)})", self.path) from None

    def sliced(self, table: str, select: str, where: str = "") -> list[tuple[str, int]]:
        """``select`` over ``table`` in rowid slices, with each slice's most rows.

        Exports are rowid tables, so a slice is a range scan and slices can run in parallel."""
        # two queries: SQLite answers a lone min()/max() of the rowid from the b-tree, both together by a scan
        lo = self.sql(f'SELECT min(rowid) FROM "{table}"')[0][0]
        hi = self.sql(f'SELECT max(rowid) FROM "{table}"')[0][0]
        if lo is None:
            return []
        return rowid_slices(table, select, where, lo, hi)

    # --- the read ---------------------------------------------------------------------------

    def read(self) -> Trace:
        self._check_is_export()
        strings = StringTable()
        names = _NsysStrings(self, strings)
        warnings: list[str] = []
        meta = self._meta()

        api_names = self._api_candidates()
        kernel_job = SlicedQuery(self._kernel_slices(), KERNEL_SPEC)
        api_job = SlicedQuery([q for t in (RUNTIME, DRIVER) for q in self._api_slices(t, api_names)], API_SPEC)
        copy_jobs = {t: TableQuery(self._copy_query(t)) for t in (MEMCPY, MEMSET)}
        graph_job = TableQuery(self._graph_query())
        nvtx_job = TableQuery(self._nvtx_query())
        self.fetch([kernel_job, api_job, *copy_jobs.values(), graph_job, nvtx_job])

        kernels = _kernels(kernel_job.rows(), names)
        copies = _copies({t: job.rows() for t, job in copy_jobs.items()}, strings)
        graphs = _graphs(graph_job.rows())
        if not (len(kernels) or len(copies) or len(graphs)):
            raise TraceError(
                "empty capture: no GPU activity (kernels, memcpy, memset) recorded; capture with nsys profile --trace=cuda", self.path
            )
        gpu_keys = np.concatenate([_key(t["pid"], t["correlation"]) for t in (kernels, copies, graphs)])
        api = _api(api_job.rows(), api_names, strings, gpu_keys)
        nvtx_t = nvtx_job.rows()
        ranges, nvtx_warnings = _ranges(nvtx_t, names, strings)
        warnings += nvtx_warnings
        if len(graphs):  # whole-graph rows whose kernels were not recorded (--cuda-graph-trace=graph)
            kernel_keys = _key(kernels["pid"], kernels["correlation"])
            opaque = int((~pd.Series(_key(graphs["pid"], graphs["correlation"])).isin(kernel_keys)).sum())
            if opaque:
                warnings.append(GRAPH_WARNING.format(n=opaque))
        devices = self._devices(kernels, copies, graphs)
        processes = self._processes(names, kernels, copies, graphs, api, ranges)
        meta["graph_trace_rows"] = len(graphs)
        optional = {}
        collective_args, nccl_warnings = nccl_collective_args(self.con, self.uri, self.tables, kernels, api, ranges, strings)
        warnings += nccl_warnings
        if collective_args is not None:
            optional["collective_args"] = collective_args
        return Trace(
            source=[self.path], format=FORMAT, strings=strings, kernels=kernels, copies=copies, graphs=graphs,
            api=api, ranges=ranges, devices=devices, processes=processes, meta=meta, warnings=warnings, **optional,
        )

    def _check_is_export(self) -> None:
        nsys_tables = [t for t in self.tables if t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) or t in (NVTX, *META_TABLES)]
        if "StringIds" not in self.tables or not nsys_tables:
            raise TraceError("an SQLite database, but not an Nsight Systems export (no StringIds / CUPTI_ACTIVITY_KIND_* tables)", self.path)
        if KERNEL not in self.tables:
            if self.has_rows(GRAPH_TRACE):
                raise TraceError(
                    "no CUPTI_ACTIVITY_KIND_KERNEL table: every kernel ran inside CUDA graphs captured with "
                    "--cuda-graph-trace=graph; re-capture with --cuda-graph-trace=node", self.path
                )
            if not (self.has_rows(MEMCPY) or self.has_rows(MEMSET)):
                raise TraceError(
                    "empty capture: no CUPTI_ACTIVITY_KIND_KERNEL table and no other GPU activity; "
                    "capture with nsys profile --trace=cuda", self.path
                )
            raise TraceError("no CUPTI_ACTIVITY_KIND_KERNEL table: the capture recorded copies but no kernels", self.path)

    def _meta(self) -> dict:
        meta: dict = {}
        table = next((t for t in META_TABLES if t in self.tables), None)
        values = dict(self.sql(f'SELECT name, value FROM "{table}"')) if table else {}
        meta["nsys_schema_version"] = values.get("EXPORT_SCHEMA_VERSION", "")
        meta["nsys_version"] = values.get("EXPORT_PRODUCT_VERSION", "")
        if "TARGET_INFO_SESSION_START_TIME" in self.tables and "utcEpochNs" in self.cols("TARGET_INFO_SESSION_START_TIME"):
            row = self.sql("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
            if row and row[0][0] is not None:
                meta["capture_start_utc_ns"] = int(row[0][0])
        if "ANALYSIS_DETAILS" in self.tables and {"startTime", "stopTime"} <= set(self.cols("ANALYSIS_DETAILS")):
            row = self.sql("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")
            if row and row[0][0] is not None:
                meta["capture_start_ns"], meta["capture_end_ns"] = int(row[0][0]), int(row[0][1])
        return meta

    # --- queries ------------------------------------------------------------------------------

    def _select(self, table: str, wanted: dict[str, str]) -> str:
        """SELECT list: ``alias -> expression``; expressions naming an absent column become NULL."""
        have = set(self.cols(table))
        parts = []
        for alias, column in wanted.items():
            expr = f'"{column}"' if column in have else "NULL"
            parts.append(f"{expr} AS {alias}")
        return ", ".join(parts)

    def _kernel_slices(self) -> list[tuple[str, int]]:
        have = set(self.cols(KERNEL))
        name = "demangledName" if "demangledName" in have else "shortName"
        select = self._select(KERNEL, {
            "start": "start", "end": "end", "device": "deviceId", "stream": "streamId", "correlation": "correlationId",
            "gpid": "globalPid", "name": name, "graph_node_id": "graphNodeId", "graph_id": "graphId",
        })
        return self.sliced(KERNEL, select)

    def _copy_query(self, table: str) -> str | None:
        if not self.has_rows(table):
            return None
        wanted = {"start": "start", "end": "end", "device": "deviceId", "stream": "streamId", "correlation": "correlationId",
                  "gpid": "globalPid", "bytes": "bytes", "graph_node_id": "graphNodeId"}
        if table == MEMCPY:
            wanted["copy_kind"] = "copyKind"
        return f'SELECT {self._select(table, wanted)} FROM "{table}"'

    def _graph_query(self) -> str | None:
        if not self.has_rows(GRAPH_TRACE):
            return None
        select = self._select(GRAPH_TRACE, {
            "start": "start", "end": "end", "device": "deviceId", "stream": "streamId", "graph_id": "graphId",
            "correlation": "correlationId", "gpid": "globalPid",
        })
        return f'SELECT {select} FROM "{GRAPH_TRACE}"'

    def _api_candidates(self) -> dict[int, str]:
        """nsys string id -> API name, for calls that may launch work or synchronize."""
        rows = self.sql(f"SELECT id, value FROM StringIds WHERE {API_CANDIDATE_SQL}")
        return {sid: value for sid, value in rows if API_NAME.match(value)}

    def _api_slices(self, table: str, candidates: dict[int, str]) -> list[tuple[str, int]]:
        if not candidates or not self.has_rows(table) or "nameId" not in self.cols(table):
            return []
        select = self._select(table, {"start": "start", "end": "end", "gtid": "globalTid", "correlation": "correlationId",
                                       "name": "nameId"})
        ids = ",".join(str(i) for i in sorted(candidates))
        return self.sliced(table, select + f", {1 if table == DRIVER else 0} AS from_driver", f"nameId IN ({ids})")

    def _nvtx_query(self) -> str | None:
        if not self.has_rows(NVTX):
            return None
        have = set(self.cols(NVTX))
        payload = [f'"{c}" * 1.0' for c in NVTX_PAYLOADS if c in have]
        # 1e999 (inf) stands for "no payload" so that the column is always REAL (ADBC infers types from the first rows)
        payload_expr = f"COALESCE({', '.join(payload + ['1e999'])})"
        text = "COALESCE(text, '')" if "text" in have else "''"
        select = self._select(NVTX, {"start": "start", "end": "end", "event_type": "eventType", "gtid": "globalTid",
                                      "text_id": "textId", "domain": "domainId"})
        types = f"{NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTX_DOMAIN_CREATE}"
        return f'SELECT {select}, {text} AS text, {payload_expr} AS payload FROM "{NVTX}" WHERE eventType IN ({types})'

    # --- small tables ---------------------------------------------------------------------------

    def _devices(self, *gpu_tables: pd.DataFrame) -> pd.DataFrame:
        seen = pd.unique(np.concatenate([t["device"].to_numpy() for t in gpu_tables]))
        seen = seen[seen >= 0]
        rows: dict[int, tuple] = {}
        if "TARGET_INFO_GPU" in self.tables:
            have = set(self.cols("TARGET_INFO_GPU"))
            expr = lambda c: f'"{c}"' if c in have else "NULL"
            for dev, name, sms, mem, major, minor in self.sql(
                f"SELECT id, {expr('name')}, {expr('smCount')}, {expr('totalMemory')}, {expr('computeMajor')}, "
                f"{expr('computeMinor')} FROM TARGET_INFO_GPU"
            ):
                if dev is None or dev in rows:
                    continue
                cc = f"{major}.{minor}" if major is not None and minor is not None else ""
                rows[int(dev)] = (name or "", -1 if sms is None else sms, -1 if mem is None else mem, cc)
        for dev in seen:
            rows.setdefault(int(dev), ("", -1, -1, ""))
        order = sorted(rows)
        return pd.DataFrame({
            "device": np.array(order, dtype=np.int32),
            "name": np.array([rows[d][0] for d in order], dtype=object),
            "sm_count": np.array([rows[d][1] for d in order], dtype=np.int32),
            "memory_bytes": np.array([rows[d][2] for d in order], dtype=np.int64),
            "compute_capability": np.array([rows[d][3] for d in order], dtype=object),
        })

    def _processes(self, names: _NsysStrings, kernels, copies, graphs, api, ranges) -> pd.DataFrame:
        # distinct (pid, device) pairs by hashing one int64 per op (devices are small ordinals)
        pairs = pd.unique(np.concatenate([(t["pid"].to_numpy() << 16) | (t["device"].to_numpy().astype(np.int64) & 0xFFFF)
                                          for t in (kernels, copies, graphs)]))
        gpu = pd.DataFrame({"pid": pairs >> 16, "device": (pairs & 0xFFFF).astype(np.int16).astype(np.int64)})
        pids = np.sort(pd.unique(np.concatenate([gpu["pid"].to_numpy(), pd.unique(api["pid"].to_numpy()), pd.unique(ranges["pid"].to_numpy())])))
        pids = pids[pids >= 0]
        process_names: dict[int, str] = {}
        if "PROCESSES" in self.tables and {"globalPid", "name"} <= set(self.cols("PROCESSES")):
            for gpid, name in self.sql("SELECT globalPid, name FROM PROCESSES"):
                if gpid is not None and name:
                    process_names[(int(gpid) >> 24) & 0xFFFFFF] = name
        missing = [p for p in pids if int(p) not in process_names]
        if missing and "ThreadNames" in self.tables:  # a process's main thread has tid == pid
            for gtid, name_id in self.sql("SELECT globalTid, nameId FROM ThreadNames"):
                if gtid is None:
                    continue
                pid, tid = (int(gtid) >> 24) & 0xFFFFFF, int(gtid) & 0xFFFFFF
                if pid == tid and pid not in process_names:
                    process_names[pid] = names.text(int(name_id))
        per_pid = gpu.groupby("pid")["device"].agg(["nunique", "first"])
        device = np.array([per_pid.at[p, "first"] if p in per_pid.index and per_pid.at[p, "nunique"] == 1 else NO_ID for p in pids])
        rank = np.full(len(pids), NO_ID)
        drivers = np.isin(pids, per_pid.index.to_numpy())
        if drivers.sum() > 1 and (device[drivers] >= 0).all() and len(np.unique(device[drivers])) == drivers.sum():
            rank[drivers] = np.argsort(np.argsort(device[drivers]))
        return pd.DataFrame({
            "pid": pids.astype(np.int64),
            "host_pid": pids.astype(np.int64),
            "name": np.array([process_names.get(int(p), "") for p in pids], dtype=object),
            "rank": rank.astype(np.int32),
            "device": device.astype(np.int32),
        })


class _NsysStrings:
    """Maps nsys ``StringIds`` ids to ``Trace.strings`` ids, fetching only the ids asked for."""

    def __init__(self, export: _Export, strings: StringTable):
        self.export = export
        self.strings = strings
        self.known: dict[int, int] = {}

    def map(self, nsys_ids: np.ndarray) -> np.ndarray:
        """Trace string ids for an array of nsys ids (-1/NULL -> -1; unknown ids -> "<string N>")."""
        nsys_ids = np.asarray(nsys_ids, dtype=np.int64)
        if not len(nsys_ids):
            return np.empty(0, dtype=np.int32)
        valid = nsys_ids >= 0
        top = int(nsys_ids.max()) if valid.any() else -1
        if top < 1 << 26:  # StringIds ids are dense: a lookup table beats sorting
            present = np.flatnonzero(np.bincount(nsys_ids[valid], minlength=top + 1))
            self._load([int(u) for u in present if int(u) not in self.known])
            table = np.full(top + 2, NO_ID, dtype=np.int32)  # the last slot answers -1 (NULL)
            table[present] = [self.known[int(u)] for u in present]
            return table[np.where(valid, nsys_ids, top + 1)]
        uniq, inverse = np.unique(nsys_ids, return_inverse=True)
        self._load([int(u) for u in uniq if u >= 0 and int(u) not in self.known])
        mapped = np.array([self.known.get(int(u), NO_ID) for u in uniq], dtype=np.int32)
        return mapped[inverse]

    def text(self, nsys_id: int) -> str:
        return self.strings[int(self.map(np.array([nsys_id]))[0])]

    def _load(self, ids: list[int]) -> None:
        if not ids:
            return
        values: dict[int, str] = {}
        for i in range(0, len(ids), 50_000):
            chunk = ",".join(map(str, ids[i : i + 50_000]))
            values.update(self.export.sql(f"SELECT id, value FROM StringIds WHERE id IN ({chunk})"))
        texts = [values.get(i, f"<string {i}>") for i in ids]
        for i, sid in zip(ids, self.strings.intern(texts)):
            self.known[i] = int(sid)


# --- query results -> model tables ---------------------------------------------------------------


def _pid(global_id: np.ndarray) -> np.ndarray:
    """OS pid from a globalPid/globalTid: ``<hw:8><vm:8><pid:24><tid:24>``; -1 stays -1."""
    return np.where(global_id >= 0, (global_id >> 24) & 0xFFFFFF, NO_ID)


def _key(pid: np.ndarray | pd.Series, correlation: np.ndarray | pd.Series) -> np.ndarray:
    """One int64 per (process, correlation id): pids have 24 bits, CUPTI correlation ids 32."""
    return (np.asarray(pid, dtype=np.int64) << 32) | (np.asarray(correlation, dtype=np.int64) & 0xFFFFFFFF)


def _frame(columns: dict[str, np.ndarray], dtypes: dict[str, str]) -> pd.DataFrame:
    """The model table, sorted by start (gathered column by column to bound peak memory)."""
    if not columns:
        columns = {c: np.empty(0, dtype=dt) for c, dt in dtypes.items()}
    start = columns["start"]
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        order = np.argsort(start, kind="stable")  # exports append per-stream chunks: few sorted runs, cheap
        for name in list(columns):
            columns[name] = columns[name][order]
    return pd.DataFrame({c: columns.pop(c).astype(dt, copy=False) for c, dt in dtypes.items()}, copy=False)


KERNEL_SPEC = {c: ("int64", NO_ID) for c in ("start", "end", "device", "stream", "correlation", "gpid", "name", "graph_node_id", "graph_id")}
API_SPEC = {**{c: ("int64", NO_ID) for c in ("start", "end", "gtid", "correlation", "name")}, "from_driver": ("int8", 0)}
KERNEL_DTYPES = {"start": "int64", "end": "int64", "device": "int32", "stream": "int64", "name_id": "int32",
                 "correlation": "int64", "pid": "int64", "graph_id": "int64", "graph_node_id": "int64"}
COPY_DTYPES = {"start": "int64", "end": "int64", "device": "int32", "stream": "int64", "kind": "int8", "name_id": "int32",
               "bytes": "int64", "correlation": "int64", "pid": "int64", "graph_node_id": "int64"}
GRAPH_DTYPES = {"start": "int64", "end": "int64", "device": "int32", "stream": "int64", "graph_id": "int64",
                "correlation": "int64", "pid": "int64"}
API_DTYPES = {"start": "int64", "end": "int64", "pid": "int64", "tid": "int64", "correlation": "int64",
              "name_id": "int32", "kind": "int8"}
RANGE_DTYPES = {"start": "int64", "end": "int64", "pid": "int64", "tid": "int64", "name_id": "int32", "domain_id": "int32",
                "kind": "int8", "depth": "int16", "device": "int32", "payload": "float64"}


def _kernels(rows: Rows, names: _NsysStrings) -> pd.DataFrame:
    if not rows.n:
        return _frame({}, KERNEL_DTYPES)
    cols = {
        "start": rows.take("start", "int64"),
        "end": rows.take("end", "int64"),
        "device": rows.take("device", "int32"),
        "stream": rows.take("stream", "int64"),
        "name_id": names.map(rows.take("name", "int64")),
        "correlation": rows.take("correlation", "int64"),
        "pid": _pid(rows.take("gpid", "int64")),
        "graph_id": rows.take("graph_id", "int64"),
        "graph_node_id": rows.take("graph_node_id", "int64"),
    }
    return _frame(cols, KERNEL_DTYPES)


def _copies(tables: dict[str, Rows | None], strings: StringTable) -> pd.DataFrame:
    parts = []
    for table, rows in tables.items():
        if rows is None or not rows.n:
            continue
        n = rows.n
        if table == MEMCPY:
            kinds = rows.take("copy_kind", "int64", fill=0)
            labels = np.unique(kinds)
            ids = strings.intern([COPY_NAMES.get(int(k), f"Memcpy kind {int(k)}") for k in labels])
            name_id = ids[np.searchsorted(labels, kinds)]
            kind = np.full(n, COPY_KIND_MEMCPY, dtype=np.int8)
        else:
            name_id = np.full(n, strings.intern([MEMSET_NAME])[0], dtype=np.int32)
            kind = np.full(n, COPY_KIND_MEMSET, dtype=np.int8)
        parts.append({
            "start": rows.take("start", "int64"), "end": rows.take("end", "int64"), "device": rows.take("device", "int32"),
            "stream": rows.take("stream", "int64"), "kind": kind, "name_id": name_id,
            "bytes": rows.take("bytes", "int64"), "correlation": rows.take("correlation", "int64"),
            "pid": _pid(rows.take("gpid", "int64")), "graph_node_id": rows.take("graph_node_id", "int64"),
        })
    if not parts:
        return _frame({}, COPY_DTYPES)
    return _frame({c: np.concatenate([p[c] for p in parts]) for c in COPY_DTYPES}, COPY_DTYPES)


def _graphs(rows: Rows) -> pd.DataFrame:
    if not rows.n:
        return _frame({}, GRAPH_DTYPES)
    cols = {c: rows.take(c if c != "pid" else "gpid", dt) for c, dt in GRAPH_DTYPES.items()}
    cols["pid"] = _pid(cols["pid"])
    return _frame(cols, GRAPH_DTYPES)


def _api(rows: Rows, candidates: dict[int, str], strings: StringTable, gpu_keys: np.ndarray) -> pd.DataFrame:
    if not rows.n:
        return _frame({}, API_DTYPES)
    nsys_name = rows.take("name", "int64")
    tid = rows.take("gtid", "int64")
    pid = _pid(tid)
    correlation = rows.take("correlation", "int64")
    from_driver = rows.take("from_driver", "int8", fill=0)
    # per candidate name: base name (ABI suffix stripped), suffixed?, synchronizing?, driver API?
    cand_ids = np.array(sorted(candidates), dtype=np.int64)
    raw = [candidates[i] for i in cand_ids]
    base = [ABI_SUFFIX.sub("", r) for r in raw]
    lut = np.searchsorted(cand_ids, nsys_name)
    name_id = strings.intern(base)[lut]
    suffixed = np.array([b != r for b, r in zip(base, raw)])[lut]
    is_sync = np.array([bool(SYNC_NAME.search(b)) for b in base])[lut]
    driver = np.array([not b.startswith("cuda") for b in base])[lut] | (from_driver == 1)

    keys = _key(pid, correlation)
    keep = pd.Series(keys).isin(gpu_keys).to_numpy() | is_sync
    unsuffixed = {r for r, b in zip(raw, base) if r == b}
    if unsuffixed & {b for r, b in zip(raw, base) if r != b}:
        # nsys 2022.2: each call twice under one correlation id, "X" (eventClass 67) and "X_vNNNN"
        order = np.lexsort((~suffixed, keys))
        first = np.r_[True, keys[order][1:] != keys[order][:-1]]
        dup = np.ones(len(keys), dtype=bool)
        dup[order[first]] = False
        keep &= ~dup
    cols = {
        "start": rows.take("start", "int64")[keep], "end": rows.take("end", "int64")[keep], "pid": pid[keep],
        "tid": tid[keep], "correlation": correlation[keep], "name_id": name_id[keep],
        "kind": np.where(driver[keep], API_KIND_DRIVER, API_KIND_RUNTIME).astype(np.int8),
    }
    return _frame(cols, API_DTYPES)


def _ranges(rows: Rows, names: _NsysStrings, strings: StringTable) -> tuple[pd.DataFrame, list[str]]:
    if not rows.n:
        return _frame({}, RANGE_DTYPES), []
    event_type = rows.take("event_type", "int64")
    domain_raw = rows.take("domain", "int64", fill=0)
    end_null = rows.table.column("end").is_null().to_numpy(zero_copy_only=False)
    end = rows.take("end", "int64")
    text_col = rows.strings("text")

    # domain names from the create rows; a domain without one (time-sliced export) gets its number
    creates = np.flatnonzero(event_type == NVTX_DOMAIN_CREATE)
    domain_text = {int(domain_raw[i]): text_col[int(i)].as_py() for i in creates}
    is_range = (event_type == NVTX_PUSHPOP) | (event_type == NVTX_STARTEND)
    open_ended = is_range & end_null
    warnings = []
    if open_ended.any():
        warnings.append(f"{int(open_ended.sum())} NVTX range(s) without an end (open when the capture stopped) dropped")
    sel = np.flatnonzero(is_range & ~end_null)
    if not len(sel):
        return _frame({}, RANGE_DTYPES), warnings
    start = rows.take("start", "int64")[sel]
    end = end[sel]
    tid = rows.take("gtid", "int64")[sel]
    kind = np.where(event_type[sel] == NVTX_PUSHPOP, RANGE_KIND_PUSHPOP, RANGE_KIND_STARTEND).astype(np.int8)

    # name: the explicit text, else the registered string (textId); distinct texts interned once
    texts = pc.take(text_col, pa.array(sel))
    encoded = pc.dictionary_encode(texts).combine_chunks()
    dict_ids = strings.intern(encoded.dictionary.to_pylist())
    name_id = dict_ids[encoded.indices.to_numpy(zero_copy_only=False)]
    registered = rows.take("text_id", "int64")[sel]
    use_registered = pc.equal(texts, "").to_numpy(zero_copy_only=False) & (registered >= 0)
    name_id[use_registered] = names.map(registered[use_registered])

    domains = domain_raw[sel]
    domain_id = np.full(len(sel), NO_ID, dtype=np.int32)
    named = domains > 0
    if named.any():
        uniq, inverse = np.unique(domains[named], return_inverse=True)
        ids = strings.intern([domain_text.get(int(d)) or f"domain {int(d)}" for d in uniq])
        domain_id[named] = ids[inverse]

    payload = rows.take("payload", "float64", fill=np.nan)[sel]
    payload[~np.isfinite(payload)] = np.nan  # 1e999 (inf) marked "no payload" in the query
    cols = {"start": start, "end": end, "pid": _pid(tid), "tid": tid, "name_id": name_id, "domain_id": domain_id,
            "kind": kind, "depth": nesting_depth(tid, kind, start, end),
            "device": np.full(len(sel), NO_ID, dtype=np.int32), "payload": payload}
    return _frame(cols, RANGE_DTYPES), warnings


def nesting_depth(tid: np.ndarray, kind: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range: how many ranges of the same (thread, kind) are open when it starts (0 = outermost).

    Sorted by (thread, start, longer first), a range's depth is the number of ranges before it in
    its thread that have not ended by its start: its position in the thread minus the ranges
    that ended at or before its start (zero-length ranges at that instant excluded: they sort after
    it). For push/pop ranges, which nest, that is the nesting level. Vectorised: searchsorted on
    keys (thread, time rank)."""
    n = len(start)
    if not n:
        return np.empty(0, dtype=np.int16)
    group = pd.factorize(tid)[0].astype(np.int64) * 2 + kind.astype(np.int64)
    times, inv = np.unique(np.concatenate([start, end]), return_inverse=True)
    span = len(times) + 1
    s_rank, e_rank = inv[:n], inv[n:]
    order = np.lexsort((-end, start, group))
    g = group[order]
    first_of_group = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    sizes = np.diff(np.r_[first_of_group, n])
    group_start = np.repeat(first_of_group, sizes)
    position = np.arange(n) - group_start
    start_key = g * span + s_rank[order]
    end_keys = np.sort(group * span + e_rank)
    ended = np.searchsorted(end_keys, start_key, side="right") - group_start
    zero = start == end
    if zero.any():
        zero_keys = np.sort(group[zero] * span + s_rank[zero])
        ended -= np.searchsorted(zero_keys, start_key, side="right") - np.searchsorted(zero_keys, start_key, side="left")
    depth = np.empty(n, dtype=np.int16)
    depth[order] = np.clip(position - ended, 0, np.iinfo(np.int16).max)
    return depth


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as handle:
            head = handle.read(100)
    except FileNotFoundError:
        raise TraceError("no such file", path) from None
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror}", path) from None
    if not head.startswith(SQLITE_MAGIC):
        raise TraceError("not an SQLite file (an nsys export starts with 'SQLite format 3')", path)
    if len(head) < 100:
        raise TraceError("truncated SQLite file (shorter than its 100-byte header)", path)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    size_valid = head[92:96] == head[24:28]  # the in-header page count is current only then
    size = path.stat().st_size
    if size_valid and pages and size < pages * page_size:
        raise TraceError(f"truncated SQLite file: {size} bytes, its header says {pages * page_size}", path)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
