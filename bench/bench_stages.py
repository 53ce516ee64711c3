"""Stage timings of one many-rank nsys export in one process: read, breakdown, summary, the
whole ``--json`` output (steps and summary, into a discarding sink) and the verdict's verify
profile, best of N, plus one rank file mapped in a fresh worker process vs in a worker that
mapped one before (what the persistent local workers save), and the parent's work after a map
of the 8 rank files (reduce, summary, ``--json`` output: first calls in a process).

    python bench/bench_stages.py                                  # the bench_ranks 8-rank inputs
    python bench/bench_stages.py --trace X.sqlite --rank-file R.sqlite --repeat 5

Inputs default to ``bench/out/ranks/`` (made by ``bench/bench_ranks.py``). Run it from another
checkout (``PYTHONPATH=OTHER python bench/bench_stages.py``) to compare two versions of the code.

A stage-level micro-benchmark: each stage timed on its own, below any run; its verify profile
stage (``model.inputs.profile.verify_profile``, the largest model step of the CLI's serial tail
after the map) is a model-level micro-benchmark.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "ranks"


def stages(trace_path: Path, repeat: int) -> dict[str, float]:
    from verifyprof import pipeline
    from verifyprof.attribution.breakdown import breakdown
    from verifyprof.model.inputs.profile import verify_profile
    from verifyprof.report.files import stream_breakdown_json

    best: dict[str, float] = {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        trace = pipeline.load(trace_path)
        t1 = time.perf_counter()
        result = breakdown(trace, release=True)
        t2 = time.perf_counter()
        result.summary()
        t3 = time.perf_counter()
        stream_breakdown_json(result, _Discard())
        t4 = time.perf_counter()
        frame = result.frame()
        t5 = time.perf_counter()
        verify_profile(frame)  # what the verdict models
        t6 = time.perf_counter()
        for name, seconds in (
            ("read", t1 - t0),
            ("breakdown", t2 - t1),
            ("summary", t3 - t2),
            ("--json output", t4 - t3),
            ("verify profile", t6 - t5),
        ):
            best[name] = min(best.get(name, seconds), seconds)
    return best


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)


def _map(
    path: str, times: int, queue
) -> None:  # in a worker: map the file ``times`` times, as a worker does
    from verifyprof.pipeline.map_task import MapOptions, map_file

    try:
        from verifyprof.pipeline.heap import (
            keep_freed_memory,
        )  # a worker keeps freed memory (absent in older code)
    except ImportError:
        pass
    else:
        keep_freed_memory()

    out = []
    for _ in range(times):
        t = time.perf_counter()
        map_file(path, 0, MapOptions())
        out.append(time.perf_counter() - t)
    queue.put(out)


def cold_and_warm(rank_file: Path, repeat: int) -> tuple[float, float]:
    """(best time in a fresh process, best time of the later maps in one process)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    runs = []
    for times in [1] * repeat + [repeat + 1]:
        process = context.Process(target=_map, args=(str(rank_file), times, queue))
        process.start()
        runs.append(queue.get())
        process.join()
    return min(r[0] for r in runs[:-1]), min(runs[-1][1:])


def _tail(
    files: list[str], queue
) -> None:  # in a fresh process: the parts made, then the parent's work after the map, once
    from verifyprof.attribution.reduce import reduce_parts
    from verifyprof.pipeline.map_task import MapOptions, map_file
    from verifyprof.report.files import stream_breakdown_json

    parts = [map_file(path, i, MapOptions()) for i, path in enumerate(files)]
    t0 = time.perf_counter()
    result = reduce_parts(parts, [])
    t1 = time.perf_counter()
    stream_breakdown_json(result, _Discard())  # the summary and the --json output
    queue.put((t1 - t0, time.perf_counter() - t1))


def parent_tail(rank_dir: Path, repeat: int) -> tuple[float, float]:
    """Best (reduce, summary + --json output) of the rank files' parts, each run the first in its
    process, as in the CLI's parent once its workers answered."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    files = [str(p) for p in sorted(rank_dir.glob("rank-*.sqlite"))]
    runs = []
    for _ in range(repeat):
        process = context.Process(target=_tail, args=(files, queue))
        process.start()
        runs.append(queue.get())
        process.join()
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=OUT / "nsys_1000000_8r.sqlite")
    parser.add_argument(
        "--rank-file", type=Path, default=OUT / "nsys_1000000_8r_split" / "rank-1.sqlite"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    for path in (args.trace, args.rank_file):
        if not path.exists():
            sys.exit(
                f"{path}: missing; run python bench/bench_ranks.py --skip-kineto --repeat 1 first"
            )
    import verifyprof

    print(
        f"code: {Path(verifyprof.__file__).parent}; {os.cpu_count()} CPUs, load average"
        f" {os.getloadavg()[0]:.1f}"
    )
    for name, seconds in stages(args.trace, args.repeat).items():
        print(f"{args.trace.name} {name:<13} best {seconds:6.3f} s")
    cold, warm = cold_and_warm(args.rank_file, args.repeat)
    print(
        f"{args.rank_file.name} map in a fresh process {cold:.3f} s, in a worker that mapped one"
        f" before {warm:.3f} s"
    )
    reduce, output = parent_tail(args.rank_file.parent, args.repeat)
    print(
        f"{args.rank_file.parent.name}: after the map, reduce {reduce:.3f} s, summary + --json"
        f" output {output:.3f} s (first calls in a process, as in the CLI's parent)"
    )


if __name__ == "__main__":
    main()
