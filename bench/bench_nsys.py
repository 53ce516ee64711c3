"""nsys speed benchmark (issue 2, "Speed"): breakdown of a 1M-kernel export vs sqlite3's fetchall.

    python bench/bench_nsys.py --kernels 1000000

Generates the export once with ``bench/gen_nsys_export.py`` (reused while its generator
arguments match), then measures, each in a fresh subprocess so peak RSS is its own, interleaved
round by round (``--repeat`` rounds; ratios are taken within a round, then the median, so a
shared machine's load swings cancel):

* ``fetchall``: Python's sqlite3 ``fetchall()`` of exactly the rows and columns the reader needs:
  the kernel columns, and the runtime/driver rows whose name is a launch, copy, memset or
  synchronize call (the reader's own SQL filter).
* ``reader``: ``read_nsys_sqlite(path)``.
* ``breakdown``: ``load_trace(path)``, ``breakdown(trace)`` and the JSON streamed to /dev/null:
  what ``verifyprof breakdown --json`` does.
* ``table``: the same with only the summary: what plain ``verifyprof breakdown`` computes.

Times exclude interpreter start and imports (reported separately as ``process`` seconds). Targets:
breakdown time <= fetchall time, breakdown peak RSS < 400 MB.

A stage-level micro-benchmark: it times the nsys reader and the breakdown themselves, below
any run (``bench_cli_process.py`` times the CLI as a user runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

TARGET_RATIO = 1.0
TARGET_RSS_MB = 400


# --- measured things (run inside a subprocess) ------------------------------------------------


def fetchall(path: Path) -> dict:
    from verifyprof.trace.nsys.activity import API_CANDIDATE_SQL, API_NAME

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t = time.perf_counter()
    ids = [
        i
        for i, v in con.execute(f"SELECT id, value FROM StringIds WHERE {API_CANDIDATE_SQL}")
        if API_NAME.match(v)
    ]
    kernels = con.execute(
        'SELECT start, "end", deviceId, streamId, correlationId, globalPid, demangledName,'
        " graphNodeId, graphId FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ).fetchall()
    runtime = con.execute(
        'SELECT start, "end", globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME'
        f" WHERE nameId IN ({','.join(map(str, ids))})"
    ).fetchall()
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "rows": {"kernels": len(kernels), "runtime": len(runtime)}}


def reader(path: Path) -> dict:
    from verifyprof.trace.nsys.reader import read_nsys_sqlite

    t = time.perf_counter()
    trace = read_nsys_sqlite(path)
    seconds = time.perf_counter() - t
    return {
        "seconds": seconds,
        "rows": {"kernels": len(trace.kernels), "api": len(trace.api), "ranges": len(trace.ranges)},
    }


def breakdown(path: Path, records: bool = True) -> dict:
    from verifyprof.attribution.breakdown import breakdown as run_breakdown
    from verifyprof.trace import load_trace

    t = time.perf_counter()
    trace = load_trace(path)
    t_read = time.perf_counter() - t
    result = run_breakdown(trace, release=True)  # as the CLI runs it
    if records:  # what --json prints: every step record plus the summary, streamed
        from verifyprof.report.files import stream_breakdown_json

        with open(os.devnull, "wb") as sink:
            stream_breakdown_json(result, sink)
    else:
        result.summary()  # what the default table shows
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "read_seconds": t_read, "rows": {"steps": len(result.steps)}}


def table(path: Path) -> dict:
    return breakdown(path, records=False)


MEASURES = {"fetchall": fetchall, "reader": reader, "breakdown": breakdown, "table": table}


def peak_rss_mb() -> float:
    """This process's peak RSS. Linux's ru_maxrss carries the parent's RSS over fork+exec, so
    prefer the new image's own high-water mark (VmHWM)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_in_subprocess(name: str, path: Path) -> dict:
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--measure", name, "--path", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = wall
    return result


# --- driver ---------------------------------------------------------------------------------


