"""The command line: parse, call one pipeline function, print through report. No analysis
lives here; each command's module registers it on :data:`app`.

Ctrl-C is one line and exit 130 from this module's first statement: the guard below is
installed before anything else is imported (``_signal`` and ``sys`` are the interpreter's own;
``signal``, ``threading``, numpy, pandas, typer come after it), so a SIGINT at any instant of
the CLI's imports ends the process at once, before any file is opened; :func:`main` hands
Ctrl-C back to Python's handler when it starts.

Before this module's first statement the process is the interpreter's, and a Ctrl-C there does
what it does to any Python program: before Python installs its handler the process dies of
SIGINT with no output (a shell shows 130); after it, while ``site`` runs the environment's .pth
hooks (an editable install's finder, other packages' start-up hooks: ~20 ms on the test
machine) or runpy imports for ``-m``, Python prints its KeyboardInterrupt traceback, with no
frame of ours. No statement of verifyprof can run earlier short of a .pth of its own, run by
every Python of the environment; tests/test_signal_sweep.py sweeps start-up every 5 ms.
"""

import _signal  # loaded with the interpreter (as sys is): the guard imports nothing
import sys


def _interrupted_at_start(signum: int, frame: object) -> None:
    import os  # loaded by Python's own start-up (site): no import runs here

    os.write(2, b"verifyprof: interrupted\n")
    os._exit(128 + signum)


def _guard_start_up() -> object:
    """Ctrl-C ends the start-up in one line, where Ctrl-C would interrupt it (Python's own
    handler in the main thread); None where it changed nothing."""
    if _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler:
        return None  # ignored (a background job), or a handler of whoever imports us
    try:
        return _signal.signal(_signal.SIGINT, _interrupted_at_start)
    except ValueError:  # not the main thread: its Ctrl-C is not ours to take
        return None


_previous = _guard_start_up()

import os  # noqa: E402 - after the guard, as everything else
import signal  # noqa: E402


def _as_cli() -> bool:
    """The console script or ``python -m verifyprof.cli``: the guard stays until main(). While
    ``-m`` imports a module's packages ``sys.argv[0]`` is ``-m`` for any module: the command line
    as given says which, at the interpreter's own ``-m`` (the element before the program's
    arguments: a program run as ``python -m tool -m verifyprof.cli`` that imports this is not
    the CLI)."""
    started = os.path.basename(sys.argv[0] if sys.argv else "")
    if started != "-m":
        return started == "verifyprof"
    given = list(getattr(sys, "orig_argv", []))
    at = len(given) - len(sys.argv)  # sys.argv is ["-m", *the program's arguments]
    if at < 1:
        return False
    return given[at] == "-mverifyprof.cli" or given[at - 1 : at + 1] == ["-m", "verifyprof.cli"]


from verifyprof.contracts.plumbing import collector, threads  # noqa: E402

if _as_cli():  # the collector pauses while this process loads modules (plumbing/collector.py)
    collector.take_over()
    threads.switch_often()  # the read's and the JSON's threads beside the main one (threads.py)

try:
    with collector.loading():
        # each module registers its commands; the import order is --help's order
        from verifyprof.cli import analysis, compare_report_cmds  # noqa: E402, F401 - register

        # isort: split
        from verifyprof.cli import capture_cmds  # noqa: E402, F401 - register
        from verifyprof.cli.app import app  # noqa: E402
        from verifyprof.cli.args import interrupted  # noqa: E402
finally:
    if _previous is not None and not _as_cli():
        signal.signal(signal.SIGINT, _previous)  # imported by a program: its Ctrl-C is its own

__all__ = ["app", "main"]


_built: list = []  # the click command typer makes of ``app``, made once per process


def _command():  # -> click.Command (typer's own click)
    """``app`` as typer's click command, made on the first call only: ``app()`` makes it anew
    each time (every command's parameters read from its signature, ~10 ms, and each parameter's
    coercion again), which a program or a test suite calling main() hundreds of times in one
    process paid on every call. What ``app()`` adds around it is its excepthook, which with
    pretty exceptions off (app.py) hands every exception to Python's own."""
    if not _built:
        from typer.main import get_command

        _built.append(get_command(app))
    return _built[0]


def main() -> None:
    """The console script: errors are one line (see :class:`verifyprof.cli.args._Group`)."""
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted_at_start:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _command()()
    except KeyboardInterrupt as err:
        sys.exit(interrupted(getattr(err, "signum", signal.SIGINT)))
    except SystemExit as done:
        if _own_process():
            _exit_now(done.code)
        raise


def _own_process() -> bool:
    """This process was started to run the CLI: the console script or ``python -m
    verifyprof.cli`` is its ``__main__``, not a program or a test calling :func:`main`."""
    started = sys.modules.get("__main__")
    spec = getattr(started, "__spec__", None)
    if spec is not None and spec.name == "verifyprof.cli.__main__":
        return True
    return os.path.basename(getattr(started, "__file__", None) or "") == "verifyprof"


def _exit_now(code: object) -> None:
    """The CLI's process ends here, its output written: the exit handlers run and the streams
    are flushed as Python's own exit does, then the process exits without tearing the
    interpreter down (every module, frame and array of the run freed one by one: ~0.2 CPU-s
    after an 8-rank breakdown, with nothing left to print). Returns (Python's own exit follows)
    where that would differ: a code that is no number, a thread still running, a failed flush."""
    import atexit
    import threading

    if not (code is None or isinstance(code, int)):
        return
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe, say: Python's exit says so as always
        return
    os._exit(code or 0)


if __name__ == "__main__":
    main()
