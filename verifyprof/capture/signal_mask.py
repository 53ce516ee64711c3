"""Stop signals held for a moment: while a target is started and recorded, Ctrl-C or SIGTERM
must not land between the fork and the assignment that tells the cleanup what to stop."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from verifyprof.contracts.plumbing.lifetime import LIBC as _LIBC

DEFERRED = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
    if hasattr(signal, name)
)


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C and the stop signals while a target is started and recorded: one that came
    between the fork and the assignment would leave a process the cleanup does not know of. They
    are delivered when the block ends (the child unblocks them before exec)."""
    if _LIBC is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
