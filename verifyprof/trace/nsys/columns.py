"""Columnar reads from SQLite: query results as numpy columns, without Python tuples.

Queries run through the ADBC SQLite driver (Arrow record batches) on read-only connections,
several at once: pyarrow's ``read_next_batch`` / ``read_all`` release the GIL while SQLite
steps, so rowid slices of one table read in parallel. Numeric batches are copied straight from
their Arrow buffers into preallocated numpy columns and dropped, so a large table costs its
numpy columns plus a batch per thread, not a second Arrow copy.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from verifyprof.contracts.plumbing.cpus import usable_cpus
from verifyprof.contracts.plumbing.paths import sqlite_uri
from verifyprof.trace.events import NO_ID

BATCH_ROWS = 16_384
SLICE_ROWS = 50_000  # rows per rowid slice (at most 2 slices per CPU: 16 CPUs read 1M rows in 20)
MAX_THREADS = 16


def readonly_uri(path: Path) -> str:
    """An SQLite URI that opens ``path`` read-only and creates nothing beside it.

    ``immutable=1``: no locks and no ``-shm``/``-wal`` files, which ``mode=ro`` alone creates for a
    WAL-mode database (and fails on in a read-only folder). Content still in a ``-wal`` file is
    not seen this way: :mod:`~verifyprof.trace.nsys.export` reads such exports from a copy."""
    return sqlite_uri(Path(path).resolve())  # every byte of the name kept


def rowid_slices(
    table: str, select: str, where: str, lo: int, hi: int, rows: int | None = None
) -> list[tuple[str, int]]:
    """``SELECT select FROM table`` over rowids ``lo..hi`` in slices, each with its most rows.

    Rowid tables store rows in rowid order, so each slice is a range scan of its own pages.
    ``rows`` (the table's row count, when known) bounds a sparse span: rowids edited to huge or
    negative values then read as one slice sized by the count, not by the span."""
    cond = f" AND ({where})" if where else ""
    if rows is not None and rows < (hi - lo + 1) // 2:
        return [
            (f'SELECT {select} FROM "{table}" WHERE rowid >= {lo} AND rowid <= {hi}{cond}', rows)
        ]
    span = hi - lo + 1
    parts = max(1, min(-(-span // SLICE_ROWS), usable_cpus() * 2))
    bounds = [
        lo + span * k // parts for k in range(parts + 1)
    ]  # Python ints: exact up to int64 max
    last = len(bounds) - 2
    return [
        (
            (
                f'SELECT {select} FROM "{table}" WHERE rowid >= {a} AND rowid'
                f" {'<=' if i == last else '<'} {b - 1 if i == last else b}{cond}"
            ),
            b - a,
        )
        for i, (a, b) in enumerate(pairwise(bounds))
    ]


def run_queries(uri: str, jobs: list[Query]) -> None:
    """Run every job's queries on parallel connections; results land in the jobs."""
    tasks = [(job, i) for job in jobs for i in range(len(job.queries))]
    threads = max(1, min(len(tasks), usable_cpus(), MAX_THREADS))
    if threads == 1:
        for job, i in tasks:
            job.run(uri, i)
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda task: task[0].run(uri, task[1]), tasks))


def release_free_memory() -> None:
    """Hand the heap the reader's threads freed (Arrow batches) back to the OS, so that the
    next stage starts from the trace's own footprint (glibc keeps freed arena memory otherwise)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


class Query:
    """One or more SQL queries whose results a :class:`Rows` hands out; ``table`` names what
    they read, for errors."""

    queries: list[str]
    table: str = ""

    def run(self, uri: str, i: int) -> None:
        raise NotImplementedError

    def rows(self) -> Rows:
        raise NotImplementedError


def _reader(uri: str, query: str, batch_rows: int) -> tuple[_Closing, pa.RecordBatchReader]:
    """(its handles, RecordBatchReader) on a fresh read-only ADBC connection, through
    the driver manager's own bindings: its DB-API module imports ``pyarrow.dataset`` (and with it
    pandas, ~25 ms of a CLI run's start-up) for nothing a read here uses."""
    import adbc_driver_manager
    import adbc_driver_sqlite

    db = adbc_driver_sqlite.connect(uri)
    handles = [db]
    try:
        con = adbc_driver_manager.AdbcConnection(db)
        handles.append(con)
        stmt = adbc_driver_manager.AdbcStatement(con)
        handles.append(stmt)
        stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(batch_rows)})
        stmt.set_sql_query(query)
        stream, _ = stmt.execute_query()
        reader = pa.RecordBatchReader._import_from_c(stream.address)
        handles.append(reader)
        return _Closing(handles), reader
    except BaseException:
        _Closing(handles).close()
        raise


