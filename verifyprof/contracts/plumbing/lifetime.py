"""Processes that die with the one that started them (Linux; a no-op elsewhere).

A helper process (a map worker, a capture's target) that outlives its parent is re-parented to
init and keeps the parent's stdout open, so whoever waits for that output's end waits forever.
The kernel's parent-death signal (``PR_SET_PDEATHSIG``) ends it with its parent, and a check of
the parent pid right after closes the race of a parent that died before the signal was set.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None


LIBC = _libc()


def parent_of(pid: int) -> int | None:
    """``pid``'s parent pid from ``/proc`` (None when it is gone or there is no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[1])


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Get ``sig`` when the parent dies; exit now if ``parent`` already died (this process was
    re-parented before the signal was set). ``parent`` may also be the grandparent: a
    fork server's children are the fork server's, which itself ends with ``parent``."""
    if LIBC is None:
        return
    LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    direct = os.getppid()
    if parent not in (direct, parent_of(direct)):
        os._exit(128 + int(sig))
