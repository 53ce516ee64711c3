"""What each contender of ``bench_ranks.py`` measures, in its own fresh interpreter
(``bench_ranks.py --measure NAME FILES...`` runs one and prints one JSON line): the baselines
(sqlite3 fetchall, json.loads), the breakdown as the CLI runs it (one file, per-rank files over
local workers or a Dask LocalCluster, under the CLI's status line on a pseudo-terminal), and the
machine's own ceiling on a 2-process speedup. Times exclude interpreter start and imports, except
the ``process`` contenders': a fresh process timed from exec to exit, as a user runs it.

A stage-level micro-benchmark: the readers and the breakdown timed themselves, below any run.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path

# --- measured things (each in its own subprocess) ------------------------------------------------


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (map workers), user and system."""
    import resource

    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def m_fetchall(paths: list[Path]) -> dict:
    from bench_nsys import fetchall

    import verifyprof.trace.nsys.activity  # noqa: F401 - fetchall's import, before the CPU clock

    cpu = _cpu()
    results = [fetchall(p) for p in paths]
    return {
        "seconds": sum(r["seconds"] for r in results),
        "rows": sum(r["rows"]["kernels"] for r in results),
        "cpu_s": _cpu() - cpu,
    }


def m_json_loads(paths: list[Path]) -> dict:
    t = time.perf_counter()
    events = 0
    for path in paths:
        doc = json.loads(path.read_bytes())
        events += len(doc["traceEvents"])
        del doc
    return {"seconds": time.perf_counter() - t, "rows": events}


def _breakdown(
    paths: list[Path],
    records: bool,
    workers: int | None = None,
    scheduler: str | None = None,
    terminal: str | None = None,
) -> dict:
    """As the CLI runs it; ``terminal``: under its status line, drawn on stderr (a pty), "paused"
    while workers fork (as the CLI does) or "threaded" (its thread running: workers from a fork
    server).
    """
    import rich.progress  # noqa: F401 - imported before the clock, as every contender's imports are

    from verifyprof import pipeline
    from verifyprof.report import progress
    from verifyprof.report.files import stream_breakdown_json

    cpu = _cpu()
    t = time.perf_counter()
    source = [str(p) for p in paths] if len(paths) > 1 else paths[0]
    whole = paths[0].name.endswith(
        ".json"
    )  # the tiled vLLM trace has no verify ranges: as bench_kineto.py
    with progress.status("breaking down", quiet=terminal is None) as shown:
        if terminal is not None and shown.drawn is False:
            raise SystemExit("stderr is not a terminal: no status line to measure under")
        pause = shown.paused if terminal == "paused" else None
        parallel = pipeline.ParallelOptions(
            workers=workers,
            scheduler=scheduler,
            strict=True,
            own_process=True,
            pause=pause,
            progress=shown.count if terminal is not None else None,
        )
        result = pipeline.breakdown(source, release=True, whole_trace=whole, parallel=parallel)
    if records:
        with open(os.devnull, "wb") as sink:
            stream_breakdown_json(result, sink)
    else:
        result.summary()
    seconds = time.perf_counter() - t
    return {
        "seconds": seconds,
        "rows": len(result.steps),
        "cpu_s": _cpu() - cpu,
        "code": str(Path(pipeline.__file__).parents[2]),  # the checkout measured
    }


def m_table(paths):
    """What ``verifyprof breakdown`` does by default: a large many-process export read in shares,
    one per CPU."""
    return _breakdown(paths, records=False)


def m_table_apart(paths):
    """The default as it was: each share of the export's processes queries its own rows (the
    kernel and runtime tables scanned once per share), not taken from one read."""
    from verifyprof.trace.nsys import shared_read

    shared_read.ENABLED = False
    return _breakdown(paths, records=False)


def m_table_tty(paths):
    """The default, run from a terminal: the shares' workers fork while the status line waits."""
    return _breakdown(paths, records=False, terminal="paused")


def m_table_tty_threaded(paths):
    return _breakdown(paths, records=False, terminal="threaded")


def m_json(paths):
    return _breakdown(paths, records=True)


def m_json_whole(paths):
    """``--workers 1``: the export read whole in this process."""
    return _breakdown(paths, records=True, workers=1)


def m_w1(paths):
    return _breakdown(paths, records=True, workers=1)


def m_w2(paths):
    return _breakdown(paths, records=True, workers=2)


