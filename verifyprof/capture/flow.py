"""The capture flow: start the target (under nsys, with the NVTX hooks injected), drive it, stop
everything, and leave the trace and ``manifest.json`` in the output directory.

Whatever happens (Ctrl-C, SIGTERM, a server that dies, a health timeout) the target and every
process it started are stopped, what was captured is kept and listed in the manifest, and the
error says what happened in one line (plus the server log's tail where that is the evidence).

This module only sequences the steps and turns the outcome into an error or a result; the steps
live in ``request`` (what was asked, checked before anything starts), ``session`` (one capture's
state, setup, start, manifest), ``server_flow`` / ``program_flow`` (the two kinds of target),
``profile_window`` (start/stop profile), ``cleanup`` (signals, stopping, export) and ``results``
(what the CLI prints).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape as markup_escape

from verifyprof.capture import driver
from verifyprof.capture.cleanup import cleanup, sigterm_as_interrupt
from verifyprof.capture.decode_baseline import run_decode_baseline
from verifyprof.capture.process import become_subreaper
from verifyprof.capture.program_flow import run_baseline, wait_program
from verifyprof.capture.request import CaptureOptions, validate
from verifyprof.capture.results import CaptureResult
from verifyprof.capture.server import (
    LOG_TAIL_LINES,
    CaptureError,
    NoRangesError,
    with_log_tail,
)
from verifyprof.capture.server_flow import serve
from verifyprof.capture.session import CaptureSession
from verifyprof.capture.terminal import SafeStderr
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.text import safe_text


def capture(opts: CaptureOptions, console: Console | None = None) -> CaptureResult:
    """Run one capture. Raises ``VerifyprofError`` (bad input, exit 2), ``CaptureError`` (the
    run failed, exit 1) or ``KeyboardInterrupt`` (Ctrl-C / SIGTERM); in every case the target is
    stopped and the manifest written before it returns or raises."""
    # its lines never fail (a hung-up terminal, a closed pipe): they must not stop the cleanup
    console = console or Console(file=SafeStderr(), soft_wrap=True)
    validate(opts)
    become_subreaper()  # nothing the target starts can escape the cleanup by being orphaned
    with sigterm_as_interrupt():
        run = CaptureSession(opts, console)
        env = run.setup()  # may raise before anything was made or started: nothing to clean up
        failure: BaseException | None = None
        try:
            run.make_out()  # --out with its manifest, "running": a signal is written as interrupted
            if opts.mode == "program" and opts.baseline_run:
                run_baseline(run)
            run.start(env)
            if opts.mode == "server":
                serve(run)
            else:
                wait_program(run)
                if opts.decode_cmd:
                    run_decode_baseline(run)
            run.status = "ok"
        except KeyboardInterrupt as err:
            how = getattr(err, "signal_name", "SIGINT").replace("SIGINT", "Ctrl-C")
            run.status, run.error, failure = "interrupted", f"interrupted ({how})", err
        except driver.ServerGone as err:
            done = len(run.results)
            # a dying server may close its socket first; a hung one is not dying
            grace = 0.0 if isinstance(err, driver.NoReply) else 3.0
            code = run.proc.wait(timeout=grace) if run.proc else None
            how = f"exited with code {code}" if code is not None else f"stopped answering ({err})"
            run.status, failure = "failed", err
            run.error = with_log_tail(
                f"server {how} after {done}/{opts.requests} requests", run.log, LOG_TAIL_LINES
            )
        except driver.DeadlinePassed as err:
            run.status, failure = "failed", err
            run.error = f"{err} after {len(run.results)}/{opts.requests} requests"
        except VerifyprofError as err:
            run.status, run.error, failure = "failed", str(err), err
        except BaseException as err:
            run.status, run.error, failure = "failed", f"{type(err).__name__}: {err}", err
            raise
        finally:
            cleanup(run)
    if isinstance(failure, KeyboardInterrupt):
        kept = markup_escape(safe_text(str(run.out)))  # a name: escaped, never markup
        console.print(f"verifyprof: capture interrupted; partial outputs kept in {kept}")
        raise failure
    if run.no_ranges:
        first, _, rest = (run.error or "").partition("\n")
        raise NoRangesError(f"{first} (outputs kept in {run.out})" + (f"\n{rest}" if rest else ""))
    if run.status != "ok":
        first, _, rest = (run.error or "failed").partition("\n")
        raise CaptureError(f"{first} (outputs kept in {run.out})" + (f"\n{rest}" if rest else ""))
    return CaptureResult(run.out, run.doc)
