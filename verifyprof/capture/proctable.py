"""The few process-table questions capture asks, answered by psutil or, where psutil is not
installed (GPU images often lack it), by reading ``/proc`` directly.

A :class:`Proc` is a pid plus its start time, so a recycled pid is never mistaken for the
process we saw (and never signalled).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

try:
    import psutil as _psutil
except ImportError:  # pragma: no cover - exercised by forcing BACKEND in the tests
    _psutil = None

BACKEND = "psutil" if _psutil is not None else "proc"
if os.environ.get("VERIFYPROF_PROCTABLE") == "proc" and os.path.isdir("/proc/self"):
    BACKEND = "proc"  # as on a machine without psutil (tests, debugging)


def use(backend: str) -> None:
    """Select ``psutil`` or ``proc`` (tests run both)."""
    global BACKEND
    if backend == "psutil" and _psutil is None:
        raise RuntimeError("psutil is not installed")
    if backend == "proc" and not os.path.isdir("/proc/self"):
        raise RuntimeError("no /proc on this system")
    BACKEND = backend


@dataclass(frozen=True)
class Proc:
    pid: int
    start: float  # start time: identity across pid reuse


@dataclass(frozen=True)
class _Stat:
    state: str
    ppid: int
    pgid: int
    start: float


def _read_stat(pid: int) -> _Stat | None:
    if BACKEND == "psutil":
        try:
            p = _psutil.Process(pid)
            with p.oneshot():
                status = p.status()
                return _Stat(
                    "Z" if status == _psutil.STATUS_ZOMBIE else "R",
                    p.ppid(),
                    os.getpgid(pid),
                    p.create_time(),
                )
        except (_psutil.Error, OSError):
            return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return _Stat(fields[0], int(fields[1]), int(fields[2]), float(fields[19]))


def get(pid: int) -> Proc | None:
    stat = _read_stat(pid)
    return None if stat is None else Proc(pid, stat.start)


def _pids() -> list[int]:
    if BACKEND == "psutil":
        return _psutil.pids()
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def all_procs() -> list[Proc]:
    return [p for p in (get(pid) for pid in _pids()) if p is not None]


def alive(proc: Proc) -> bool:
    """Still the same process and not a zombie. Never reaps: a zombie child's exit status
    belongs to whoever started it (``Popen.poll`` would read 0 after someone else reaped it)."""
    stat = _read_stat(proc.pid)
    return stat is not None and stat.start == proc.start and stat.state not in ("Z", "X")


def pgid(proc: Proc) -> int | None:
    stat = _read_stat(proc.pid)
    return stat.pgid if stat is not None and stat.start == proc.start else None


def descendants(roots: list[Proc]) -> list[Proc]:
    """Every live descendant of ``roots`` (one scan of the process table)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        stat = _read_stat(pid)
        if stat is not None:
            children.setdefault(stat.ppid, []).append(pid)
    found: dict[int, Proc] = {}
    todo = [r.pid for r in roots if alive(r)]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                proc = get(child)
                if proc is not None:
                    found[child] = proc
                    todo.append(child)
    return list(found.values())


def environ_value(proc: Proc, key: str) -> str | None:
    """One variable of a process's environment (None if absent or not readable)."""
    try:
        if BACKEND == "psutil":
            return _psutil.Process(proc.pid).environ().get(key)
        with open(f"/proc/{proc.pid}/environ", "rb") as f:
            data = f.read()
    except Exception:  # psutil.Error, permission, gone
        return None
    prefix = key.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def ignores(proc: Proc, sig: int) -> bool:
    """Whether ``proc`` ignores ``sig`` (its ``SigIgn`` mask in ``/proc``; False where that
    cannot be read). A shell's background job ignores SIGINT, and a process that ignores a
    signal is not waited for after it: it goes on to the next one at once."""
    try:
        with open(f"/proc/{proc.pid}/status", "rb") as f:
            status = f.read()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith(b"SigIgn:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def send(proc: Proc, sig: int) -> None:
    """Signal ``proc`` if it is still the process we saw."""
    if alive(proc):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, sig)


if sys.platform != "linux" and BACKEND == "proc":  # pragma: no cover
    raise ImportError("verifyprof capture needs psutil on this platform")
