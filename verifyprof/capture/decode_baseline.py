"""``capture --decode-cmd``: a plain-decoding run of the same program (speculation off), with no
profiler and no hooks, after the capture, so the manifest holds the rate speculation must beat
(``results.baseline_tokens_per_s``) measured rather than assumed."""

from __future__ import annotations

import os
import shlex
import sys
import time

from verifyprof.capture.process import (
    INTERRUPT_GRACE_S,
    INTERRUPT_TERM_S,
    ManagedProcess,
)
from verifyprof.capture.results import program_results
from verifyprof.capture.server import CaptureError, with_log_tail
from verifyprof.capture.session import CaptureSession
from verifyprof.capture.signal_mask import stop_signals_deferred

DECODE_DIR = "decode-baseline"


def run_decode_baseline(run: CaptureSession) -> None:
    """Run ``--decode-cmd`` to its end; its ``results.json`` ``tokens_per_s_per_request`` (else
    ``tokens_per_s``) becomes the manifest's ``baseline_tokens_per_s``."""
    folder = run.out / DECODE_DIR
    folder.mkdir(exist_ok=True)
    env = dict(os.environ) | {"VERIFYPROF_CAPTURE_DIR": str(folder.resolve())}
    run.console.print("verifyprof: plain-decoding run (no profiler, no hooks) for the baseline")
    started = time.monotonic()
    argv = shlex.split(run.opts.decode_cmd or "")
    profiled = run.proc  # the capture's own process: cleanup exports its report
    with stop_signals_deferred():
        proc = ManagedProcess(argv, log=folder / "program.log", env=env, echo=sys.stderr)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # Ctrl-C or a stop signal: the short grace of an interrupted run
        proc.stop(
            int_timeout=min(run.opts.stop_timeout, INTERRUPT_GRACE_S), term_timeout=INTERRUPT_TERM_S
        )
        raise
    finally:
        proc.stop(int_timeout=run.opts.stop_timeout)  # what it left; closes its log
        run.proc = profiled
    results = program_results(folder, patterns=run.opts.results)
    if code != 0:
        raise CaptureError(
            with_log_tail(f"--decode-cmd exited with code {code}", folder / "program.log", 10)
        )
    # per request where the program says it (a batch of B rows reports B times one's rate): the
    # model's plain step is one request's
    rate = results.get("tokens_per_s_per_request", results.get("tokens_per_s"))
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not rate > 0:
        raise CaptureError(
            "--decode-cmd wrote no positive tokens_per_s(_per_request) to"
            f" {folder / 'results.json'} (nor printed one that a --result pattern found)"
        )
    run.summary["baseline_tokens_per_s"] = float(rate)
    run.summary["baseline_source"] = (
        f"--decode-cmd, unprofiled ({time.monotonic() - started:.1f} s): {run.opts.decode_cmd}"
    )
