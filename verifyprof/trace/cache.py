"""A per-user cache for files derived from traces (decompressed exports, nsys exports, WAL copies).

* **Where**: ``$VERIFYPROF_CACHE``, else ``$XDG_CACHE_HOME/verifyprof``, else
``~/.cache/verifyprof``.
* **Keys**: a derived file is named by the source's resolved path, size and mtime, so an edited or
  replaced source is never answered from a stale entry.
* **Writes** are atomic (temp file, then rename; Ctrl-C, SIGTERM or SIGHUP meanwhile remove the
  temp file) and checked before they are kept: a decompressed or exported SQLite file must have a
  whole SQLite header, else nothing is cached. Reused entries are checked the same way, and
  rebuilt when they fail.
* **Blame**: a fault of the cache (read-only or missing directory, disk full) is reported as the
  cache's, naming the cache directory and the user's input, never as a corrupt input.
* **Pruning**: after each new entry, entries unused for ``$VERIFYPROF_CACHE_MAX_AGE_DAYS`` (default
  30) are removed, then the oldest until the cache holds at most ``$VERIFYPROF_CACHE_MAX_BYTES``
  (default 20 GiB; suffixes K, M, G accepted). Reuse refreshes an entry's mtime.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from verifyprof.contracts.errors import TraceError
from verifyprof.contracts.plumbing.outputs import cleanup_on_signals
from verifyprof.contracts.plumbing.paths import name_bytes, sqlite_uri
from verifyprof.trace.formats import read_head, sqlite_header_problem

MAX_AGE_ENV = "VERIFYPROF_CACHE_MAX_AGE_DAYS"
MAX_BYTES_ENV = "VERIFYPROF_CACHE_MAX_BYTES"
DEFAULT_MAX_AGE_DAYS = 30.0
DEFAULT_MAX_BYTES = 20 << 30
STALE_TMP_S = 86_400  # temp files older than this belong to a run that died


class CacheWriteError(TraceError):
    """The cache could not store a derived file (permissions, disk full): the cache's fault."""


def cache_dir() -> Path:
    root = os.environ.get("VERIFYPROF_CACHE") or os.environ.get("XDG_CACHE_HOME")
    base = Path(root) if root else Path.home() / ".cache"
    return base / "verifyprof" if not os.environ.get("VERIFYPROF_CACHE") else base


def cache_key(*paths: Path) -> str:
    text = "|".join(f"{p.resolve()}|{(s := p.stat()).st_size}|{s.st_mtime_ns}" for p in paths)
    return hashlib.sha256(name_bytes(text)).hexdigest()[:16]  # a name's bytes, UTF-8 or not


def cache_fault(source: Path, directory: Path, exc: OSError) -> CacheWriteError:
    why = exc.strerror or str(exc)
    return CacheWriteError(
        f"cannot write its derived copy to the cache {directory} ({why}): free space there or set "
        "VERIFYPROF_CACHE to a writable directory",
        source,
    )


def stored_sqlite_problem(path: Path) -> str | None:
    """Why a cached (or just written) SQLite file is not whole, or None."""
    try:
        problem = sqlite_header_problem(read_head(path), path.stat().st_size)
        if problem is None:
            con = sqlite3.connect(sqlite_uri(path), uri=True)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
        return problem
    except (OSError, sqlite3.DatabaseError) as exc:
        return str(exc)


def cached(source: Path, target: Path, make: Callable[[Path], None]) -> Path:
    """``target``, made by ``make(tmp)`` unless a whole copy is already there.

    ``make`` raises TraceError for faults of the source; OSError from writing is the cache's."""
    if target.exists():
        if stored_sqlite_problem(target) is None:
            _touch(target)
            return target
        target.unlink(missing_ok=True)  # a damaged entry: rebuild it
    directory = target.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_fault(source, directory, exc) from None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with cleanup_on_signals():  # SIGTERM / SIGHUP mid-write: the temp file goes, then the process
        try:
            make(tmp)
            problem = stored_sqlite_problem(tmp)
            if problem is not None:
                raise TraceError(
                    f"its derived SQLite copy is not whole ({problem}); nothing cached", source
                )
            os.replace(tmp, target)
        except OSError as exc:
            raise cache_fault(source, directory, exc) from None
        finally:
            tmp.unlink(missing_ok=True)
    prune(directory)
    return target


