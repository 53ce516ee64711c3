"""One read of an export's big tables for every share of its processes.

An export read in shares (:mod:`verifyprof.trace.shares`) used to be scanned whole once per
share: each worker's SQL filter on ``globalPid`` / ``globalTid`` still steps every row of the
kernel and runtime tables, so 8 shares stepped them 8 times. Here the process that maps the
shares reads those two tables once, on all its cores (:func:`read_once`), and marks each row
with its share in numpy, by the shares' own filter (``(column >> 24) IN (...)``, the last share
every other process). Map workers forked from it inherit the columns and the marks
(copy-on-write) and each gathers its own share's rows (:func:`take_share`, the workers at once,
not the map's process alone before they fork) instead of querying them; the small tables (copies,
graphs, NVTX, names, payloads) are still queried per share.

A share's rows are the ones its SQL filter selects, in the same (rowid) order, so its trace is
the same to the nanosecond. The split is made only where that holds: the filter's column is the
one the query reads, and every value of it read was an integer (no NULL, REAL or text, whose SQL
comparison numpy's would not reproduce). Otherwise, when the tables hold more than
:data:`MAX_ROWS` rows (the map's process would hold more than a share's memory), and when the one
read fails, the shares read as before (and name the file's problem).

The one read may start early, in a thread (:func:`read_ahead`: the CLI starts it before pandas
and the analysis load, which take the GIL while SQLite steps without it); :func:`read_once` then
waits for it and takes its split if it read the same file for the same shares, else drops it and
reads. Either way no read thread runs once :func:`read_once` is entered (its workers fork).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verifyprof.trace.nsys.activity import (
    API_SPEC,
    KERNEL_SPEC,
    api_candidates,
    api_slices,
    kernel_slices,
)
from verifyprof.trace.nsys.columns import Rows, SlicedQuery, release_free_memory
from verifyprof.trace.nsys.export import DRIVER, KERNEL, RUNTIME, NsysExport, ProcessFilter

# the big tables, the tables each reads, and the column a share's filter compares (and its alias)
KERNELS = "kernels"
API = "api"
FILTER_COLUMNS = {KERNELS: ("globalPid", "gpid"), API: ("globalTid", "gtid")}
SHARED_TABLES = {KERNELS: (KERNEL,), API: (RUNTIME, DRIVER)}

# rows (by rowid span) of the big tables read once at most: the map's process holds them all
# until its workers have forked (a 1M-kernel, 8-rank export: 1.9M rows, ~110 MB)
MAX_ROWS = 2_500_000
ENABLED = True  # False: every share queries its own rows (bench_ranks compares the two)
FEW_PROCESSES = 16  # shares or named processes split by one pass over the rows each

# (file identity, share) -> (its number, {big table name: (every row's columns, every row's
# share)}); filled by read_once in the map's own process, taken in the workers it forks, each of
# which gathers its own rows (in parallel, where the map's process would do it alone)
Split = tuple[dict[str, np.ndarray], np.ndarray]
_SHARES: dict[tuple[tuple, ProcessFilter], tuple[int, dict[str, Split]]] = {}


@dataclass
class _Ahead:
    """A read started early: its thread, and once it ends the (file identity, shares) it read
    and its split (None: not split); no key where it failed (read_once then reads)."""

    thread: threading.Thread | None = None
    key: tuple | None = None
    split: dict[str, Split] | None = None


_AHEAD: list[_Ahead] = []  # the read started early, until read_once takes it


def read_ahead(find: Callable[[], tuple[Path, list[ProcessFilter]] | None]) -> None:
    """Start, in a daemon thread, the read :func:`read_once` would make of the export and shares
    that ``find`` names (None: nothing to read ahead); any failure is left to the run's own
    read."""
    ahead = _Ahead()

    def read() -> None:
        with contextlib.suppress(Exception):
            found = find()
            if found is None or not ENABLED:
                return
            path, shares = found
            key = (_identity(path), tuple(shares))
            ahead.split = _read_split(path, shares)
            ahead.key = key  # only once read: a read that failed here is made again by read_once

    ahead.thread = threading.Thread(target=read, name="verifyprof-read-ahead", daemon=True)
    _AHEAD.append(ahead)
    ahead.thread.start()


def drop_ahead() -> None:
    """Forget every read started early that no run took (the run failed first, or read another
    way): a program that calls the CLI's ``main()`` would otherwise hold its split (~110 MB for
    1M kernels) until its next read. A thread still reading ends by itself; nothing waits."""
    _AHEAD.clear()


def _taken_ahead(key: tuple, shares: list[ProcessFilter]) -> tuple[bool, dict[str, Split] | None]:
    """(whether a read started early read this file for these shares, its split): every such
    read ended first (none runs when the workers fork)."""
    found: tuple[bool, dict[str, Split] | None] = (False, None)
    while _AHEAD:
        ahead = _AHEAD.pop()
        if ahead.thread is not None:
            ahead.thread.join()
        if ahead.key == (key, tuple(shares)):
            found = (True, ahead.split)
    return found


def big_jobs(export: NsysExport, api_names: dict[int, str]) -> dict[str, SlicedQuery]:
    """The kernel and runtime/driver queries of :func:`~verifyprof.trace.nsys.reader`'s read."""
    return {
        KERNELS: SlicedQuery(kernel_slices(export), KERNEL_SPEC, KERNEL),
        API: SlicedQuery(
            [q for t in (RUNTIME, DRIVER) for q in api_slices(export, t, api_names)],
            API_SPEC,
            f"{RUNTIME} or {DRIVER}",
        ),
    }


