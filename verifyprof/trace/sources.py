"""Readers: every trace format into one columnar :class:`~verifyprof.trace.events.Trace`.

``load_trace`` sniffs the input (by content, not only by suffix) and dispatches:

* nsys SQLite export (``.sqlite``, or gzipped ``.sqlite.gz``, decompressed once into the user
  cache): :mod:`verifyprof.trace.nsys.reader`
* Nsight Systems report (``.nsys-rep``): exported once to SQLite by
:mod:`verifyprof.trace.nsys.report_cache`
* PyTorch profiler / Kineto JSON (``.json``, ``.json.gz``), one file, a directory of per-rank
  files, or a glob: :mod:`verifyprof.trace.kineto.reader`

Inputs are never modified: SQLite is opened read-only, and caches are written beside them.
"""

from __future__ import annotations

import glob as _glob
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from verifyprof.contracts.errors import TraceError
from verifyprof.contracts.plumbing.paths import is_pattern
from verifyprof.trace.formats import (
    GZIP_MAGIC,
    KINETO_SUFFIXES,
    NSYS_SUFFIXES,
    SQLITE_MAGIC,
)
from verifyprof.trace.path_checks import is_directory, list_directory

if TYPE_CHECKING:  # Trace (pandas) only in annotations: sniffing and expanding names import no
    # pandas, so a command refused before any read (pipeline.inputs) has not paid for it
    from verifyprof.trace.events import Trace
    from verifyprof.trace.nsys.export import ProcessFilter


_BREAKDOWN_SCHEMA = re.compile(rb'"schema"\s*:\s*"verifyprof\.breakdown/')


