"""What the user named, checked before anything opens it: one line naming the path and the cause.

``open()`` on a FIFO blocks until a writer appears and a character device never ends, so only
regular files (and directories, for Kineto rank files) are read. ``stat`` errors are told apart
(no such file, permission denied, a symlink loop) instead of all reading as "no such file".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verifyprof.contracts.errors import TraceError, path_problem
from verifyprof.contracts.manifest import MANIFEST
from verifyprof.contracts.plumbing.inputs import kind_of, require_regular


def stat_input(path: Path) -> os.stat_result:
    """``os.stat`` of an input, following symlinks; TraceError saying why it cannot be read."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise TraceError("broken symlink: its target does not exist", path) from None
        raise TraceError("no such file", path) from None
    except OSError as exc:
        raise TraceError(path_problem(exc, path), path) from None


def regular_file(path: Path) -> os.stat_result:
    """The stat of ``path`` when it is a regular file (symlinks followed); TraceError otherwise."""
    st = stat_input(path)
    require_regular(
        st.st_mode, path, "is a directory, not a trace file", _special_file(st), TraceError
    )
    return st


def _special_file(st: os.stat_result) -> str:
    return (
        f"{kind_of(st.st_mode)}, not a trace file: give a regular file (it would block or never"
        " end)"
    )


def is_directory(path: Path) -> bool:
    """True for a directory, False for a regular file; TraceError for anything else or an error."""
    st = stat_input(path)
    require_regular(st.st_mode, path, None, _special_file(st), TraceError)
    return stat.S_ISDIR(st.st_mode)


def list_directory(path: Path) -> list[Path]:
    """The entries of a directory, TraceError (permission denied, ...) naming it."""
    try:
        return list(path.iterdir())
    except OSError as exc:
        raise TraceError(f"cannot list the folder: {path_problem(exc, path)}", path) from None


KEPT = ("breakdown.json", "breakdown.json.gz")  # a kept capture's breakdown, plain or gzipped


def kept_breakdown(folder: Path) -> Path | None:
    """A capture folder kept as its breakdown (``manifest.json`` and ``breakdown.json``, or
    ``breakdown.json.gz``, no trace: bench/results): that breakdown; else None."""
    found = [k for k in KEPT if (folder / k).is_file()]
    if not found or not (folder / MANIFEST).is_file():
        return None
    if len(found) > 1:  # which is the capture's? a stale one would be read without a word
        raise TraceError(f"holds both {' and '.join(found)}: keep one", folder)
    kept = found[0]
    names = ("*.sqlite", "*.sqlite.gz", "*.nsys-rep", "*.json.gz", "*.pt.trace.json")
    traces = (p for n in names for p in folder.glob(n) if p.name not in KEPT)
    holds = next(traces, None) is not None or (folder / "torch").is_dir()
    return None if holds else folder / kept
