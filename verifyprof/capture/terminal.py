"""Capture's own output, which must never stop its cleanup.

A closed terminal sends SIGHUP, and from then on every write to it fails (EIO), as does every
write to a pipe whose reader the hang-up killed (``verifyprof capture ... | tee log``: EPIPE). A
progress line that raised there would abandon the cleanup and leave the target's processes
running, so the capture's console drops what it cannot write, and after SIGHUP the terminal's
file descriptors point at /dev/null.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

_terminals: set[int] = set()  # stdout / stderr fds that were terminals when the capture began


def remember_terminals() -> None:
    """Note which of stdout and stderr are terminals now: after a hang-up ``isatty`` says no."""
    for fd in (1, 2):
        with contextlib.suppress(OSError, ValueError):
            if os.isatty(fd):
                _terminals.add(fd)


def detach_after_hangup(signum: int) -> None:
    """After SIGHUP, stdout and stderr that were (or are) the terminal go to /dev/null, so that
    the cleanup's progress lines and the final summary cannot fail on it."""
    if signum != getattr(signal, "SIGHUP", None):
        return
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if fd in _terminals or os.isatty(fd):
                _to_devnull(fd)


def _to_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class SafeStderr:
    """Standard error for the capture's console: a write that fails drops its text and points
    file descriptor 2 at /dev/null, so later writes (the target's echoed output, the CLI's last
    lines) go nowhere instead of failing again. Everything else is ``sys.stderr``'s."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except (OSError, ValueError):
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            self._silence()

    @staticmethod
    def _silence() -> None:
        with contextlib.suppress(OSError, ValueError):
            _to_devnull(sys.stderr.fileno())
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()  # what the failed write left in the buffer goes to /dev/null

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stderr, name)