def m_w2_terminal(paths):
    return _breakdown(paths, records=True, workers=2, terminal="paused")


def m_w2_threaded(paths):
    return _breakdown(paths, records=True, workers=2, terminal="threaded")


def m_w8(paths):
    return _breakdown(paths, records=True, workers=8)


def m_dask(paths):
    """A LocalCluster of 2 single-threaded worker processes, started before the clock runs."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=50,
        )
    try:
        return _breakdown(paths, records=True, scheduler=cluster.scheduler_address)
    finally:
        cluster.close()


# --- as a user runs it (issue 43): whole fresh processes, interpreter start and imports included


def _code() -> Path:
    """The checkout this measure imports (this one, or ``--against``'s): the processes run its
    code."""
    import verifyprof

    return Path(verifyprof.__file__).resolve().parents[1]


def m_process_fetchall(paths):
    """``python -c`` connect and fetchall of the two queries the breakdown needs, exec to exit."""
    from bench_cli_process import FETCHALL, measured

    return measured([sys.executable, "-c", FETCHALL, str(paths[0])], _code())


def m_process_table(paths):
    """``python -m verifyprof.cli breakdown FILE``, exec to exit (stdout to /dev/null)."""
    from bench_cli_process import CLI, measured

    return measured([*CLI, str(paths[0])], _code())


def m_process_json(paths):
    from bench_cli_process import CLI, measured

    return measured([*CLI, str(paths[0]), "--json"], _code())


def m_process_first_output(paths):
    """Exec to the CLI's first byte on a terminal (its status line)."""
    from bench_cli_process import CLI, first_output

    return {"seconds": first_output([*CLI, str(paths[0])], _code()), "rows": 0}


# --- the machine's own ceiling on a 2-process speedup ---------------------------------------------


SPIN = 20_000_000


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x += i & 7
    return x


def _decode(paths: list[Path]) -> None:
    from verifyprof.pipeline.heap import keep_freed_memory
    from verifyprof.trace.kineto.decode import decode_file

    keep_freed_memory()  # as a map worker
    for path in paths:
        decode_file(path)  # read + msgspec's typed decode: the map's main cost, none of the rest


def _in_processes(work, shares: list) -> float:
    """Seconds for ``work(share)`` run in one forked process per share, all at once."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    t = time.perf_counter()
    procs = [context.Process(target=work, args=(share,)) for share in shares]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return time.perf_counter() - t


def m_spin1(paths):
    """A pure-Python loop (no memory traffic) in one process."""
    return {"seconds": _in_processes(_spin, [SPIN]), "rows": SPIN}


def m_spin2(paths):
    """The same loop in 2 processes at once (twice the work): 2 x spin1 / spin2 is the ceiling."""
    return {"seconds": _in_processes(_spin, [SPIN, SPIN]) / 2, "rows": SPIN}


def _preload() -> None:
    """The decode's modules imported before the clock runs (a map worker has them already)."""
    for module in ("verifyprof.pipeline.heap", "verifyprof.trace.kineto.decode"):
        importlib.import_module(module)


def m_decode1(paths):
    """Every Kineto file read and decoded (the reader's msgspec structs, nothing after) in one
    process."""
    _preload()

    return {"seconds": _in_processes(_decode, [paths]), "rows": len(paths)}


def m_decode2(paths):
    """The same files split over 2 processes at once."""
    _preload()

    half = len(paths) // 2
    return {"seconds": _in_processes(_decode, [paths[:half], paths[half:]]), "rows": len(paths)}


MEASURES = {
    "fetchall": m_fetchall,
    "json.loads": m_json_loads,
    "table": m_table,
    "table, shares read apart": m_table_apart,
    "table on a tty": m_table_tty,
    "table on a tty, no pause": m_table_tty_threaded,
    "json-out": m_json,
    "json-whole": m_json_whole,
    "1 worker": m_w1,
    "2 workers": m_w2,
    "8 workers": m_w8,
    "2 workers on a tty": m_w2_terminal,
    "2 workers on a tty, no pause": m_w2_threaded,
    "LocalCluster(2)": m_dask,
    "process fetchall": m_process_fetchall,
    "process table": m_process_table,
    "process json": m_process_json,
    "process first output": m_process_first_output,
    "spin x1": m_spin1,
    "spin x2": m_spin2,
    "decode x1": m_decode1,
    "decode x2": m_decode2,
}
