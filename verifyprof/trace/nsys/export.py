"""An Nsight Systems SQLite export, opened read-only: what it is, which tables and columns it has.

Exports from nsys 2022.2 (schema 2.9) to current (3.2x) differ in table and column sets, so
columns are selected by name (``PRAGMA table_info``) and absent (lazy) tables read as empty.
The file is opened read-only (``mode=ro``) and never written: no indexes, no temp tables in it.
The table readers (:mod:`~verifyprof.trace.nsys.activity`, ``nvtx_ranges``, ``processes``)
share what is here: the connection, schema checks and metadata, the ``StringIds`` lookup, and how
nsys packs process ids.

``pid`` = ``host_pid`` = OS pid, ``(globalPid >> 24) & 0xFFFFFF`` (runtime calls and NVTX
ranges: the same bits of ``globalTid``); ``tid`` = the full ``globalTid``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import NO_ID, StringTable
from verifyprof.trace.formats import is_wal_mode, read_head, sqlite_header_problem
from verifyprof.trace.nsys.columns import (
    NotNumeric,
    Query,
    readonly_uri,
    rowid_slices,
    run_queries,
)
from verifyprof.trace.path_checks import regular_file

if TYPE_CHECKING:  # pandas where a table is made (trace/events.py says why)
    import pandas as pd

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
DRIVER = "CUPTI_ACTIVITY_KIND_DRIVER"
NVTX = "NVTX_EVENTS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # nsys >= 2023 / nsys 2022.x
KNOWN_SCHEMAS = ((2, 9), (3, 99))  # EXPORT_SCHEMA_VERSION of nsys 2022.2 .. current
DENSE_SPAN = 1 << 24  # rowid spans wider than this are counted before slices are sized


@dataclass(frozen=True)
class ProcessFilter:
    """Which processes' rows to read: those in ``pids`` (``globalPid`` values), or with
    ``rest`` every process *not* in ``pids`` plus rows that name none."""

    pids: tuple[int, ...]
    rest: bool = False

    def sql(self, column: str) -> str:
        """The condition on ``column`` (``globalPid``, or ``globalTid``, whose process bits are the
        same)."""
        process = f'("{column}" >> 24)'
        keys = ", ".join(str(p >> 24) for p in self.pids) or "NULL"
        if self.rest:
            return f'({process} NOT IN ({keys}) OR "{column}" IS NULL)' if self.pids else "1"
        return f"{process} IN ({keys})"


class NsysExport:
    """One export opened read-only: a sqlite3 connection for small queries, ADBC for bulk reads;
    with ``processes``, only those processes' rows of the per-process tables."""

    def __init__(self, path: Path, processes: ProcessFilter | None = None):
        self.path = path
        self.uri = readonly_uri(path)
        self.con: sqlite3.Connection | None = None
        self.processes = processes
        self.undecodable = 0  # texts read that were not UTF-8 (read with U+FFFD)

    def __enter__(self) -> Self:
        check_header(self.path)
        self.uri = readonly_uri(readable_database(self.path))
        try:
            self.con = sqlite3.connect(self.uri, uri=True)
            self.con.text_factory = self._decode  # names are not always valid UTF-8
            rows = self.con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            ).fetchall()
        # a garbled schema: undecodable SQL or names
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            self.close()
            raise TraceError(
                f"corrupt or truncated SQLite file ({one_line(exc)})", self.path
            ) from None
        self.tables = {name for (name,) in rows}
        self.columns: dict[str, list[str]] = {}
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _decode(self, raw: bytes) -> str:
        """A text column's value; one that is not UTF-8 is read with U+FFFD, and counted."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.undecodable += 1
            return raw.decode("utf-8", "replace")

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    # --- small helpers ------------------------------------------------------------------------

    def cols(self, table: str) -> list[str]:
        if table not in self.columns:
            self.columns[table] = (
                [row[1] for row in self.sql(f'PRAGMA table_info("{table}")')]
                if table in self.tables
                else []
            )
        return self.columns[table]

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        assert self.con is not None
        try:
            return self.con.execute(query, params).fetchall()
        # a garbled schema: undecodable SQL or names
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            raise TraceError(
                f"corrupt or truncated SQLite export ({one_line(exc)})", self.path
            ) from None

    def require(self, table: str, columns: tuple[str, ...]) -> None:
        """TraceError unless ``table`` has every one of ``columns`` (an edited or foreign
        export)."""
        missing = [c for c in columns if c not in self.cols(table)]
        if missing:
            raise TraceError(
                f"{table} has no {', '.join(repr(c) for c in missing)} column: not an export as"
                " nsys writes it",
                self.path,
            )

    def has_rows(self, table: str) -> bool:
        return table in self.tables and bool(
            self.sql(f'SELECT EXISTS (SELECT 1 FROM "{table}")')[0][0]
        )

    def fetch(self, jobs: list[Query]) -> None:
        """Run every job's queries on parallel read-only ADBC connections (results land in the
        jobs)."""
        try:
            run_queries(self.uri, jobs)
        except NotNumeric:  # the reader names the file
            raise
        except ModuleNotFoundError as exc:  # the environment's fault, not the file's
            raise TraceError(
                f"reading an nsys export needs the Python package adbc-driver-sqlite"
                f" ({one_line(exc)}): pip install adbc-driver-sqlite",
                self.path,
            ) from None
        # ADBC surfaces SQLite corruption as driver errors of several types
        except Exception as exc:
            raise TraceError(
                f"corrupt or truncated SQLite export ({one_line(exc)})", self.path
            ) from None

    def of_processes(self, table: str, where: str = "") -> str:
        """``where`` and, with a process filter, the table's rows of those processes."""
        if self.processes is None:
            return where
        column = (
            "globalPid"
            if "globalPid" in self.cols(table)
            else "globalTid"
            if "globalTid" in self.cols(table)
            else None
        )
        if (
            column is None
        ):  # a table that names no process: all of it in the last share, none in the others
            mine = "1" if self.processes.rest else "0"
            return f"({where}) AND {mine}" if where else mine
        mine = self.processes.sql(column)
        return f"({where}) AND {mine}" if where else mine

    def sliced(self, table: str, select: str, where: str = "") -> list[tuple[str, int]]:
        """``select`` over ``table`` in rowid slices, with each slice's most rows.

        Exports are rowid tables, so a slice is a range scan and slices can run in parallel."""
        # two queries: SQLite answers a lone min()/max() of the rowid from the b-tree, both together
        # by a scan
        lo = self.sql(f'SELECT min(rowid) FROM "{table}"')[0][0]
        hi = self.sql(f'SELECT max(rowid) FROM "{table}"')[0][0]
        if lo is None:
            return []
        rows = None
        if hi - lo >= DENSE_SPAN:  # nsys numbers rows 1..n; a wider span is an edited file: count
            rows = self.sql(f'SELECT count(*) FROM "{table}"')[0][0]
        return rowid_slices(table, select, self.of_processes(table, where), lo, hi, rows)

    def select(self, table: str, wanted: dict[str, str]) -> str:
        """SELECT list: ``alias -> expression``; expressions naming an absent column become NULL."""
        have = set(self.cols(table))
        parts = []
        for alias, column in wanted.items():
            expr = f'"{column}"' if column in have else "NULL"
            parts.append(f"{expr} AS {alias}")
        return ", ".join(parts)

    # --- what the export is -------------------------------------------------------------------

    def check_is_export(self) -> None:
        nsys_tables = [
            t
            for t in self.tables
            if t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) or t in (NVTX, *META_TABLES)
        ]
        if "StringIds" not in self.tables or not nsys_tables:
            raise TraceError(
                "an SQLite database, but not an Nsight Systems export (no StringIds /"
                " CUPTI_ACTIVITY_KIND_* tables)",
                self.path,
            )
        if KERNEL not in self.tables:
            if self.has_rows(GRAPH_TRACE):
                raise TraceError(
                    "no CUPTI_ACTIVITY_KIND_KERNEL table: every kernel ran inside CUDA graphs"
                    " captured with --cuda-graph-trace=graph; re-capture with"
                    " --cuda-graph-trace=node",
                    self.path,
                )
            if not (self.has_rows(MEMCPY) or self.has_rows(MEMSET)):
                raise TraceError(
                    "empty capture: no CUPTI_ACTIVITY_KIND_KERNEL table and no other GPU activity; "
                    "capture with nsys profile --trace=cuda",
                    self.path,
                )
            raise TraceError(
                "no CUPTI_ACTIVITY_KIND_KERNEL table: the capture recorded copies but no kernels",
                self.path,
            )

    def meta(self) -> dict:
        meta: dict = {}
        table = next((t for t in META_TABLES if t in self.tables), None)
        values = dict(self.sql(f'SELECT name, value FROM "{table}"')) if table else {}
        meta["nsys_schema_version"] = _text(values.get("EXPORT_SCHEMA_VERSION", ""))
        meta["nsys_version"] = _text(values.get("EXPORT_PRODUCT_VERSION", ""))
        if "TARGET_INFO_SESSION_START_TIME" in self.tables and "utcEpochNs" in self.cols(
            "TARGET_INFO_SESSION_START_TIME"
        ):
            row = self.sql("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
            if row and _int64(row[0][0]) is not None:
                meta["capture_start_utc_ns"] = _int64(row[0][0])
        if "ANALYSIS_DETAILS" in self.tables and {"startTime", "stopTime"} <= set(
            self.cols("ANALYSIS_DETAILS")
        ):
            row = self.sql("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")
            start, stop = (_int64(row[0][0]), _int64(row[0][1])) if row else (None, None)
            if start is not None and stop is not None:
                meta["capture_start_ns"], meta["capture_end_ns"] = start, stop
                if 0 <= stop - start < 1 << 62:  # events count from the session's start
                    meta["capture_window_ns"] = (0, stop - start)
        return meta


def _int64(value: object) -> int | None:
    """An SQLite value as an int64, None when it is not one (NULL, text, blob, out of range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if -(1 << 63) <= value < (1 << 63) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def schema_warnings(version: str) -> list[str]:
    """A warning when the export's schema version is not one the readers were written against
    (2.9 of nsys 2022.2 to 3.x of current nsys): tables are still read by column name."""
    try:
        major, minor = (int(p) for p in str(version).split(".")[:2])
    except ValueError:
        major = minor = -1
    if (major, minor) >= KNOWN_SCHEMAS[0] and major <= KNOWN_SCHEMAS[1][0]:
        return []
    shown = f"schema version {version!r}" if version else "no export schema version"
    return [
        f"nsys export with {shown}, not one verifyprof knows (2.9 to 3.x): read by column name;"
        " check the numbers"
    ]


class NsysStrings:
    """Maps nsys ``StringIds`` ids to ``Trace.strings`` ids, fetching only the ids asked for."""

    def __init__(self, export: NsysExport, strings: StringTable):
        self.export = export
        self.strings = strings
        self.known: dict[int, int] = {}
        self.not_utf8: list[int] = []  # nsys ids whose text was not UTF-8
        self.dangling: set[int] = set()  # ids asked for that StringIds does not hold

    def map(self, nsys_ids: np.ndarray) -> np.ndarray:
        """Trace string ids of nsys ids (-1/NULL -> -1; unknown ids -> "<string N>")."""
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
        before = self.export.undecodable
        for i in range(0, len(ids), 50_000):
            chunk = ",".join(map(str, ids[i : i + 50_000]))
            values.update(self.export.sql(f"SELECT id, value FROM StringIds WHERE id IN ({chunk})"))
        if self.export.undecodable > before:  # which ones: those the decoder marked
            self.not_utf8 += [i for i in ids if "\ufffd" in (values.get(i) or "")]
        self.dangling.update(i for i in ids if not isinstance(values.get(i), str))
        texts = [v if isinstance(v := values.get(i), str) else f"<string {i}>" for i in ids]
        for i, sid in zip(ids, self.strings.intern(texts)):
            self.known[i] = int(sid)


def os_pid(global_id: np.ndarray) -> np.ndarray:
    """OS pid from a globalPid/globalTid: ``<hw:8><vm:8><pid:24><tid:24>``; -1 stays -1."""
    return np.where(global_id >= 0, (global_id >> 24) & 0xFFFFFF, NO_ID)


def model_table(columns: dict[str, np.ndarray], dtypes: dict[str, str]) -> pd.DataFrame:
    """The model table, sorted by start (gathered column by column to bound peak memory)."""
    import pandas as pd

    if not columns:
        columns = {c: np.empty(0, dtype=dt) for c, dt in dtypes.items()}
    start = columns["start"]
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        order = np.argsort(
            start, kind="stable"
        )  # exports append per-stream chunks: few sorted runs, cheap
        for name in list(columns):
            columns[name] = columns[name][order]
    return pd.DataFrame(
        {c: columns.pop(c).astype(dt, copy=False) for c, dt in dtypes.items()}, copy=False
    )


def readable_database(path: Path) -> Path:
    """The file to open for ``path``: itself, or, for a WAL-mode database whose ``-wal`` still
    holds content (which the immutable open would not see), a checkpointed copy in the cache."""
    wal = path.with_name(path.name + "-wal")
    try:
        pending = is_wal_mode(read_head(path)) and wal.is_file() and wal.stat().st_size > 0
    except OSError:
        pending = False
    if not pending:
        return path
    from verifyprof.trace.cache import cache_dir, cache_fault, checkpointed_copy

    try:
        return checkpointed_copy(path, wal)
    except OSError as exc:  # the cache folder cannot even be searched (no x permission)
        raise cache_fault(path, cache_dir(), exc) from None


def check_header(path: Path) -> None:
    regular_file(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(100)
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror}", path) from None
    problem = sqlite_header_problem(head, path.stat().st_size)
    if problem:
        raise TraceError(problem, path)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
