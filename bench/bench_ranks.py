"""Many ranks (issue 14): breakdown of 8-rank sets, one file and one file per rank, local
workers and a Dask LocalCluster, against sqlite3 fetchall / json.loads of the same data.

    python bench/bench_ranks.py                       # 1M kernels over 8 ranks; Kineto 8 x 150 MB
    python bench/bench_ranks.py --kernels 200000 --kineto-mb 30 --repeat 1   # quick
    python bench/bench_ranks.py --skip-kineto --only "1 file" --against ../main   # before/after

Generates once under ``bench/out/ranks/`` (reused while the sizes match): the nsys export with 8
ranks (``gen_nsys_export.py``), the same events as 8 per-rank exports (``split_nsys_ranks.py``),
and 8 Kineto rank files (``gen_kineto_trace.py``'s tiling of the real B200 trace, then one copy
per rank with its own ``distributedInfo.rank``). Every contender runs in a fresh subprocess;
peak RSS is sampled (every 20 ms) over that process and all its descendants (workers), the
largest single process reported. Times exclude interpreter start and imports.

Prints: nsys one file (fetchall, table, --json), nsys 8 files (fetchall, 1 / 2 workers,
LocalCluster; 2 workers under the CLI's status line on a pseudo-terminal, its thread paused while
workers fork as the CLI does, and not paused: workers from a fork server), Kineto 8 files
(json.loads, 1 / 2 workers, LocalCluster), the cost of 1, 2, 4, 8
per-rank files with one worker (linear: constant per file), the targets, and the machine's own
ceiling on a 2-process speedup (a pure-Python loop, and the Kineto files' read + msgspec decode
alone, in 1 and 2 processes: a 2-worker map cannot scale better than its main cost does).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pty
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# the code measured: this checkout, or another one (--against: a contender run again on it)
CODE_ENV = "BENCH_RANKS_CODE"
sys.path.insert(0, os.environ.get(CODE_ENV) or str(REPO))
sys.path.insert(0, str(HERE))

RANKS = 8
DASK = importlib.util.find_spec("distributed") is not None  # the LocalCluster contender needs it
TARGET_NSYS_RATIO = 0.6
TARGET_RSS_MB = 400
TARGET_KINETO_SPEEDUP = 1.7


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
    "spin x1": m_spin1,
    "spin x2": m_spin2,
    "decode x1": m_decode1,
    "decode x2": m_decode2,
}


def _sample_peaks(pid: int, peaks: dict[int, float], stop: threading.Event) -> None:
    import psutil

    root = psutil.Process(pid)
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for proc in procs:
            try:
                peaks[proc.pid] = max(peaks.get(proc.pid, 0.0), proc.memory_info().rss / 2**20)
            except psutil.Error:
                pass
        stop.wait(0.02)


def _drain(master: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            return
        if not chunk:
            return
        into.append(chunk)


def run_measure(name: str, paths: list[Path], code: Path | None = None) -> dict:
    """One contender in a fresh interpreter (importing verifyprof from ``code``, default this
    checkout); its time, and the largest RSS of it or any worker."""
    command = [sys.executable, __file__, "--measure", name, *map(str, paths)]
    env = {**os.environ, CODE_ENV: str(code)} if code is not None else None
    peaks: dict[int, float] = {}
    stop = threading.Event()
    tty = (
        "on a tty" in name
    )  # stderr a pseudo-terminal (its output drained here), as a user's shell has it
    master, slave = pty.openpty() if tty else (None, None)
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=slave if tty else subprocess.PIPE,
        text=True,
        env=env,
    )
    sampler = threading.Thread(target=_sample_peaks, args=(child.pid, peaks, stop), daemon=True)
    sampler.start()
    drained: list[bytes] = []
    if tty:
        os.close(slave)
        drain = threading.Thread(target=_drain, args=(master, drained), daemon=True)
        drain.start()
    out, err = child.communicate()
    if tty:
        drain.join()
        os.close(master)
        err = b"".join(drained).decode(errors="replace")
    stop.set()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"{name} failed:\n{err}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = max(peaks.values(), default=0.0)
    result["parent_rss_mb"] = peaks.get(child.pid, 0.0)
    return result


# --- inputs ---------------------------------------------------------------------------------------


def nsys_inputs(kernels: int, out: Path) -> tuple[Path, list[Path]]:
    from bench_nsys import export_for
    from split_nsys_ranks import split

    whole = export_for(kernels, RANKS, out, regenerate=False)
    folder = out / f"nsys_{kernels}_{RANKS}r_split"
    files = sorted(folder.glob("rank-*.sqlite"))
    if len(files) != RANKS or any(f.stat().st_mtime < whole.stat().st_mtime for f in files):
        print(f"splitting {whole.name} per rank ...", flush=True)
        files = split(whole, folder)
    return whole, files


def kineto_inputs(mb: float, out: Path) -> list[Path]:
    folder = out / f"kineto_{mb:g}mb_{RANKS}r"
    files = [folder / f"bench-TP-{r}.trace.json" for r in range(RANKS)]
    if all(f.exists() for f in files):
        return files
    import gen_kineto_trace

    folder.mkdir(parents=True, exist_ok=True)
    base = folder / "tiled.json"
    print(f"generating {RANKS} Kineto rank files of {mb:g} MB ...", flush=True)
    gen_kineto_trace.generate(gen_kineto_trace.DEFAULT_SOURCE, base, mb, use_gzip=False)
    data = base.read_bytes()
    head, tail = data[:65536], data[65536:]
    for rank, path in enumerate(
        files
    ):  # each rank its own distributedInfo.rank (same-length edit of the header)
        ranked = head.replace(b'"rank": 0,', f'"rank": {rank},'.encode(), 1)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(ranked + tail)
        os.replace(tmp, path)
    base.unlink()
    return files


def count_rows(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
    finally:
        con.close()


# --- driver ---------------------------------------------------------------------------------------


def rounds(
    plan: list[tuple[str, str, list[Path]]], repeat: int, codes: dict[str, Path] | None = None
) -> dict[str, list[dict]]:
    """Every (label, measure, files) once per round, interleaved; ratios are taken within a
    round. ``codes``: the labels run on another checkout's code."""
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in plan}
    for i in range(repeat):
        for label, name, paths in plan:
            r = run_measure(name, paths, (codes or {}).get(label))
            runs[label].append(r)
            print(
                f"  round {i + 1} {label:<44} {r['seconds']:8.3f} s  peak"
                f" {r['peak_rss_mb']:6.0f} MB",
                flush=True,
            )
    return runs


