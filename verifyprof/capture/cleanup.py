"""Ending a capture, however it ends: Ctrl-C and SIGTERM become one interruption, and the cleanup
stops the profile (so what was captured is written), stops the target and every process it
started, exports the nsys report and writes the manifest. A further Ctrl-C during the cleanup only
makes it escalate faster; it never abandons the server."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

from rich.console import Console

from verifyprof.capture import driver, nsys
from verifyprof.capture.process import INTERRUPT_GRACE_S, INTERRUPT_TERM_S
from verifyprof.capture.profile_window import stop_profile
from verifyprof.capture.session import CaptureSession
from verifyprof.capture.target_hooks import never_fired_lines
from verifyprof.capture.terminal import detach_after_hangup, remember_terminals
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import MANIFEST

# Signals that end a capture the way Ctrl-C does: a job scheduler's kill (SIGTERM), a closed
# terminal (SIGHUP), Ctrl-\\ (SIGQUIT). Each becomes an interruption, so the cleanup runs.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name)
)


class Terminated(KeyboardInterrupt):
    """A stop signal to verifyprof (``STOP_SIGNALS``): handled like Ctrl-C, so it cleans up too.
    ``signum`` is what the CLI exits with (128 + it)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.signal_name = signal.Signals(signum).name


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    remember_terminals()

    def handler(signum: int, frame: object) -> None:
        detach_after_hangup(signum)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # started as a background job of a script (which ignores SIGINT for it): a SIGINT sent
        # to capture still stops it, with the cleanup, like SIGTERM
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def _hurry_on_interrupt(console: Console) -> Iterator[threading.Event]:
    """During cleanup a further Ctrl-C must not abandon the server: it only escalates faster."""
    hurry = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield hurry
        return

    def handler(signum: int, frame: object) -> None:
        detach_after_hangup(signum)
        if not hurry.is_set():
            with contextlib.suppress(OSError):
                console.print("[yellow]verifyprof: stopping harder (SIGTERM, then SIGKILL)[/]")
        hurry.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, *STOP_SIGNALS)}
    try:
        yield hurry
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def cleanup(run: CaptureSession) -> None:
    """Stop the target, keep what was captured, export, write the manifest. Never raises
    for a step that fails: it records it and goes on to the next."""
    with _hurry_on_interrupt(run.console) as hurry:
        if run.profiling and run.proc is not None and run.proc.alive():
            run.console.print(
                "verifyprof: stopping the profile so that what was captured is written"
            )
            _unless_hurried(lambda: stop_profile(run, timeout=120), hurry, timeout=120)
        if run.results and not run.summary:  # a partial run: summarise what finished
            alive = run.proc is not None and run.proc.alive() and not hurry.is_set()
            with contextlib.suppress(Exception):
                run.summary = driver.summarize(
                    run.results,
                    driver.server_accept_length(run.base_url, timeout=5) if alive else None,
                )
        if run.proc is not None:
            leader_grace = run.opts.report_timeout if run.nsys is not None else None
            int_timeout, term_timeout = _graces(run)
            with run.console.status("stopping the target and all its processes") as status:
                run.stop_report = run.proc.stop(
                    int_timeout=int_timeout,
                    term_timeout=term_timeout,
                    leader_grace=leader_grace,
                    hurry=hurry,
                    on_phase=lambda text: status.update(f"stopping: {text}"),
                )
            if run.exit_code is None:
                run.exit_code = run.stop_report.exit_code
            if run.stop_report.leftover:
                run.fail(
                    f"{len(run.stop_report.leftover)} process(es) survived SIGKILL: pids"
                    f" {run.stop_report.leftover}"
                )
        if run.nsys is not None and run.proc is not None:
            _export(run)
        _check_ranges(run)
        try:
            run.doc = run.write_manifest()
        except (OSError, VerifyprofError) as err:
            run.fail(f"cannot write {run.out / MANIFEST}: {err}")
            run.doc = run.manifest()


def _graces(run: CaptureSession) -> tuple[float, float]:
    """How long the target gets after SIGINT, then after SIGTERM, before the next signal. An
    interrupted capture (Ctrl-C, SIGTERM from ``docker stop``, a CI time-out or systemd, SIGHUP)
    gives at most :data:`INTERRUPT_GRACE_S` and :data:`INTERRUPT_TERM_S`, and says so: whoever
    stopped it may send SIGKILL next, which would leave the target running."""
    if run.status != "interrupted":
        return run.opts.stop_timeout, 10.0
    grace = min(run.opts.stop_timeout, INTERRUPT_GRACE_S)
    what = "server" if run.opts.mode == "server" else "program"
    run.console.print(
        f"verifyprof: {run.error}: stopping the {what} and every process it started; what still"
        f" runs after {grace:g} s gets SIGTERM, and SIGKILL {INTERRUPT_TERM_S:g} s later",
        markup=False,
        highlight=False,
    )
    return grace, INTERRUPT_TERM_S


def _check_ranges(run: CaptureSession) -> None:
    """Hooks asked for, and not one verifyprof range recorded (no hook fired, none in the trace):
    the capture is useless for ``breakdown``, so it fails (exit 2) with the list of what never
    fired, unless ``--allow-missing-hooks``."""
    if (
        run.status != "ok"
        or run.opts.allow_missing_hooks
        or not (run.presets or run.opts.hook_targets)
    ):
        return
    try:
        hooks = run.hooks()
    except Exception:
        return
    if hooks["fired"] or run.trace_ranges:
        return
    run.no_ranges = True
    lines = never_fired_lines(hooks)
    run.fail(
        "no verifyprof range was recorded: no hook fired"
        + (":\n" + "\n".join(lines) if lines else "")
        + "\n(--allow-missing-hooks accepts such a capture)"
    )


def _export(run: CaptureSession) -> None:
    assert run.nsys is not None
    report = nsys.report_path(run.nsys_output)
    if not report.exists():
        if run.status in ("running", "ok"):
            run.fail(
                nsys.explain_missing_report(run.nsys_output, run.opts.mode, run.opts.capture_all)
            )
        return
    sqlite = report.with_suffix(".sqlite")
    try:
        with run.console.status(f"exporting {report.name} to SQLite"):
            nsys.export_sqlite(
                run.nsys,
                report,
                sqlite,
                run.out / "nsys-export.log",
                timeout=run.opts.report_timeout,
            )
        run.trace_ranges = nsys.count_ranges(sqlite)
        if run.opts.gzip:
            with run.console.status(f"compressing {sqlite.name}"):
                nsys.gzip_export(sqlite)
    except VerifyprofError as err:
        run.fail(str(err))
    except OSError as err:
        run.fail(f"cannot compress {sqlite}: {err}")


def _unless_hurried(fn, hurry: threading.Event, timeout: float) -> None:
    """Run ``fn`` (errors ignored) but give up waiting for it at once when ``hurry`` is set."""
    worker = threading.Thread(target=_quietly, args=(fn,), daemon=True)
    worker.start()
    deadline = time.monotonic() + timeout
    while worker.is_alive() and not hurry.is_set() and time.monotonic() < deadline:
        worker.join(0.1)


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:
        pass