def gunzipped(path: Path, suffix: str) -> Path:
    """The decompressed content of ``path`` (gzip), made once and reused while ``path`` is
    unchanged."""
    target = cache_dir() / f"{path.name.removesuffix('.gz')}.{cache_key(path)}{suffix}"

    def make(tmp: Path) -> None:
        try:
            src = gzip.open(path, "rb")
        except OSError as exc:
            raise TraceError(f"cannot read: {exc.strerror or exc}", path) from None
        with src, open(tmp, "wb") as dst:
            while True:
                try:
                    block = src.read(4 << 20)
                except (
                    OSError,
                    EOFError,
                    zlib.error,
                ) as exc:  # reading the input: the input's fault
                    raise TraceError(f"corrupt or truncated gzip: {exc}", path) from None
                if not block:
                    break
                dst.write(block)  # OSError here (disk full) is the cache's

    return cached(path, target, make)


def checkpointed_copy(path: Path, wal: Path) -> Path:
    """A WAL-mode SQLite file with content still in its ``-wal``: a copy with the WAL folded in
    (the input and its folder stay untouched; reading in place would create ``-shm`` beside it)."""
    target = cache_dir() / f"{path.name}.{cache_key(path, wal)}.checkpointed.sqlite"

    def make(tmp: Path) -> None:
        shutil.copyfile(path, tmp)
        shutil.copyfile(wal, tmp.with_name(tmp.name + "-wal"))
        try:
            con = sqlite3.connect(tmp)
            try:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                con.execute("PRAGMA journal_mode=DELETE")
            finally:
                con.close()
        except sqlite3.DatabaseError as exc:
            raise TraceError(
                f"corrupt SQLite file or -wal ({' '.join(str(exc).split())[:300]})", path
            ) from None
        finally:
            for extra in ("-wal", "-shm"):
                tmp.with_name(tmp.name + extra).unlink(missing_ok=True)

    return cached(path, target, make)


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # a read-only cache still answers
        pass


def _env_number(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip().upper()
    if not text:
        return default
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        return default
    return value if value >= 0 else default


def prune(directory: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove entries older than the age limit, then the least recently used beyond the size
    limit (see the module doc). Only verifyprof's own entries (``*.sqlite`` and sidecars,
    stale temp files) are touched. Returns the removed paths."""
    directory = cache_dir() if directory is None else directory
    now = time.time() if now is None else now
    max_age = _env_number(MAX_AGE_ENV, DEFAULT_MAX_AGE_DAYS) * 86_400
    max_bytes = _env_number(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)
    entries = []
    removed: list[Path] = []
    try:
        listing = list(directory.iterdir())
    except OSError:
        return removed
    for p in listing:
        try:
            st = p.lstat()
        except OSError:
            continue
        if p.name.endswith(".tmp") or ".tmp" in p.name:
            if now - st.st_mtime > STALE_TMP_S:
                removed += _remove(p)
            continue
        if p.suffix == ".sqlite" and p.is_file():
            entries.append((st.st_mtime, st.st_size, p))
    entries.sort()
    total = sum(size for _, size, _ in entries)
    for mtime, size, p in entries:
        if now - mtime > max_age or total > max_bytes:
            removed += _remove(p)
            total -= size
    return removed


def _remove(path: Path) -> list[Path]:
    gone = []
    for p in (path, path.with_name(path.name + ".json"), path.with_name(path.name + ".lock")):
        try:
            p.unlink()
            gone.append(p)
        except OSError:
            pass
    return gone
