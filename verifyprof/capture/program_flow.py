"""The capture of a program, once it is started: it runs to its end by itself (its own profiler
window, its own workload), so verifyprof only times it, collects the numbers it reported, and turns
a non-zero exit into an error that shows the log's tail. Its end is the program's own: what it
left running in the background is stopped then. With ``--baseline-run`` the program runs
once before, with no profiler and no hooks, for the rate the profiler's dilation is measured
against.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import sys
import time

from verifyprof.capture.process import ManagedProcess
from verifyprof.capture.profile_window import close_window
from verifyprof.capture.results import program_results
from verifyprof.capture.server import CaptureError, with_log_tail
from verifyprof.capture.session import CaptureSession
from verifyprof.capture.signal_mask import stop_signals_deferred
from verifyprof.contracts.bounds import positive_numbers
from verifyprof.contracts.manifest_records import dilation_record

BASELINE_DIR = "baseline"


def wait_program(run: CaptureSession) -> None:
    assert run.proc is not None
    run.window["start_unix_ns"] = time.time_ns()
    code = run.proc.wait()
    close_window(run, None)
    stop_leftovers(run, "program")
    run.exit_code = code
    run.summary = program_results(run.out, run.opts.accept_len_convention, run.opts.results)
    run.dilation = program_dilation(run)
    if code != 0:
        raise CaptureError(with_log_tail(f"program exited with {describe_exit(code)}", run.log, 10))


def run_baseline(run: CaptureSession) -> None:
    """The program as it is (no profiler, no hooks), ``--baseline-repeat`` times (outputs in
    ``OUT/baseline/``, or ``OUT/baseline/run-N/`` for several): the run of median rate is the
    unprofiled anchor. A host whose speed differs 30-40% from one process to the next (the
    H200 bench's) makes one run a poor anchor; the first process after a machine starts is
    often the slowest."""
    n = run.opts.baseline_repeat
    runs = [_one_baseline(run, i, n) for i in range(n)]
    rates = [r["results"].get("tokens_per_s") for r in runs]
    rated = sorted(
        (i for i, v in enumerate(rates) if isinstance(v, (int, float)) and v > 0),
        key=lambda i: rates[i],
    )
    run.baseline = runs[rated[(len(rated) - 1) // 2]] if rated else runs[0]
    if n > 1:
        run.baseline["runs_tokens_per_s"] = rates


def _one_baseline(run: CaptureSession, i: int, n: int) -> dict:
    folder = run.out / BASELINE_DIR / (f"run-{i + 1}" if n > 1 else "")
    env = {k: v for k, v in os.environ.items()} | {"VERIFYPROF_CAPTURE_DIR": str(folder.resolve())}
    what = "baseline run" + (f" {i + 1} of {n}" if n > 1 else "")
    run.console.print(f"verifyprof: {what} (no profiler, no hooks) for the unprofiled rate")
    started = time.monotonic()
    with stop_signals_deferred():
        run.proc = ManagedProcess(run.target, log=folder / "program.log", env=env, echo=sys.stderr)
    code = run.proc.wait()
    stop_leftovers(run, what)
    run.proc.stop(int_timeout=run.opts.stop_timeout)  # closes its log
    run.proc = None
    if code != 0:
        raise CaptureError(
            with_log_tail(f"{what} exited with {describe_exit(code)}", folder / "program.log", 10)
        )
    return {
        "exit_code": code,
        "wall_s": time.monotonic() - started,
        "results": program_results(folder, run.opts.accept_len_convention, run.opts.results),
    }


def stop_leftovers(run: CaptureSession, what: str) -> None:
    """The program exited: capture goes on, and stops what it left running (the program is what
    is waited for, not its detached children), saying so in one line."""
    assert run.proc is not None
    report = run.proc.stop_leftovers()
    if report.stopped:
        pids = ", ".join(map(str, report.stopped[:8])) + (
            ", ..." if len(report.stopped) > 8 else ""
        )
        run.console.print(
            f"verifyprof: the {what} exited, leaving {len(report.stopped)} process(es) running"
            f" (pid {pids}): stopped with {', then '.join(report.signals)}",
            markup=False,
            highlight=False,
        )


def program_dilation(run: CaptureSession) -> dict | None:
    """profiled / unprofiled: the baseline run's ``tokens_per_s`` (``--baseline-run``), else the
    program's own ``unprofiled_tokens_per_s`` (measured outside its profile window), against the
    ``tokens_per_s`` it reported under the profiler; None when neither was measured."""
    profiled = run.summary.get("tokens_per_s")
    if run.baseline is not None:
        unprofiled = run.baseline["results"].get("tokens_per_s")
        several = run.baseline.get("runs_tokens_per_s")
        samples = _sample_medians(run.summary, run.baseline["results"])
        if samples:  # the runs' own averages carry each one's cold sample: not its spread
            profiled, unprofiled = samples["profiled_median"], samples["unprofiled_median"]
            several = None
        record = dilation_record(
            profiled,
            unprofiled,
            "baseline run",
            baseline_wall_s=run.baseline["wall_s"],
            **({"baseline_runs_tokens_per_s": several} if several else {}),
            **({"samples": samples} if samples else {}),
            **_unprofiled_plain(run.baseline["results"]),
        )
        if record["factor"] is None:
            record["note"] = (
                "the baseline run or the profiled run wrote no tokens_per_s to results.json"
            )
        return record
    if run.summary.get("unprofiled_tokens_per_s") is not None:
        return dilation_record(profiled, run.summary["unprofiled_tokens_per_s"], "program results")
    return None


MIN_SAMPLES = 3  # a median that can leave out one cold sample


def _sample_medians(profiled: dict, unprofiled: dict) -> dict | None:
    """Both runs' per-sample rates (``--result tokens_per_s_samples[]=...``) and their medians,
    where each printed at least :data:`MIN_SAMPLES`: a program that averages its samples counts
    its first, cold one (cuBLAS handles, the allocator, first launches) as if it were steady."""
    runs = [r.get("tokens_per_s_samples") for r in (profiled, unprofiled)]
    if not all(
        isinstance(r, list) and len(positive_numbers(r)) == len(r) >= MIN_SAMPLES for r in runs
    ):
        return None
    return {
        "profiled": runs[0],
        "unprofiled": runs[1],
        "profiled_median": float(statistics.median(runs[0])),
        "unprofiled_median": float(statistics.median(runs[1])),
        "note": "the rates above are the medians of the program's per-sample rates",
    }


def _unprofiled_plain(results: dict) -> dict:
    """The program's own plain-decoding rate in the unprofiled run, where it measured one: what
    speculation at the unprofiled rate races (the profiled run's is dilated too)."""
    rate = results.get("baseline_tokens_per_s")
    ok = isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0
    return {"unprofiled_baseline_tokens_per_s": float(rate)} if ok else {}


def describe_exit(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"
