"""Every file verifyprof writes goes through here, so every output has the same guarantees:

* atomic: a temp file beside the target, fsynced, renamed over it, the directory fsynced; a
  crash, Ctrl-C, SIGTERM/SIGHUP or a full disk never leaves half a file where a good one was,
  nor a hidden temp file beside it;
* never onto an input: paths registered with :func:`protect` (the traces a command reads) are
  refused as outputs however they are spelled (``./x``, a symlink, a hard link);
* the target keeps what it was: a replaced file keeps its mode (a new one gets the umask's),
  a symlink is written through (its target replaced, the link kept), a device or FIFO
  (``/dev/full``) is written in place;
* standard output (``-``, ``/dev/stdout``, whatever opens file descriptor 1) is a stream, not a
  file: the output is copied to it whole once written, and gets it alone (the command prints
  nothing else there: :func:`writes_stdout`);
* no folders made: a missing parent directory is an error, not created;
* a failure is one line naming the file (:class:`VerifyprofError`, exit 2).

:func:`cleanup_on_signals` is what makes SIGTERM/SIGHUP unwind; other temp files (the trace
cache's) and the map's worker processes use it too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from verifyprof.contracts.bounds import require_finite
from verifyprof.contracts.errors import OutputClosed, VerifyprofError
from verifyprof.contracts.plumbing import inputs

_protected: set[str] = set()  # real paths of this process's inputs
_protected_ids: set[tuple[int, int]] = set()  # (st_dev, st_ino) of the same: hard links too
CLEANUP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def protect(
    inputs: Iterable[str | Path],
    outputs: Iterable[str | Path | None] = (),
    stdout_used_by: str | None = None,
) -> None:
    """Register ``inputs`` as never to be written, and check ``outputs`` against them now (before
    minutes of analysis, not after). At most one output may be standard output, and none when
    something else prints there (``stdout_used_by``: ``--json``)."""
    for path in inputs:
        _protected.add(os.path.realpath(path))
        with contextlib.suppress(OSError):
            st = os.stat(path)
            _protected_ids.add((st.st_dev, st.st_ino))
    given = [Path(out) for out in outputs if out is not None]
    on_stdout = [out for out in given if is_stdout(out)]
    if on_stdout and stdout_used_by is not None:
        raise VerifyprofError(
            f"is standard output, where {stdout_used_by} prints: write one of them to a file",
            on_stdout[0],
        )
    if len(on_stdout) > 1:
        raise VerifyprofError(
            f"is standard output, as {on_stdout[0]} already is: write one of them to a file",
            on_stdout[1],
        )
    for out in given:
        if out not in on_stdout:
            check_output(out)


def unprotect_all() -> None:
    """Forget every registered input (tests; a long-lived process between commands)."""
    _protected.clear()
    _protected_ids.clear()


def is_stdout(path: str | Path) -> bool:
    """``-``, or a path that opens what file descriptor 1 is (``/dev/stdout``,
    ``/proc/self/fd/1``, the file stdout is redirected to): the same device and inode."""
    if str(path) == "-":
        return True
    try:
        st, out = os.stat(path), os.fstat(1)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def writes_stdout(*paths: str | Path | None) -> bool:
    """One of these outputs is standard output: it gets stdout alone, so print nothing else."""
    return any(path is not None and is_stdout(path) for path in paths)


def check_output(path: str | Path) -> Path:
    """The file to write for ``path`` (symlinks followed), or VerifyprofError saying why not."""
    path = Path(path)
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise VerifyprofError("symbolic link loop, cannot write through it", path) from None
        raise VerifyprofError(f"cannot write: {exc.strerror}", path) from None
    target = Path(os.path.realpath(path))
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise VerifyprofError("is a directory, expected a file to write", path)
    inputs.check_output(path)  # the run's InputRegistry: an input, named with its role
    if str(target) in _protected or (st is not None and (st.st_dev, st.st_ino) in _protected_ids):
        raise VerifyprofError("is an input of this command: refusing to overwrite it", path)
    if not target.parent.is_dir():
        raise VerifyprofError(
            f"no such directory {target.parent} (output folders are not created)", path
        )
    return target


def _new_file_mode() -> int:
    """0o666 less the umask (what ``open(..., "w")`` would give), read without changing it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # no /proc: set and restore (single-threaded at this point)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError:
        if not directory:  # some filesystems refuse fsync on a directory; the data is synced
            raise
    finally:
        os.close(fd)


