"""A one-file nsys breakdown's big read, started before the analysis loads.

The CLI's ``breakdown`` imports pandas and the analysis (~0.3 s on one core) before the run
reaches the one read of the export's kernel and runtime tables (~0.9 CPU-s on every core:
:mod:`verifyprof.trace.nsys.shared_read`). SQLite steps without the GIL, so started here first,
in threads, the read runs beside those imports; the run takes its result when it gets there, or
drops it if it reads another way. This module and what the read needs import no pandas. Where
the run would first make a copy to read (a ``.sqlite.gz``, an ``.nsys-rep``, a WAL database's
checkpoint), nothing is read ahead: the run makes the copy, once.
"""

from __future__ import annotations

import sys
from pathlib import Path

from verifyprof.pipeline.map_task import default_workers
from verifyprof.trace.formats import is_wal_mode, read_head
from verifyprof.trace.nsys.export import ProcessFilter, readable_database
from verifyprof.trace.nsys.shared_read import drop_ahead, read_ahead
from verifyprof.trace.shares import process_shares
from verifyprof.trace.sources import NSYS_KINDS, nsys_sqlite, sniff


def start_read_ahead(traces: list[str], workers: int | None, scheduler: str | None) -> None:
    """Read the big tables ahead for the shares a run of ``traces`` with ``workers`` local workers
    (None: one per CPU) would map: one plain nsys SQLite export, mapped on this machine."""
    if len(traces) != 1 or scheduler is not None or (workers is not None and workers < 2):
        return
    if sys.platform != "linux":  # the workers start afresh: they could not take the read
        return
    try:  # a folder or glob is mapped file by file: no read thread may run as its workers fork
        a_file = Path(traces[0]).is_file()
    except OSError:  # the run says what is wrong with it
        return
    if a_file:
        read_ahead(lambda: _plain_export_shares(Path(traces[0]), workers))


def drop_read_ahead() -> None:
    """After a breakdown, ended or failed: nothing read early is kept for a later run."""
    drop_ahead()


def _plain_export_shares(
    path: Path, workers: int | None
) -> tuple[Path, list[ProcessFilter]] | None:
    """The export and shares of a plain SQLite export, None for any other file."""
    if not path.is_file() or sniff(path) != "nsys-sqlite" or is_wal_mode(read_head(path)):
        return None  # a copy to make first (or nothing to read): the run makes it
    export, shares = export_and_shares((path, "nsys-sqlite", path), workers)
    return (export, shares) if export is not None and shares else None


def one_file(path: Path) -> tuple[Path, str | None, Path | None]:
    """A file's format and, for nsys, the plain SQLite export to read (a decompressed or exported
    copy, found or made once): (path, kind or None for a directory, export or None)."""
    path = Path(path)
    kind = sniff(path) if path.is_file() else None
    return path, kind, nsys_sqlite(path, kind) if kind in NSYS_KINDS else None


def export_and_shares(
    found: tuple[Path, str | None, Path | None], workers: int | None
) -> tuple[Path | None, list[ProcessFilter] | None]:
    """The SQLite export of an nsys file (``.sqlite``, ``.sqlite.gz``, ``.nsys-rep``) and shares of
    its processes, one per local worker (``workers``; None: one per CPU); (None, None) for other
    files or when it is read whole."""
    _, kind, sqlite = found
    if kind not in NSYS_KINDS or sqlite is None:
        return None, None
    workers = workers or default_workers(1 << 30)
    if workers < 2:
        return None, None
    export = readable_database(sqlite)  # the same cached copy, export or WAL checkpoint as the read
    return export, process_shares(export, workers)