class _Closing:
    """The database, connection, statement and reader of one read, closed last to first."""

    def __init__(self, handles: list[Any]):
        self.handles = handles

    def close(self) -> None:
        """Every handle, even after one fails to close; then the first failure."""
        failed: BaseException | None = None
        for handle in reversed(self.handles):
            try:
                handle.close()
            except BaseException as err:  # noqa: BLE001 - raised below, after the rest closed
                failed = failed or err
        if failed is not None:
            raise failed


def _with_retry(work: Callable[[int], Any]) -> Any:
    """Run ``work(batch_rows)``; retry with one batch of all rows on an ADBC type-inference error.

    The driver infers a column's type from the first batch, so a column NULL there and typed
    later fails; one batch holding every row infers from all of them."""
    try:
        return work(BATCH_ROWS)
    except Exception as exc:
        if "Type mismatch" not in str(exc):
            raise
        return work(1 << 30)  # the driver takes an int; it does not preallocate


class TableQuery(Query):
    """One query into an Arrow table (small tables, and NVTX for its strings)."""

    def __init__(self, query: str | None, table: str = ""):
        self.queries = [query] if query else []
        self.result: pa.Table | None = None
        self.table = table

    def run(self, uri: str, i: int) -> None:
        def work(batch_rows: int) -> pa.Table:
            handles, reader = _reader(uri, self.queries[i], batch_rows)
            try:
                return reader.read_all()  # releases the GIL
            finally:
                handles.close()

        self.result = _with_retry(work)

    def rows(self) -> Rows:
        rows = Rows(self.result, self.table)
        self.result = None
        return rows


class SlicedQuery(Query):
    """Rowid-slice queries streamed batch by batch into preallocated numpy columns.

    Each slice writes its own region (sized by its rowid span), so slices run in parallel and
    Arrow batches are freed as soon as they are copied: peak memory is the numpy columns plus
    a batch per thread, not a second copy of the table."""

    def __init__(
        self,
        slices: list[tuple[str, int]],
        spec: dict[str, tuple[str, int | float]],
        table: str = "",
    ):
        self.table = table
        self.queries = [q for q, _ in slices]
        bounds = [n for _, n in slices]
        self.offsets = np.r_[0, np.cumsum(bounds)].astype(np.int64)
        self.filled = [0] * len(slices)
        self.spec = spec
        total = int(self.offsets[-1])
        self.columns = {name: np.empty(total, dtype=dtype) for name, (dtype, _) in spec.items()}
        # columns whose every value read was an integer (no NULL, REAL or fill): their numpy values
        # compare as SQLite compares the column's own values
        self.exact = set(spec)

    def run(self, uri: str, i: int) -> None:
        def work(batch_rows: int) -> None:
            handles, reader = _reader(uri, self.queries[i], batch_rows)
            try:
                pos = int(self.offsets[i])
                limit = int(self.offsets[i + 1])
                while True:
                    try:
                        batch = reader.read_next_batch()  # releases the GIL while SQLite steps
                    except StopIteration:
                        break
                    n = batch.num_rows
                    if pos + n > limit:
                        raise RuntimeError("slice returned more rows than its rowid span")
                    for name, (_, fill) in self.spec.items():
                        column = batch.column(name)
                        try:
                            _into(column, self.columns[name][pos : pos + n], fill)
                        except TypeError:
                            raise NotNumeric(name, str(column.type), self.table) from None
                        if column.null_count or not pa.types.is_integer(column.type):
                            self.exact.discard(name)
                    pos += n
                self.filled[i] = pos - int(self.offsets[i])
            finally:
                handles.close()

        _with_retry(work)

    def rows(self) -> Rows:
        """The filled rows, slices moved together (in place: each region only moves down)."""
        dst = 0
        for i, n in enumerate(self.filled):
            src = int(self.offsets[i])
            if src != dst:
                for column in self.columns.values():
                    column[dst : dst + n] = column[src : src + n]
            dst += n
        rows = Rows.of({name: column[:dst] for name, column in self.columns.items()}, self.table)
        self.columns = {}
        return rows


class NotNumeric(TypeError):
    """A column that must hold numbers holds text (or blobs): an edited or corrupt export."""

    def __init__(self, column: str, got: str, table: str = ""):
        where = f"{table}'s {column!r} column" if table else f"column {column!r}"
        super().__init__(f"{where} holds {got} values where numbers belong")