def export_for(kernels: int, ranks: int, out_dir: Path, regenerate: bool) -> Path:
    sys.path.insert(0, str(HERE))
    import gen_nsys_export

    path = out_dir / f"nsys_{kernels}_{ranks}r.sqlite"
    wanted = f"kernels={kernels} ranks={ranks} "
    if path.exists() and not regenerate:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = con.execute(
                "SELECT value FROM META_DATA_EXPORT WHERE name = 'GENERATOR_ARGS'"
            ).fetchone()
        except sqlite3.DatabaseError:
            row = None
        con.close()
        if row and row[0].startswith(wanted):
            print(f"reusing {path}")
            return path
    print(f"generating {path} ...", flush=True)
    # in its own process: the benchmark's children should not inherit a large parent
    subprocess.run(
        [
            sys.executable,
            gen_nsys_export.__file__,
            "--kernels",
            str(kernels),
            "--ranks",
            str(ranks),
            "-o",
            str(path),
        ],
        check=True,
    )
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each measurement (best reported)"
    )
    parser.add_argument(
        "--out", type=Path, default=HERE / "out", help="where the generated export lives"
    )
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=list(MEASURES),
        help="leave a measurement out",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--measure", choices=list(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.measure:  # child: one measurement, one JSON line
        result = MEASURES[args.measure](args.path)
        result["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(result))
        return

    path = export_for(args.kernels, args.ranks, args.out, args.regenerate)
    names = [n for n in MEASURES if n not in args.skip]
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for i in range(args.repeat):
        for name in names:
            runs[name].append(measure_in_subprocess(name, path))
            r = runs[name][-1]
            print(
                f"  run {i + 1} {name:<9} {r['seconds']:7.3f} s  peak {r['peak_rss_mb']:6.0f} MB "
                f" {r['rows']}",
                flush=True,
            )
    best = {n: min(rs, key=lambda r: r["seconds"]) for n, rs in runs.items()}
    peak = {n: max(r["peak_rss_mb"] for r in rs) for n, rs in runs.items()}
    # ratios within each round (same machine load), then their median: robust on a shared machine
    round_ratio = {
        n: sorted(r["seconds"] / f["seconds"] for r, f in zip(runs[n], runs["fetchall"]))
        for n in names
        if "fetchall" in runs
    }
    median = {n: v[len(v) // 2] for n, v in round_ratio.items()}

    print(
        f"\nnsys export: {path.name} ({path.stat().st_size / 1e6:.0f} MB), {os.cpu_count()} CPUs,"
        f" {args.repeat} rounds, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'measure':<10} {'best s':>8} {'median ratio':>13} {'peak MB':>8} {'process s':>10}")
    for name in names:
        b = best[name]
        ratio = f"{median[name]:13.2f}" if name in median else f"{'-':>13}"
        print(
            f"{name:<10} {b['seconds']:8.3f} {ratio} {peak[name]:8.0f} {b['process_seconds']:10.2f}"
        )
    summary = {
        "export": str(path),
        "kernels": args.kernels,
        "ranks": args.ranks,
        "cpus": os.cpu_count(),
        "runs": runs,
        "best": best,
        "peak_rss_mb": peak,
        "median_ratio": median,
    }
    if "breakdown" in median:
        ratio = median["breakdown"]
        ok_time = ratio <= TARGET_RATIO
        ok_mem = peak["breakdown"] < TARGET_RSS_MB
        print(
            f"\nbreakdown / fetchall = {ratio:.2f} (median of rounds; target <= {TARGET_RATIO}):"
            f" {'PASS' if ok_time else 'FAIL'}; peak {peak['breakdown']:.0f} MB (target <"
            f" {TARGET_RSS_MB}): {'PASS' if ok_mem else 'FAIL'}"
        )
        print(f"  of which load_trace: {best['breakdown']['read_seconds']:.3f} s (best round)")
        summary.update(pass_time=ok_time, pass_memory=ok_mem)
    if "table" in median:
        print(
            f"table (default output) / fetchall = {median['table']:.2f}; peak"
            f" {peak['table']:.0f} MB"
        )
    if "reader" in median:
        print(
            f"reader / fetchall = {median['reader']:.2f} (median of rounds); reader peak"
            f" {peak['reader']:.0f} MB"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