class _Signalled(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_signalled(signum: int, frame: object) -> None:
    raise _Signalled(signum)


@contextlib.contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """While inside, a SIGTERM/SIGHUP that would kill the process where it stands (default action)
    raises instead, so that ``finally`` blocks run (a temp file removed, worker processes
    stopped); then the process dies of that signal, as it would have. Nested scopes unwind to the
    outermost, which ends the process. A program's own handlers (capture's) are left as they are:
    they raise or return themselves. Ctrl-C needs nothing: KeyboardInterrupt already unwinds."""
    replaced: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in CLEANUP_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_DFL:
                replaced[sig] = signal.signal(sig, _raise_signalled)
    try:
        yield
    except _Signalled as caught:
        if caught.signum not in replaced:  # an outer scope's handler: it ends the process
            raise
        _restore(replaced)
        _die_of(caught.signum)
    finally:
        _restore(replaced)


def _restore(replaced: dict[int, Any]) -> None:
    for sig, old in replaced.items():
        signal.signal(sig, old)
    replaced.clear()


def _die_of(signum: int) -> None:
    """The interrupted work is cleaned up: now do what the signal would have done."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)  # pragma: no cover - the default action ends the process first


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temp path beside ``path``'s target to write; on success it replaces the target in
    one rename. On any failure or SIGTERM/SIGHUP the temp file is removed, the target untouched.
    An output that is standard output (:func:`is_stdout`) is written to a temp file, then copied
    to it."""
    path = Path(path)
    if is_stdout(path):
        with _via_stdout(path) as tmp:
            yield tmp
        return
    target = check_output(path)
    if target.exists() and not target.is_file():  # a device or FIFO: nothing to replace
        with _write_errors(path):
            yield target
        return
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else _new_file_mode()
    with cleanup_on_signals():
        tmp: Path | None = None
        try:
            with _write_errors(path):
                fd, name = tempfile.mkstemp(
                    prefix=f".{target.name}.", suffix=suffix, dir=target.parent
                )
                os.close(fd)
                tmp = Path(name)
                os.chmod(tmp, mode)
                yield tmp
                _fsync_path(tmp)
                os.replace(tmp, target)
                tmp = None
                _fsync_path(target.parent, directory=True)
        finally:
            _remove(tmp)


def _remove(tmp: Path | None) -> None:
    if tmp is not None:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def _via_stdout(path: Path) -> Iterator[Path]:
    """A temp file to write (writers want a path; a failed write shows nothing half-done), copied
    on success to file descriptor 1 as it is: a pipe, a terminal, a file opened for appending."""
    with cleanup_on_signals():
        tmp: Path | None = None
        try:
            with _write_errors(path):
                fd, name = tempfile.mkstemp(prefix="verifyprof-stdout.", suffix=".tmp")
                os.close(fd)
                tmp = Path(name)
                yield tmp
            with open(tmp, "rb") as src, stdout_bytes() as out:
                shutil.copyfileobj(src, out, 1 << 20)
        finally:
            _remove(tmp)


@contextlib.contextmanager
def _write_errors(path: Path) -> Iterator[None]:
    """An OSError while writing (disk full, quota, permission) is one line naming the output."""
    try:
        yield
    except OSError as exc:
        raise VerifyprofError(f"cannot write: {exc.strerror or exc}", path) from None


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: str | Path, data: Any, *, indent: int | None = 2, default: Any = None) -> None:
    """``data`` as JSON plus a newline (stdlib formatting: ``indent``, ``default`` for odd
    values)."""
    require_finite(data, str(path))  # NaN and infinity are not JSON: never written
    write_text(path, json.dumps(data, indent=indent, default=default) + "\n")


@contextlib.contextmanager
def stdout_bytes() -> Iterator[IO[bytes]]:
    """Standard output as bytes; a failed write (disk full, closed pipe) is one line, and the
    interpreter's own flush at exit is kept from failing a second time with a traceback."""
    try:
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    except OSError as exc:
        silence_stdout()
        if isinstance(exc, BrokenPipeError):
            raise OutputClosed("standard output closed") from None
        raise VerifyprofError(f"cannot write to standard output: {exc.strerror or exc}") from None


def silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's own flush at exit does not
    fail a second time (with a traceback) after a write to it failed."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
