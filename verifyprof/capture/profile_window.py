"""The capture window: SGLang's ``/start_profile`` and ``/stop_profile`` requests and the wall-clock
times around them, recorded in the manifest so a trace can be matched to the workload it saw.

Its own module because the server flow opens and closes the window, the program flow only times
it, and the cleanup must close it when a run stops early (so the profiler writes what it has)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from verifyprof.capture import driver
from verifyprof.capture.server import CaptureError

if TYPE_CHECKING:
    from verifyprof.capture.session import CaptureSession

TORCH_TRACE_DIR = "torch"


def profile_body(backend: str, out: Path, num_steps: int | None) -> dict:
    """The ``/start_profile`` request (SGLang ``ProfileReq``, fields every version since 0.4
    takes)."""
    if backend == "nsys":
        body: dict = {"activities": ["CUDA_PROFILER"]}
    else:
        body = {
            "activities": ["CPU", "GPU"],
            "output_dir": str((out / TORCH_TRACE_DIR).resolve()),
            "with_stack": False,
            "record_shapes": False,
        }
    if num_steps is not None:
        body["num_steps"] = num_steps
    return body


def start_profile(run: CaptureSession) -> None:
    body = profile_body(run.opts.backend, run.out, run.opts.num_steps)
    run.window["start_unix_ns"] = time.time_ns()
    status, raw = driver.post_json(run.base_url + "/start_profile", body, timeout=120)
    run.window["start_reply"] = raw.decode("utf-8", errors="replace").strip()[:500]
    if status != 200:
        raise CaptureError(
            f"POST /start_profile {body} failed: HTTP {status}: {run.window['start_reply'][:200]}"
        )
    run.profiling = True


def stop_profile(run: CaptureSession, timeout: float = 600.0) -> None:
    run.window["stop_sent_unix_ns"] = time.time_ns()
    status, raw = driver.post_json(run.base_url + "/stop_profile", {}, timeout=timeout)
    run.profiling = False
    close_window(run, raw.decode("utf-8", errors="replace").strip()[:500])
    if status != 200 and run.opts.num_steps is None:
        raise CaptureError(
            f"POST /stop_profile failed: HTTP {status}: {run.window['stop_reply'][:200]}"
        )
    # With --num-steps the server stopped by itself; its "not in progress" reply is expected.


def close_window(run: CaptureSession, reply: str | None) -> None:
    end = time.time_ns()
    run.window.update(
        end_unix_ns=end, duration_ns=end - run.window.get("start_unix_ns", end), stop_reply=reply
    )
