""".nsys-rep -> SQLite export, once, cached while the report is unchanged.

A ``.nsys-rep`` is NVIDIA's own format; only ``nsys export`` reads it. The export is written
to ``.verifyprof-cache/<report name>.sqlite`` beside the report, or, when that directory is
not writable, to the user cache (:func:`verifyprof.trace.cache.cache_dir`: ``$VERIFYPROF_CACHE``,
``$XDG_CACHE_HOME/verifyprof`` or ``~/.cache/verifyprof``) under a name carrying a hash of the
report's path. A JSON sidecar records the report's size and mtime_ns;
the export is reused while they match. ``nsys`` writes to a temporary name that is renamed
into place only when it succeeded and holds a whole SQLite file (an export that exited 0 with a
cut-off file is refused, not cached), so an interrupted export never looks like a cached one.
Concurrent runs on one report take an exclusive lock (``flock`` on ``<export>.lock``): one
exports, the others wait and reuse it. ``nsys`` runs in its own process group, killed with it on
Ctrl-C or after ``$VERIFYPROF_NSYS_EXPORT_TIMEOUT`` seconds (default 3600). The report itself is
only read.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from verifyprof.contracts.errors import ToolMissingError, TraceError
from verifyprof.contracts.plumbing.outputs import cleanup_on_signals
from verifyprof.contracts.plumbing.paths import name_bytes
from verifyprof.trace.cache import cache_dir, cache_fault, stored_sqlite_problem
from verifyprof.trace.path_checks import regular_file

NSYS_ENV = "VERIFYPROF_NSYS"  # path of the nsys binary, when it is not on PATH
CACHE_DIR = ".verifyprof-cache"
TIMEOUT_ENV = "VERIFYPROF_NSYS_EXPORT_TIMEOUT"
DEFAULT_TIMEOUT_S = 3600.0


def sqlite_for_report(path: Path) -> Path:
    """The SQLite export of an ``.nsys-rep``, exporting it on first use (``ToolMissingError``
    without nsys)."""
    path = Path(path)
    stat = regular_file(path)
    stamp = {"report": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    for target in _cache_candidates(path):
        if _is_fresh(target, stamp):
            return target
    nsys = nsys_binary(path)
    last_error: OSError | None = None
    for target in _cache_candidates(path):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            probe = target.with_name(f".{target.name}.probe{os.getpid()}.{threading.get_ident()}")
            probe.touch()
            probe.unlink()
        except OSError as exc:  # not writable: try the next place
            last_error = exc
            continue
        # one export per report, however many runs ask at once; SIGTERM / SIGHUP stop nsys and
        # leave no temp file
        with _export_lock(target, path), cleanup_on_signals():
            if _is_fresh(target, stamp):  # another run exported it while this one waited
                return target
            try:
                _export(nsys, path, target)
                _write_json(
                    _sidecar(target), {**stamp, "nsys": nsys, "sqlite_size": target.stat().st_size}
                )
            except OSError as exc:
                raise cache_fault(path, target.parent, exc) from None
        return target
    why = last_error.strerror if last_error is not None and last_error.strerror else last_error
    raise TraceError(
        f"no writable place for its SQLite export ({why}); set VERIFYPROF_CACHE to a writable"
        " directory",
        path,
    )


@contextmanager
def _export_lock(target: Path, report: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``<target>.lock``: concurrent runs wait for one export.

    The holder removes the lock file when done, so nothing is left beside the export; a waiter
    that then wakes on the removed file retries on the current one (inode check)."""
    lock = target.with_name(target.name + ".lock")
    while True:
        try:
            handle = open(lock, "a+b")
        except OSError as exc:
            raise cache_fault(report, target.parent, exc) from None
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.stat(lock).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        handle.close()
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        handle.close()  # releases the flock


def nsys_binary(report: Path) -> str:
    """The nsys to run: ``$VERIFYPROF_NSYS`` or ``nsys`` on PATH; ``ToolMissingError`` naming the
    command otherwise."""
    configured = os.environ.get(NSYS_ENV)
    if configured:
        if Path(configured).is_file() and os.access(configured, os.X_OK):
            return configured
        found = shutil.which(configured)
        if found:
            return found
        raise ToolMissingError(
            f"{NSYS_ENV}={configured} is not an executable nsys; {export_hint(report)}", report
        )
    found = shutil.which("nsys")
    if not found:
        raise ToolMissingError(
            "reading a .nsys-rep needs Nsight Systems' nsys, which is not on PATH;"
            f" {export_hint(report)}",
            report,
        )
    return found


def export_hint(report: Path) -> str:
    out = report.with_suffix(".sqlite")
    command = f"nsys export --type sqlite -o {shlex.quote(str(out))} {shlex.quote(str(report))}"
    return (
        f"export it where nsys is installed ({command}) and pass the .sqlite, or set"
        f" {NSYS_ENV}=/path/to/nsys"
    )


def _cache_candidates(report: Path) -> list[Path]:
    beside = report.resolve().parent / CACHE_DIR / f"{report.name}.sqlite"
    digest = hashlib.sha1(name_bytes(report.resolve())).hexdigest()[:12]
    return [beside, cache_dir() / f"{report.stem}-{digest}.sqlite"]


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _is_fresh(target: Path, stamp: dict) -> bool:
    try:
        recorded = json.loads(_sidecar(target).read_text())
        size = target.stat().st_size
    except (OSError, ValueError, RecursionError):
        return False
    return (
        isinstance(recorded, dict)
        and all(recorded.get(k) == v for k, v in stamp.items())
        and recorded.get("sqlite_size") == size
        and stored_sqlite_problem(target) is None
    )


def export_timeout() -> float:
    """Seconds one ``nsys export`` may run: ``$VERIFYPROF_NSYS_EXPORT_TIMEOUT``, default 3600."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, "") or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if math.isfinite(value) and value > 0 else DEFAULT_TIMEOUT_S


def _run(command: list[str], report: Path) -> subprocess.CompletedProcess:
    """Run nsys in its own process group, killed as a group on timeout or Ctrl-C (nsys starts
    helpers that a plain kill of the child would leave running)."""
    timeout = export_timeout()
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolMissingError(
            f"cannot run {command[0]} ({exc.strerror or exc}); {export_hint(report)}", report
        ) from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise TraceError(
            f"nsys export did not finish within {timeout:g} s (set {TIMEOUT_ENV} to allow longer)",
            report,
        ) from None
    except BaseException:  # KeyboardInterrupt, SystemExit: the export must not outlive us
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.communicate()


def _export(nsys: str, report: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.stem}.tmp{os.getpid()}.{threading.get_ident()}.sqlite")
    plain = [
        nsys,
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "-o",
        str(tmp),
        str(report),
    ]
    with_blobs = (
        plain[:4] + ["--include-blobs=true"] + plain[4:]
    )  # NCCL message sizes (NVTX payloads)
    try:
        done = _run(with_blobs, report)
        if done.returncode != 0 or not tmp.is_file():  # an nsys without the flag: export plainly
            done = _run(plain, report)
        if done.returncode != 0 or not tmp.is_file():
            detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
            why = detail[-1] if detail else f"exit code {done.returncode}"
            raise TraceError(f"nsys export failed ({why})", report)
        problem = stored_sqlite_problem(tmp)
        if (
            problem is not None
        ):  # exit 0 with a cut-off file (disk full, killed helper): never cache it
            raise TraceError(
                f"nsys export exited 0 but wrote an incomplete SQLite file ({problem}); nothing"
                " cached",
                report,
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)