def is_breakdown_json(path: Path) -> bool:
    """Whether ``path`` is a ``breakdown --json`` document rather than a trace (the one test:
    every command sniffs with this and :func:`sniff`)."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        head = handle.read(4096)
        if head.startswith(GZIP_MAGIC):  # a kept breakdown gzipped (breakdown.json.gz) says so
            handle.seek(0)
            try:
                return bool(_BREAKDOWN_SCHEMA.search(_gzip_head(handle, path, 4096)))
            except TraceError:
                return False  # not readable as gzip: sniff names the problem
    return bool(_BREAKDOWN_SCHEMA.search(head)) or (
        path.suffix == ".json" and b'"steps"' in head and b'"traceEvents"' not in head
    )


def sniff(path: Path) -> str:
    """'nsys-sqlite', 'nsys-rep', 'kineto' or raise TraceError naming the file."""
    if is_directory(path):  # TraceError for what cannot be read, or would block (a FIFO)
        return "kineto"
    try:
        with path.open("rb") as handle:  # opened once: the gzip's inner head read from it too
            head = handle.read(64)
            inner = _gzip_head(handle, path) if head.startswith(GZIP_MAGIC) else b""
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror}", path) from None
    if not head:
        raise TraceError("empty file", path)
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if path.suffix == ".nsys-rep" or path.suffix == ".qdrep":
        return "nsys-rep"
    if head.startswith(GZIP_MAGIC):
        if inner.startswith(SQLITE_MAGIC):
            return "nsys-sqlite-gz"
        if path.name.endswith(".sqlite.gz") and inner.lstrip()[:1] not in (
            b"{",
            b"[",
        ):  # named an export, holds neither
            raise TraceError(
                "not an nsys SQLite export: the gzip holds no SQLite file (nor PyTorch-profiler"
                " JSON)",
                path,
            )
        return "kineto"
    if head.lstrip()[:1] in (b"{", b"["):
        return "kineto"
    raise TraceError(
        "not a trace: expected an nsys SQLite export, a .nsys-rep, or PyTorch-profiler JSON(.gz)",
        path,
    )


def _gzip_head(handle: BinaryIO, path: Path, size: int = 16) -> bytes:
    """The first ``size`` bytes inside a gzip file, read from its open handle."""
    import gzip
    import zlib

    try:
        handle.seek(0)
        with gzip.GzipFile(fileobj=handle, mode="rb") as inner:
            return inner.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip: {exc}", path) from None


# verifyprof's own JSON outputs, which sit beside traces in a capture folder and are not traces
NOT_TRACES = (
    "manifest.json",
    "results.json",
    "summary.json",
    "workload.json",
    "breakdown.json",
    "breakdown.json.gz",
    "whatif.json",
    "kernels.json",
)


def expand(spec: str | Path) -> list[Path]:
    """A path, a directory or a glob -> the files it names.

    A directory is a capture folder (``verifyprof capture``'s or the workload's: the nsys export
    or report beside ``manifest.json``; SQLite preferred, it needs no nsys; SGLang's torch traces
    in ``torch/``) or a directory of per-rank Kineto files.
    """
    text = str(spec)
    if is_pattern(text):
        paths = sorted(Path(p) for p in _glob.glob(text))
        if not paths:
            raise TraceError("glob matches no files", text)
        captures = [p for p in paths if is_directory(p) and (p / "manifest.json").is_file()]
        if captures:  # not one run's rank files: separate captures, each a run of its own
            names = ", ".join(str(p) for p in captures[:4]) + (", ..." if len(captures) > 4 else "")
            raise TraceError(
                f"glob matches {len(captures)} capture folder(s) ({names}): a glob is one run's"
                " files; give each capture as an argument of its own (whatif CAP1 CAP2: several"
                " captures of one program)",
                text,
            )
        return paths
    path = Path(text)
    if not is_directory(path):
        return [path]
    files = sorted(p for p in list_directory(path) if p.is_file())
    nsys = nsys_captures(files)
    if (
        len(nsys) > 1 and (path / "manifest.json").is_file()
    ):  # a capture folder: one capture, one trace
        raise TraceError(
            f"folder holds several nsys traces ({', '.join(p.name for p in nsys)}): name one", path
        )
    if nsys:
        return nsys
    paths = [p for p in files if p.name.endswith(KINETO_SUFFIXES) and p.name not in NOT_TRACES]
    if not paths and (path / "torch").is_dir():
        return expand(path / "torch")
    if not paths:
        from verifyprof.trace.path_checks import kept_breakdown

        kept = kept_breakdown(path)
        if kept is not None:  # what reads it is elsewhere: say where, not that nothing is here
            raise TraceError(
                f"a capture kept as its breakdown ({kept.name}), no trace: breakdown and kernels"
                " read traces; give the folder to whatif, compare or report",
                path,
            )
        raise TraceError(
            "folder holds no trace: no nsys export (.sqlite, .sqlite.gz, .nsys-rep) and no"
            " PyTorch-profiler trace files (*.json, *.json.gz)",
            path,
        )
    return paths


def nsys_captures(files: list[Path]) -> list[Path]:
    """One file per nsys capture among ``files``: ``trace.sqlite`` beside ``trace.sqlite.gz`` or
    ``trace.nsys-rep`` is one capture in two forms (its SQLite read); files of other names are
    other captures (ranks), every one kept, whatever its form."""
    chosen: dict[str, tuple[int, Path]] = {}
    for p in files:
        for rank, suffix in enumerate(NSYS_SUFFIXES):
            if p.name.endswith(suffix):
                stem = p.name[: -len(suffix)]
                if stem not in chosen or rank < chosen[stem][0]:
                    chosen[stem] = (rank, p)
                break
    return sorted(p for _, p in chosen.values())


NSYS_KINDS = ("nsys-sqlite", "nsys-sqlite-gz", "nsys-rep")


def nsys_sqlite(path: Path, kind: str | None = None) -> Path:
    """The plain SQLite export to read for an nsys file: itself, its decompressed copy (made once,
    cached), or the cached export of an ``.nsys-rep`` (exported on first use)."""
    kind = kind or sniff(path)
    if kind == "nsys-sqlite-gz":
        from verifyprof.trace.cache import cache_dir, cache_fault, gunzipped

        try:
            return gunzipped(path, ".sqlite")
        except OSError as exc:  # the cache folder cannot even be searched (no x permission)
            raise cache_fault(path, cache_dir(), exc) from None
    if kind == "nsys-rep":
        from verifyprof.trace.nsys.report_cache import sqlite_for_report

        return sqlite_for_report(path)
    if kind != "nsys-sqlite":
        raise TraceError("not an nsys export", path)
    return path


def _read_nsys(paths: list[Path], kind: str, processes, sqlite: Path | None) -> Trace:
    from verifyprof.trace.nsys.reader import read_nsys_sqlite

    trace = read_nsys_sqlite(sqlite or nsys_sqlite(paths[0], kind), processes)
    trace.source = [paths[0]]
    return trace


def _read_kineto(paths: list[Path], kind: str, processes, sqlite: Path | None) -> Trace:
    from verifyprof.trace.kineto.reader import read_kineto

    return read_kineto(paths)


# The reader of each format :func:`sniff` names (a new format: one entry here, see
# docs/guides/add-a-trace-format.md). Only Kineto reads several files (ranks) as one trace.
READERS: dict[str, Callable[[list[Path], str, Any, Path | None], Trace]] = {
    "nsys-sqlite": _read_nsys,
    "nsys-sqlite-gz": _read_nsys,
    "nsys-rep": _read_nsys,
    "kineto": _read_kineto,
}
MANY_FILES = ("kineto",)


def load_trace(
    spec: str | Path,
    processes: ProcessFilter | None = None,
    kind: str | None = None,
    sqlite: Path | None = None,
) -> Trace:
    """Read any supported trace into the event model; ``processes``: only those processes' events
    of an nsys export (one share of a per-process map; other formats ignore it). ``kind`` and
    ``sqlite``: one file's format and SQLite export as the caller already found them (so a
    command sniffs and checks the cache once)."""
    paths = expand(spec)
    kinds = [(kind if len(paths) == 1 and kind else sniff(p)) for p in paths]
    if len(paths) > 1 and any(k not in MANY_FILES for k in kinds):
        raise TraceError(
            "several nsys files make no one trace here: breakdown, whatif, report and compare map"
            " them rank by rank; for this command give one file (or a Kineto rank directory)",
            spec,
        )
    return READERS[kinds[0]](paths, kinds[0], processes, sqlite)
