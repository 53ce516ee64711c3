"""The capture of a program, once it is started: it runs to its end by itself (its own profiler
window, its own workload), so verifyprof only times it, collects the numbers it reported, and turns
a non-zero exit into an error that shows the log's tail."""

from __future__ import annotations

import contextlib
import signal
import time

from verifyprof.capture.profile_window import close_window
from verifyprof.capture.results import program_results
from verifyprof.capture.server import CaptureError, with_log_tail
from verifyprof.capture.session import CaptureSession


def wait_program(run: CaptureSession) -> None:
    assert run.proc is not None
    run.window["start_unix_ns"] = time.time_ns()
    code = run.proc.wait()
    close_window(run, None)
    run.exit_code = code
    run.summary = program_results(run.out)
    if code != 0:
        raise CaptureError(with_log_tail(f"program exited with {describe_exit(code)}", run.log, 10))


def describe_exit(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"
