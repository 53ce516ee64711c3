"""The capture flow: start the target (under nsys, with the NVTX hooks injected), drive it, stop
everything, and leave the trace and ``manifest.json`` in the output directory.

Whatever happens (Ctrl-C, SIGTERM, a server that dies, a health timeout) the target and every
process it started are stopped, what was captured is kept and listed in the manifest, and the
error says what happened in one line (plus the server log's tail where that is the evidence).

This module only sequences the steps and turns the outcome into an error or a result; the steps
live in ``options`` (what was asked, checked before anything starts), ``session`` (one capture's
state, setup, start, manifest), ``server_flow`` / ``program_flow`` (the two kinds of target),
``profile_window`` (start/stop profile), ``cleanup`` (signals, stopping, export) and ``results``
(what the CLI prints). The names the CLI and tests use are re-exported here.
"""

from __future__ import annotations

from rich.console import Console

from verifyprof.capture import driver
from verifyprof.capture.cleanup import Terminated, cleanup, sigterm_as_interrupt
from verifyprof.capture.options import (
    BACKENDS,
    DEFAULT_PORT,
    CaptureOptions,
    check_out_dir,
    server_address,
    validate,
)
from verifyprof.capture.profile_window import TORCH_TRACE_DIR, profile_body
from verifyprof.capture.program_flow import wait_program
from verifyprof.capture.results import (
    PROGRAM_RESULTS,
    CaptureResult,
    program_results,
    summary_lines,
)
from verifyprof.capture.server import LOG_TAIL_LINES, CaptureError, with_log_tail
from verifyprof.capture.server_flow import serve
from verifyprof.capture.session import CaptureSession
from verifyprof.capture.target_hooks import (
    DEFAULT_SERVER_HOOKS,
    hook_presets,
    hook_reports,
    hooks_env,
)
from verifyprof.contracts.errors import VerifyprofError

__all__ = [
    "BACKENDS", "DEFAULT_PORT", "DEFAULT_SERVER_HOOKS", "PROGRAM_RESULTS", "TORCH_TRACE_DIR",
    "CaptureOptions", "CaptureResult", "Terminated", "capture", "check_out_dir", "hook_presets",
    "hook_reports", "hooks_env", "profile_body", "program_results", "server_address", "summary_lines",
    "validate",
]


def capture(opts: CaptureOptions, console: Console | None = None) -> CaptureResult:
    """Run one capture. Raises ``VerifyprofError`` (bad input, exit 2), ``CaptureError`` (the
    run failed, exit 1) or ``KeyboardInterrupt`` (Ctrl-C / SIGTERM); in every case the target is
    stopped and the manifest written before it returns or raises."""
    console = console or Console(stderr=True, soft_wrap=True)
    validate(opts)
    with sigterm_as_interrupt():
        run = CaptureSession(opts, console)
        env = run.setup()  # may raise before anything was started: nothing to clean up
        run.write_manifest()
        failure: BaseException | None = None
        try:
            run.start(env)
            if opts.mode == "server":
                serve(run)
            else:
                wait_program(run)
            run.status = "ok"
        except KeyboardInterrupt as err:
            run.status, run.error, failure = "interrupted", f"interrupted ({'SIGTERM' if isinstance(err, Terminated) else 'Ctrl-C'})", err
        except driver.ServerGone as err:
            done = len(run.results)
            code = run.proc.wait(timeout=3.0) if run.proc else None  # a dying server may close its socket first
            how = f"exited with code {code}" if code is not None else f"stopped answering ({err})"
            run.status, failure = "failed", err
            run.error = with_log_tail(f"server {how} after {done}/{opts.requests} requests", run.log, LOG_TAIL_LINES)
        except VerifyprofError as err:
            run.status, run.error, failure = "failed", str(err), err
        except BaseException as err:
            run.status, run.error, failure = "failed", f"{type(err).__name__}: {err}", err
            raise
        finally:
            cleanup(run)
    if isinstance(failure, KeyboardInterrupt):
        console.print(f"verifyprof: capture interrupted; partial outputs kept in {run.out}")
        raise failure
    if run.status != "ok":
        first, _, rest = (run.error or "failed").partition("\n")
        raise CaptureError(f"{first} (outputs kept in {run.out})" + (f"\n{rest}" if rest else ""))
    return CaptureResult(run.out, run.doc)
