"""What keeping freed memory saves a map worker (verifyprof/pipeline/heap.py), and how two
concurrent workers slow each other: per file, wall time, minor page faults, system and user time.

    python bench/probe_heap.py                                   # the bench_ranks Kineto rank files
    python bench/probe_heap.py bench/out/ranks/nsys_1000000_8r_split/rank-*.sqlite

For each setting (glibc's own; freed memory kept, as a worker keeps it), one forked process maps
the first half of the files one after another, then two forked processes map a half each at
once. Prints every file, then per setting the two totals and the ratios. Make the inputs first
with ``python bench/bench_ranks.py --repeat 1`` (they stay under ``bench/out/ranks/``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
DEFAULT = sorted((HERE / "out" / "ranks" / "kineto_150mb_8r").glob("bench-TP-*.trace.json"))


def _map(tag: str, files: list[str], keep: bool, whole: bool) -> None:
    from verifyprof.pipeline.heap import keep_freed_memory
    from verifyprof.pipeline.map_task import MapOptions, map_file

    if keep:
        keep_freed_memory()
    lines = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    for path in files:
        t = time.perf_counter()
        map_file(path, 0, MapOptions(whole_trace=whole))
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_SELF)
        lines.append(
            f"{tag} {Path(path).name}: {wall:.3f} s, minflt {after.ru_minflt - before.ru_minflt},"
            f" sys {after.ru_stime - before.ru_stime:.2f} s, user"
            f" {after.ru_utime - before.ru_utime:.2f} s"
        )
        before = after
    print("\n".join(lines), flush=True)


def _timed(context, jobs: list[tuple]) -> float:
    t = time.perf_counter()
    procs = [context.Process(target=_map, args=job) for job in jobs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    files = [str(f) for f in args.files]
    if len(files) < 2 or not all(Path(f).is_file() for f in files):
        sys.exit(
            "give two or more trace files (or make the default ones: python bench/bench_ranks.py"
            " --repeat 1)"
        )
    # imported before the forks, as the CLI's workers have it
    import verifyprof.pipeline.local_map  # noqa: F401

    whole = files[0].endswith(".json")  # the tiled vLLM trace has no verify ranges: as bench_ranks
    half = len(files) // 2
    context = multiprocessing.get_context("fork")
    totals = {}
    for keep in (False, True):
        label = "kept" if keep else "glibc"
        one = _timed(context, [(f"{label} 1 process", files[:half], keep, whole)])
        two = _timed(
            context,
            [
                (f"{label} 2 processes[{k}]", files[k * half : (k + 1) * half], keep, whole)
                for k in range(2)
            ],
        )
        totals[keep] = (one, two)
        print(
            f"== {label}: 1 process x {half} files {one:.2f} s; 2 processes x {half} files at once"
            f" {two:.2f} s (each slowed {two / one:.2f}x by the other)",
            flush=True,
        )
    (plain1, plain2), (kept1, kept2) = totals[False], totals[True]
    print(
        f"== freed memory kept / glibc's own: 1 process {kept1 / plain1:.2f}x, 2 processes"
        f" {kept2 / plain2:.2f}x"
    )


if __name__ == "__main__":
    main()