@contextlib.contextmanager
def read_once(path: Path, shares: list[ProcessFilter]) -> Iterator[None]:
    """While inside: the big tables of ``path`` read once and split by ``shares``, for the map's
    workers forked here to take (nothing is kept when a split would not be exact)."""
    key = _identity(path)
    taken, split = _taken_ahead(key, shares)
    try:
        if not taken:
            split = _read_split(path, shares) if ENABLED else None
    except Exception:  # noqa: BLE001 - the shares' own reads name the problem
        split = None
    release_free_memory()  # the read's Arrow batches: the workers forked next start without them
    for number, share in enumerate(shares if split else []):
        _SHARES[(key, share)] = (number, split)
    try:
        yield
    finally:
        for share in shares if split else []:
            _SHARES.pop((key, share), None)


def take_share(export: NsysExport) -> dict[str, Rows] | None:
    """This share's rows of the big tables, if the process that forked this one read them (taken:
    a second read of the share queries SQLite)."""
    if export.processes is None or not _SHARES:
        return None
    try:
        key = _identity(export.path)
    except OSError:
        return None
    taken = _SHARES.pop((key, export.processes), None)
    if taken is None:
        return None
    number, tables = taken
    out = {}
    for name, (columns, share_of_row) in tables.items():
        rows = np.flatnonzero(share_of_row == number)  # in rowid order, as its SQL filter reads
        out[name] = Rows.of({c: v[rows] for c, v in columns.items()}, SHARED_TABLES[name][0])
    return out


def _identity(path: Path) -> tuple:
    stat = os.stat(path)
    return (str(Path(path).resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _read_split(path: Path, shares: list[ProcessFilter]) -> dict[str, Split] | None:
    if not shares or not _a_partition(shares):
        return None  # a row in two shares: not one split
    with NsysExport(path) as export:
        export.check_is_export()
        for name, tables in SHARED_TABLES.items():
            column = FILTER_COLUMNS[name][0]
            if any(_filter_column(export, t) not in (column, None) for t in tables):
                return None  # a share would filter on another column than the one read
        jobs = big_jobs(export, api_candidates(export))
        if sum(int(job.offsets[-1]) for job in jobs.values()) > MAX_ROWS:
            return None  # the shares' own reads keep each process's memory to its share
        export.fetch(list(jobs.values()))
    split: dict[str, Split] = {}
    for name, job in jobs.items():
        alias = FILTER_COLUMNS[name][1]
        if alias not in job.exact:
            return None
        rows = job.rows()
        keys = rows.columns[alias] >> 24  # SQLite's >>: arithmetic
        split[name] = (rows.columns, _share_of_rows(keys, shares))
    return split


def _a_partition(shares: list[ProcessFilter]) -> bool:
    """Whether every row is in exactly one share: no process named twice, and the last share,
    if of the rest, excludes exactly the processes the others name."""
    named = [p >> 24 for share in shares[:-1] for p in set(share.pids)]
    if any(share.rest for share in shares[:-1]) or len(named) != len(set(named)):
        return False
    last = shares[-1]
    if not last.rest:
        return not set(named) & {p >> 24 for p in last.pids}
    return {p >> 24 for p in last.pids} == set(named)


def _share_of_rows(keys: np.ndarray, shares: list[ProcessFilter]) -> np.ndarray:
    """Each row's share: the share naming its process (``share.sql``), else the share of the
    rest (``len(shares)``: rows of no share)."""
    named = {p >> 24: i for i, share in enumerate(shares) if not share.rest for p in share.pids}
    rest = len(shares) - 1 if shares[-1].rest else len(shares)
    index = np.full(len(keys), rest, dtype=np.int16 if len(shares) < 1 << 15 else np.int64)
    if len(named) <= FEW_PROCESSES:  # one comparison each
        for key, share in named.items():
            index[keys == key] = share
    elif named:
        known = np.array(sorted(named), dtype=np.int64)
        share_of = np.array([named[int(k)] for k in known], dtype=index.dtype)
        at = np.minimum(np.searchsorted(known, keys), len(known) - 1)
        hit = known[at] == keys
        index[hit] = share_of[at[hit]]
    return index


def _filter_column(export: NsysExport, table: str) -> str | None:
    """The column a share's filter compares in ``table`` (``NsysExport.of_processes``), None when
    the table is absent."""
    cols = export.cols(table)
    if not cols:
        return None
    return "globalPid" if "globalPid" in cols else "globalTid" if "globalTid" in cols else ""
