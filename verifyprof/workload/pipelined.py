"""Verify forwards launched back to back with no host sync between them (``--pipelined N``).

As under SGLang's overlap scheduler, the host runs ahead of the GPU: with CUDA graphs each
replay is queued in microseconds, so the host range of step i closes long before the GPU runs
step i's work, and the step's host window mostly covers the GPU running *earlier* steps. The
steps' true cost is what each occupies on the GPU: a CUDA event recorded on the stream just
before and just after each step's range measures exactly that (its start event fires when the
GPU reaches the step, not when the host issued it), independently of any trace. The summary
keeps those per-step occupancies beside the host's own per-step times, so a test can check a
trace-based breakdown of the same steps against them.

Range: ``verifyprof.verify bs=B tokens=k+1 graph=G pipelined=1`` (``compile=1`` in mode
"compile"), payload = step index. Every step verifies the same ``[last, drafts]`` window: the
lengths do not move, so each forward does the same work.
"""

from __future__ import annotations

import time
from typing import Any

from verifyprof.contracts.ranges import VERIFY
from verifyprof.workload.clock import stats


def run_pipelined(workload: Any, mode: str, steps: int) -> dict[str, Any]:
    """``steps`` verify forwards in ``mode`` queued without a sync; one sync at the end."""
    run, clock = workload.run_cfg, workload.clock
    graph, compiled = workload.verify_flags(mode)
    width = run.num_draft + 1
    workload.state.reset()
    workload._sync()
    starts, ends, host_ms = [], [], []
    host_begin = time.perf_counter_ns()
    for i in range(steps):
        starts.append(clock.mark())
        opened = time.perf_counter_ns()
        with workload.range(
            VERIFY,
            payload=i,
            bs=run.batch,
            tokens=width,
            graph=int(graph),
            compile=1 if compiled else None,
            pipelined=1,
        ):
            workload.verify(graph, compiled)
        host_ms.append((time.perf_counter_ns() - opened) / 1e6)
        ends.append(clock.mark())
    host_end = time.perf_counter_ns()
    workload._sync()
    synced = time.perf_counter_ns()
    occupancy = [clock.ms(a, b) for a, b in zip(starts, ends)]
    gaps = [clock.ms(b, a) for b, a in zip(ends, starts[1:])]
    return {
        "kind": "verify_pipelined",
        "mode": mode,
        "graph": graph,
        "compile": compiled,
        "bs": run.batch,
        "width": width,
        "tokens": width * run.batch,
        "steps": steps,
        # GPU occupancy of each step: its start event to its end event on the stream
        "verify_ms": stats(occupancy),
        # GPU time between one step's end event and the next one's start (about 0 when queued)
        "gpu_gap_ms": stats(gaps),
        # host time inside each step's range (launch only: the host does not wait)
        "host_ms": stats(host_ms),
        "gpu_elapsed_ms": clock.ms(starts[0], ends[-1]),
        "host_elapsed_ms": (host_end - host_begin) / 1e6,
        # how long the final sync waited: the queued work the host had run ahead by
        "host_wait_ms": (synced - host_end) / 1e6,
        "per_step": {"verify_ms": occupancy, "gpu_gap_ms": gaps, "host_ms": host_ms},
    }
