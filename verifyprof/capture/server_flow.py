"""The capture of a server, once it is started: wait for health, warm up, open the profile window,
drive the workload with a progress bar, close the window, and summarise what the requests and the
server reported (accept length, tok/s, version); for the torch backend, wait for the traces the
server writes after the window closed."""

from __future__ import annotations

import contextlib
import json
import time

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from verifyprof.capture import driver
from verifyprof.capture.profile_window import (
    TORCH_TRACE_DIR,
    close_window,
    start_profile,
    stop_profile,
)
from verifyprof.capture.request import workloads
from verifyprof.capture.server import (
    CaptureError,
    http_get,
    wait_healthy,
    with_log_tail,
)
from verifyprof.capture.session import CaptureSession
from verifyprof.contracts.manifest_records import dilation_record

LOAD_KEYS = ("requests_ok", "tokens_per_s", "tokens_per_s_per_request", "accept_len")


def serve(run: CaptureSession) -> None:
    opts, proc = run.opts, run.proc
    assert proc is not None
    with run.console.status(f"waiting for {run.base_url}/health (up to {opts.health_timeout:g} s)"):
        took = wait_healthy(run.base_url, proc, timeout=opts.health_timeout)
    run.console.print(f"verifyprof: server healthy after {took:.1f} s")
    run.deadline = (time.monotonic() + opts.deadline, opts.deadline)  # every request from here
    prompts = run.prompts
    if opts.warmup:
        warm = driver.Workload(
            opts.warmup,
            min(opts.concurrency, opts.warmup),
            opts.output_len,
            opts.input_len,
            opts.temperature,
            opts.request_timeout,
        )
        with run.console.status(f"warming up ({opts.warmup} requests)"):
            warm_results = driver.run_workload(
                run.base_url,
                warm,
                prompts,
                first_index=opts.requests,
                server_alive=proc.alive,
                deadline=run.deadline,
            )
        failed = [r for r in warm_results if not r.ok]
        if failed:
            raise CaptureError(
                with_log_tail(f"warm-up request failed: {failed[0].error}", run.log, 10)
            )
        with contextlib.suppress(driver.ServerGone, TimeoutError):
            driver.post_json(run.base_url + "/flush_cache", {}, timeout=30)
    if opts.backend != "none":
        start_profile(run)
    else:
        run.window["start_unix_ns"] = time.time_ns()
    for workload in workloads(opts):
        concurrency = workload.concurrency
        first, start = len(run.results), time.time_ns()
        _drive(run, workload, prompts)
        if opts.loads:  # each load's own window and rates: whatif splits the trace by them
            rates = driver.summarize(run.results[first:])
            run.loads.append(
                {"concurrency": concurrency, "start_unix_ns": start, "end_unix_ns": time.time_ns()}
                | {k: rates.get(k) for k in LOAD_KEYS}
            )
    if opts.backend != "none":
        stop_profile(run)
    else:
        close_window(run, None)
    run.summary = driver.summarize(run.results, driver.server_accept_length(run.base_url))
    run.server_version = _server_version(run.base_url)
    if run.server_version:
        run.versions["server"] = run.server_version
    failed = run.summary["requests_failed"]
    if failed == len(run.results):
        first = next(r.error for r in run.results if not r.ok)
        raise CaptureError(f"all {failed} requests failed, the first with {first}")
    if opts.backend == "torch":
        _wait_for_torch_traces(run)
    if opts.backend != "none":
        _unprofiled_rate(run, prompts)


def unprofiled_count(opts) -> int:
    """Requests sent after the window: ``--unprofiled-requests``, else enough to fill the
    concurrency."""
    if opts.unprofiled_requests is not None:
        return opts.unprofiled_requests
    return min(opts.requests, max(4, opts.concurrency))


def _unprofiled_rate(run: CaptureSession, prompts: list[driver.Prompt]) -> None:
    """The server's rate with the profile window closed (after the torch traces were written: their
    export runs in the server), against the window's: the manifest's ``dilation``. Per-request
    tok/s, which does not depend on how many requests there were. Never fails the capture."""
    opts = run.opts
    n = unprofiled_count(opts)
    if n == 0:
        return
    profiled = run.summary.get("tokens_per_s_per_request")
    workload = driver.Workload(
        n,
        min(opts.concurrency, n),
        opts.output_len,
        opts.input_len,
        opts.temperature,
        opts.request_timeout,
    )
    try:
        with run.console.status(f"{n} requests after the profile window (the unprofiled rate)"):
            results = driver.run_workload(
                run.base_url,
                workload,
                prompts,
                first_index=opts.requests + opts.warmup,
                server_alive=run.proc.alive if run.proc else None,
                deadline=run.deadline,
            )
        after = driver.summarize(results)
    except (driver.ServerGone, driver.DeadlinePassed, TimeoutError, OSError) as err:
        run.dilation = dilation_record(
            profiled,
            None,
            "requests after the window",
            "tokens_per_s_per_request",
            note=f"requests after the window failed: {err}",
        )
        return
    run.dilation = dilation_record(
        profiled,
        after.get("tokens_per_s_per_request"),
        "requests after the window",
        "tokens_per_s_per_request",
        requests=n,
        requests_ok=after["requests_ok"],
        unprofiled_accept_len=after.get("accept_len"),
    )


def _drive(run: CaptureSession, workload: driver.Workload, prompts: list[driver.Prompt]) -> None:
    assert run.proc is not None
    tokens = 0
    t0 = time.perf_counter()
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[rate]}"),
    )
    with Progress(*columns, console=run.console, transient=False) as progress:
        task = progress.add_task("requests", total=workload.requests, rate="")

        def on_result(result: driver.RequestResult) -> None:
            nonlocal tokens
            run.results.append(result)
            tokens += result.completion_tokens or 0
            elapsed = time.perf_counter() - t0
            progress.update(
                task, advance=1, rate=f"{tokens / elapsed:,.0f} tok/s" if elapsed > 0 else ""
            )

        driver.run_workload(
            run.base_url,
            workload,
            prompts,
            server_alive=run.proc.alive,
            on_result=on_result,
            deadline=run.deadline,
        )


def _wait_for_torch_traces(run: CaptureSession) -> None:
    """SGLang exports each rank's trace after replying to /stop_profile (or after num_steps)."""
    root = run.out / TORCH_TRACE_DIR
    deadline = time.monotonic() + run.opts.trace_wait
    last: tuple = ()
    stable_since = None
    with run.console.status("waiting for the server's torch-profiler traces"):
        while time.monotonic() < deadline:
            files = (
                tuple(sorted((p.name, p.stat().st_size) for p in root.glob("*.json*")))
                if root.is_dir()
                else ()
            )
            if files and files == last:
                stable_since = stable_since or time.monotonic()
                if time.monotonic() - stable_since >= 1.0:
                    return
            else:
                stable_since = None
            last = files
            time.sleep(0.2)
    if not last:
        raise CaptureError(
            f"the server wrote no torch-profiler trace into {root} within {run.opts.trace_wait:g} s"
        )


def _server_version(base_url: str) -> str | None:
    for path in ("/server_info", "/get_server_info"):
        with contextlib.suppress(Exception):
            status, raw = http_get(base_url + path, timeout=10)
            if status == 200:
                version = json.loads(raw).get("version")
                return str(version) if version else None
    return None