class Rows:
    """Query results as numpy columns; each column's buffers are released once taken."""

    def __init__(self, table: pa.Table | None, source: str = ""):
        self.source = source  # the export table the rows are from, for errors
        self.table = table if table is not None and table.num_rows else None
        self.n = self.table.num_rows if self.table is not None else 0
        self.columns: dict[str, np.ndarray] = {}
        self.invalid_utf8: dict[str, np.ndarray] = {}  # column -> rows whose text was not UTF-8

    @classmethod
    def of(cls, columns: dict[str, np.ndarray], source: str = "") -> Rows:
        """Rows of numpy columns of one length (a sliced read's, or a share of one)."""
        rows = cls(None, source)
        rows.columns = columns
        rows.n = len(next(iter(columns.values()))) if columns else 0
        return rows

    def take(self, name: str, dtype: str, fill: float = NO_ID) -> np.ndarray:
        if name in self.columns:
            return self.columns.pop(name).astype(dtype, copy=False)
        assert self.table is not None
        i = self.table.schema.get_field_index(name)
        column = self.table.column(i)
        self.table = self.table.remove_column(i)
        out = np.empty(len(column), dtype=dtype)
        pos = 0
        for chunk in column.chunks:
            try:
                _into(chunk, out[pos : pos + len(chunk)], fill)
            except TypeError:
                raise NotNumeric(name, str(chunk.type), self.source) from None
            pos += len(chunk)
        return out

    def is_null(self, name: str) -> np.ndarray:
        assert self.table is not None
        return self.table.column(name).is_null().to_numpy(zero_copy_only=False)

    def strings(self, name: str) -> pa.ChunkedArray:
        assert self.table is not None
        column = self.table.column(name)
        if pa.types.is_null(column.type):
            column = pa.chunked_array([pa.array([""] * len(column), pa.string())])
        column, bad = valid_utf8(column)
        if bad is not None:
            self.invalid_utf8[name] = bad
        return column


def valid_utf8(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, np.ndarray | None]:
    """``column`` as valid UTF-8 text and the rows that were not (None when all were): SQLite
    keeps whatever bytes a program wrote, the driver passes them on unchecked, and Python cannot
    decode them. Bad bytes become U+FFFD, as the sqlite3 reads of the export decode them; each
    distinct value is decoded once."""
    if not pa.types.is_string(column.type):
        return column, None
    try:
        column.validate(full=True)
        return column, None
    except pa.ArrowInvalid:
        pass
    encoded = pc.dictionary_encode(column.cast(pa.binary())).combine_chunks()
    raw = encoded.dictionary.to_pylist()
    text = [v.decode("utf-8", "replace") for v in raw]
    changed = np.array([t.encode("utf-8") != v for t, v in zip(text, raw)], dtype=bool)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    valid = encoded.indices.is_valid().to_numpy(zero_copy_only=False)
    fixed = pa.array(np.asarray(text, dtype=object)[np.where(valid, codes, 0)], pa.string())
    fixed = pc.if_else(pa.array(valid), fixed, pa.nulls(len(fixed), pa.string()))
    return pa.chunked_array([fixed]), np.flatnonzero(valid & changed[np.where(valid, codes, 0)])


def _into(chunk: pa.Array, dst: np.ndarray, fill: float) -> None:
    """Copy a numeric Arrow array into ``dst`` (NULL -> ``fill``) straight from its buffers.

    REAL values in an integer column that no integer of its type holds (inf, NaN, 1e300) read
    as missing too: an unsafe cast would make them whatever the CPU gives."""
    n = len(chunk)
    if not n:
        return
    if pa.types.is_null(chunk.type) or chunk.null_count == n:
        dst[:] = fill
        return
    if not (pa.types.is_integer(chunk.type) or pa.types.is_floating(chunk.type)):
        raise TypeError(f"expected a numeric column, got {chunk.type}")
    values = np.frombuffer(
        chunk.buffers()[1], dtype=chunk.type.to_pandas_dtype(), count=chunk.offset + n
    )[chunk.offset :]
    missing = None
    if chunk.null_count:
        bits = np.unpackbits(np.frombuffer(chunk.buffers()[0], dtype=np.uint8), bitorder="little")
        missing = ~bits[chunk.offset : chunk.offset + n].astype(bool)
    if values.dtype.kind == "f" and dst.dtype.kind in "iu":
        info = np.iinfo(dst.dtype)
        unusable = ~np.isfinite(values) | (values < float(info.min)) | (values >= info.max + 1.0)
        if unusable.any():
            missing = unusable if missing is None else missing | unusable
            values = np.where(unusable, 0.0, values)
    if missing is None:
        np.copyto(dst, values, casting="unsafe")
    else:
        np.copyto(dst, np.where(missing, fill, values), casting="unsafe")
