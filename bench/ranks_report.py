"""What ``bench_ranks.py`` prints after its rounds: one table per group of contenders (best time,
median ratio to the group's baseline within a round, largest process RSS, median CPU seconds) and
the issue's targets, each PASS / MISS with the measured number.
"""

from __future__ import annotations

TARGET_NSYS_RATIO = 0.6
TARGET_RSS_MB = 400
TARGET_KINETO_SPEEDUP = 1.7


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


def _ratio(table: dict, label: str) -> float | None:
    return table[label]["ratio"] if label in table else None


def _as_a_user(runs: dict[str, list[dict]], table: dict) -> dict[str, tuple[float, float]]:
    """Issue 43's targets for the CLI as a user runs it (fresh processes, exec to exit), at this
    machine's core count (none where it has no target); each figure printed beside the
    in-process one it corresponds to."""
    import os

    from bench_cli_process import STARTUP_UNDER, TARGETS

    cores = len(os.sched_getaffinity(0))
    limit = TARGETS.get(cores)
    checks = {}
    for name, inside in (("table", "table"), ("--json", "--json")):
        process = _ratio(table, f"nsys 1 file, process: {name}")
        if process is None:
            continue
        beside = _ratio(table, f"nsys 1 file: {inside}")
        print(
            f"{name}: {process:.2f}x of a fresh fetchall process as a user runs it"
            + (f" (in-process, imports left out: {beside:.2f}x)" if beside is not None else "")
        )
        if limit is not None:
            checks[f"as a user runs it: {name} <= {limit}x fetchall on {cores} cores"] = (
                process,
                limit,
            )
    first = runs.get("nsys 1 file, process: first output")
    if first:
        checks[f"as a user runs it: first output < {STARTUP_UNDER} s"] = (
            median([r["seconds"] for r in first]),
            STARTUP_UNDER,
        )
    return checks


def verdicts(runs: dict[str, list[dict]], table: dict, kineto: bool, ranks: int) -> dict:
    """The issue's targets, each PASS / MISS with the measured number (``ranks``: the files of
    the cost-growth group)."""
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
    checks.update(_as_a_user(runs, table))
    growth = table.get("nsys 8 files: 1 worker", {}).get("ratio to nsys 1 files: 1 worker")
    if growth is not None:
        print(
            f"\ncost growth 1 -> 8 files: {growth:.2f}x ({growth / ranks:.2f} of linear per file;"
            " the 1-file run takes the single-file path, no reduce)"
        )
    out = {}
    for name, (value, limit) in checks.items():
        if value is None:  # its contender left out (--only)
            continue
        strict = "RSS" in name or "first output" in name
        ok = value < limit if strict else value <= limit
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