def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def ratio(runs: dict[str, list[dict]], label: str, base: str) -> float:
    return median([a["seconds"] / b["seconds"] for a, b in zip(runs[label], runs[base])])


def report(runs: dict[str, list[dict]], groups: list[tuple[str, str, list[str]]]) -> dict:
    """One table per group: best time, median ratio to its baseline, largest process RSS, median
    CPU seconds (the contender's process and its workers: the work, whatever the machine's load)."""
    out = {}
    for title, base, labels in groups:
        if base not in runs:  # left out (--only)
            continue
        print(f"\n{title}")
        print(f"{'contender':<44} {'best s':>8} {'ratio':>7} {'peak MB':>8} {'CPU s':>6}")
        for label in [base, *labels]:
            if label not in runs:  # left out (--only)
                continue
            best = min(r["seconds"] for r in runs[label])
            peak = max(r["peak_rss_mb"] for r in runs[label])
            rel = ratio(runs, label, base)
            row = out.setdefault(label, {"best_s": round(best, 3), "peak_rss_mb": round(peak)})
            row["ratio" if "ratio" not in row else f"ratio to {base}"] = round(
                rel, 3
            )  # a row in two tables
            cpus = [r["cpu_s"] for r in runs[label] if "cpu_s" in r]
            cpu = median(cpus) if cpus else float("nan")  # processes and workers, all cores
            if cpus:
                row["cpu_s"] = round(cpu, 3)
            print(f"{label:<44} {best:8.3f} {rel:7.2f} {peak:8.0f} {cpu:6.2f}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kernels", type=int, default=1_000_000, help="nsys kernels over all 8 ranks"
    )
    parser.add_argument(
        "--kineto-mb",
        type=float,
        default=150.0,
        help="size of each Kineto rank file (uncompressed JSON)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "ranks")
    parser.add_argument("--skip-kineto", action="store_true")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run only the contenders whose label holds this text (repeatable), with the"
        " baselines they are measured against",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        help="another checkout (e.g. the code before a change): every contender but the"
        " baselines also runs on its code, right after this checkout's, in the same rounds",
    )
    parser.add_argument("--measure", choices=list(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:  # child: one measurement, one JSON line
        print(json.dumps(MEASURES[args.measure](args.paths)))
        return

    args.out.mkdir(parents=True, exist_ok=True)
    whole, per_rank = nsys_inputs(args.kernels, args.out)
    plan = [
        ("nsys 1 file: fetchall", "fetchall", [whole]),
        ("nsys 1 file: table", "table", [whole]),
        ("nsys 1 file: table, shares read apart", "table, shares read apart", [whole]),
        ("nsys 1 file: table on a tty", "table on a tty", [whole]),
        ("nsys 1 file: table on a tty, no pause", "table on a tty, no pause", [whole]),
        ("nsys 1 file: --json", "json-out", [whole]),
        ("nsys 1 file: --json --workers 1", "json-whole", [whole]),
        ("nsys 8 files: fetchall", "fetchall", per_rank),
    ]
    pools = (
        ["1 worker", "2 workers"]
        + (["8 workers"] if (os.cpu_count() or 1) >= 8 else [])
        + (["LocalCluster(2)"] if DASK else [])
    )
    on_tty = [
        "2 workers on a tty",
        "2 workers on a tty, no pause",
    ]  # the CLI's status line drawn: nsys only (Kineto's files take ~10 s)
    plan += [(f"nsys 8 files: {w}", w, per_rank) for w in pools + on_tty]
    plan += [(f"nsys {n} files: 1 worker", "1 worker", per_rank[:n]) for n in (1, 2, 4)]
    kineto = [] if args.skip_kineto else kineto_inputs(args.kineto_mb, args.out)
    if kineto:
        plan += [("kineto 8 files: json.loads", "json.loads", kineto)]
        plan += [(f"kineto 8 files: {w}", w, kineto) for w in pools]
        plan += [
            ("ceiling: spin, 1 process", "spin x1", []),
            ("ceiling: spin, 2 processes", "spin x2", []),
            ("ceiling: decode, 1 process", "decode x1", kineto),
            ("ceiling: decode, 2 processes", "decode x2", kineto),
        ]
    if args.only:  # the chosen contenders, and the baseline of each one's set
        chosen = [p for p in plan if any(o in p[0] for o in args.only)]
        sets = {label.split(":")[0] for label, _, _ in chosen}
        plan = [
            p
            for p in plan
            if p in chosen or (p[1] in ("fetchall", "json.loads") and p[0].split(":")[0] in sets)
        ]
    plan, codes = against(plan, args.against)
    runs = rounds(plan, args.repeat, codes)

    print(
        f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {count_rows(whole)}"
        f" kernels over {RANKS} ranks ({whole.stat().st_size / 1e6:.0f} MB); ratios are medians"
        f" over {args.repeat} rounds of time / baseline in that round"
    )
    groups = [
        (
            "nsys, one 8-rank file",
            "nsys 1 file: fetchall",
            [
                "nsys 1 file: table",
                "nsys 1 file: table, shares read apart",
                "nsys 1 file: table on a tty",
                "nsys 1 file: table on a tty, no pause",
                "nsys 1 file: --json",
                "nsys 1 file: --json --workers 1",
            ],
        ),
        (
            "nsys, 8 per-rank files (same events)",
            "nsys 8 files: fetchall",
            [f"nsys 8 files: {w}" for w in pools + on_tty],
        ),
        (
            "cost growth, per-rank files, 1 worker",
            "nsys 1 files: 1 worker",
            ["nsys 2 files: 1 worker", "nsys 4 files: 1 worker", "nsys 8 files: 1 worker"],
        ),
    ]
    if kineto:
        groups.append(
            (
                f"Kineto, 8 rank files x {args.kineto_mb:g} MB",
                "kineto 8 files: json.loads",
                [f"kineto 8 files: {w}" for w in pools],
            )
        )
    if args.against is not None:  # each contender's other run beside it in its table
        groups = [
            (t, b, [x for label in ls for x in (label, label + AGAINST)]) for t, b, ls in groups
        ]
    table = report(runs, groups)
    targets = verdicts(runs, table, bool(kineto))
    if args.json:
        args.json.write_text(
            json.dumps({"runs": runs, "table": table, "targets": targets}, indent=1)
        )


AGAINST = " (--against)"


def against(
    plan: list[tuple[str, str, list[Path]]], code: Path | None
) -> tuple[list[tuple[str, str, list[Path]]], dict[str, Path]]:
    """The plan with every contender but the baselines run a second time on ``code`` (labelled
    with AGAINST), right after its run on this checkout; and the labels run on ``code``."""
    if code is None:
        return plan, {}
    out, codes = [], {}
    for label, name, paths in plan:
        out.append((label, name, paths))
        if name not in ("fetchall", "json.loads"):
            out.append((label + AGAINST, name, paths))
            codes[label + AGAINST] = code.resolve()
    return out, codes


def _ratio(table: dict, label: str) -> float | None:
    return table[label]["ratio"] if label in table else None


def verdicts(runs: dict[str, list[dict]], table: dict, kineto: bool) -> dict:
    """The issue's targets, each PASS / MISS with the measured number."""
    checks = {
        "nsys 1 file: table <= 0.6x fetchall": (
            _ratio(table, "nsys 1 file: table"),
            TARGET_NSYS_RATIO,
        ),
        "nsys 1 file: --json <= 0.6x fetchall": (
            _ratio(table, "nsys 1 file: --json"),
            TARGET_NSYS_RATIO,
        ),
        "nsys 8 files, 2 workers: --json <= 0.6x fetchall": (
            _ratio(table, "nsys 8 files: 2 workers"),
            TARGET_NSYS_RATIO,
        ),
        "nsys 8 files, 2 workers on a tty: --json <= 0.6x fetchall": (
            _ratio(table, "nsys 8 files: 2 workers on a tty"),
            TARGET_NSYS_RATIO,
        ),
        "nsys 1 file on a tty: table <= 0.6x fetchall": (
            _ratio(table, "nsys 1 file: table on a tty"),
            TARGET_NSYS_RATIO,
        ),
        "nsys peak RSS per process < 400 MB": (
            max(
                (
                    table[k]["peak_rss_mb"]
                    for k in table
                    if k.startswith("nsys") and "fetchall" not in k
                ),
                default=None,
            ),
            TARGET_RSS_MB,
        ),
    }
    growth = table.get("nsys 8 files: 1 worker", {}).get("ratio to nsys 1 files: 1 worker")
    if growth is not None:
        print(
            f"\ncost growth 1 -> 8 files: {growth:.2f}x ({growth / RANKS:.2f} of linear per file;"
            " the 1-file run takes the single-file path, no reduce)"
        )
    out = {}
    for name, (value, limit) in checks.items():
        if value is None:  # its contender left out (--only)
            continue
        ok = value <= limit if "RSS" not in name else value < limit
        out[name] = {"value": value, "pass": ok}
        print(f"{name}: {value:.2f} -> {'PASS' if ok else 'MISS'}")
    if kineto and "kineto 8 files: 2 workers" in runs and "kineto 8 files: 1 worker" in runs:
        speedup = 1 / ratio(runs, "kineto 8 files: 2 workers", "kineto 8 files: 1 worker")
        out["kineto 2 workers >= 1.7x faster than 1"] = {
            "value": speedup,
            "pass": speedup >= TARGET_KINETO_SPEEDUP,
        }
        print(
            f"kineto 2 workers / 1 worker speedup: {speedup:.2f}x (target >="
            f" {TARGET_KINETO_SPEEDUP}) -> {'PASS' if speedup >= TARGET_KINETO_SPEEDUP else 'MISS'}"
        )
    if "ceiling: spin, 1 process" in runs:
        spin = 1 / ratio(runs, "ceiling: spin, 2 processes", "ceiling: spin, 1 process")
        decode = 1 / ratio(runs, "ceiling: decode, 2 processes", "ceiling: decode, 1 process")
        out["machine ceiling: 2 processes vs 1"] = {"spin": spin, "decode": decode}
        print(
            f"this machine, 2 processes vs 1: a pure-Python loop {spin:.2f}x, "
            f"the Kineto files' read + decode alone {decode:.2f}x"
        )
    return out


if __name__ == "__main__":
    main()
