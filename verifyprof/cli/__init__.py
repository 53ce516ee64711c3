"""The command line: parse, call one pipeline function, print through report. No analysis
lives here; each command's module registers it on :data:`app`.

Ctrl-C is one line and exit 130 from this module's first line: while the CLI's imports run
(numpy, pandas, typer: a few tenths of a second) a SIGINT ends the process at once, before any
file is opened; :func:`main` hands Ctrl-C back to Python's handler when it starts."""

from __future__ import annotations

import os
import signal
import sys
import threading


def _interrupted_at_start(signum: int, frame: object) -> None:
    os.write(2, b"verifyprof: interrupted\n")
    os._exit(128 + signum)


def _guard_start_up() -> object:
    """Ctrl-C ends the start-up in one line, where Ctrl-C would interrupt it (Python's own
    handler in the main thread); None where it changed nothing."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None  # ignored (a background job), or a handler of whoever imports us
    return signal.signal(signal.SIGINT, _interrupted_at_start)


def _as_cli() -> bool:
    """The console script or ``python -m verifyprof.cli``: the guard stays until main()."""
    return os.path.basename(sys.argv[0] if sys.argv else "") in ("verifyprof", "-m")


_previous = _guard_start_up()
try:
    from verifyprof.cli import analysis, before_after, capture_cmds  # noqa: E402, F401 - register
    from verifyprof.cli.app import app  # noqa: E402
    from verifyprof.cli.args import interrupted  # noqa: E402
finally:
    if _previous is not None and not _as_cli():
        signal.signal(signal.SIGINT, _previous)  # imported by a program: its Ctrl-C is its own

__all__ = ["app", "main"]


def main() -> None:
    """The console script: errors are one line (see :class:`verifyprof.cli.args._Group`)."""
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted_at_start:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        app()
    except KeyboardInterrupt as err:
        sys.exit(interrupted(getattr(err, "signum", signal.SIGINT)))


if __name__ == "__main__":
    main()
