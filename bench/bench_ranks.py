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
largest single process reported. Times exclude interpreter start and imports, except the
``process`` contenders' (issue 43): ``verifyprof breakdown FILE`` (and ``--json``) and the
fetchall each a fresh process timed from exec to exit, and the CLI's first output on a terminal,
printed beside the in-process figures.

Prints: nsys one file (fetchall, table, --json; in-process, and as fresh processes), nsys 8
files (fetchall, 1 / 2 workers, LocalCluster; 2 workers under the CLI's status line on a
pseudo-terminal, its thread paused while workers fork as the CLI does, and not paused: workers
from a fork server), Kineto 8 files (json.loads, 1 / 2 workers, LocalCluster), the cost of 1, 2,
4, 8 per-rank files with one worker (linear: constant per file), the targets, and the machine's own
ceiling on a 2-process speedup (a pure-Python loop, and the Kineto files' read + msgspec decode
alone, in 1 and 2 processes: a 2-worker map cannot scale better than its main cost does).

What each contender measures is ``ranks_contenders.py``; how they run (fresh processes, RSS
sampling, rounds, ``--against``) ``ranks_runner.py``; the tables and targets ``ranks_report.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from ranks_runner import AGAINST, BASELINES, CODE_ENV, against, rounds

# the code measured: this checkout, or another one (--against: a contender run again on it)
sys.path.insert(0, os.environ.get(CODE_ENV) or str(REPO))
sys.path.insert(0, str(HERE))
from ranks_contenders import MEASURES
from ranks_report import report, verdicts

RANKS = 8
DASK = importlib.util.find_spec("distributed") is not None  # the LocalCluster contender needs it


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
        # as a user runs it: fresh processes from exec to exit (issue 43)
        ("nsys 1 file, process: fetchall", "process fetchall", [whole]),
        ("nsys 1 file, process: table", "process table", [whole]),
        ("nsys 1 file, process: --json", "process json", [whole]),
        ("nsys 1 file, process: first output", "process first output", [whole]),
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
            p for p in plan if p in chosen or (p[1] in BASELINES and p[0].split(":")[0] in sets)
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
            "nsys, one 8-rank file, as a user runs it (fresh processes, exec to exit: interpreter"
            " start and imports included)",
            "nsys 1 file, process: fetchall",
            ["nsys 1 file, process: table", "nsys 1 file, process: --json"],
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
    targets = verdicts(runs, table, bool(kineto), RANKS)
    if args.json:
        args.json.write_text(
            json.dumps({"runs": runs, "table": table, "targets": targets}, indent=1)
        )


if __name__ == "__main__":
    main()
