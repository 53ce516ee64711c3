"""Kineto speed benchmark: verifyprof vs ``json.loads`` vs HolisticTraceAnalysis, in one run.

    python bench/bench_kineto.py            # generates bench/out/kineto_large.json (150 MB) if
    missing

Measures, each in a fresh subprocess on the same file (OS page cache warmed first), the
contenders taking turns round by round so that load on a shared machine hits all alike:

* ``json.loads``: read the file (gunzip if .gz) and ``json.loads`` it, the plain way (GC on,
  as a user would write it); also, for context, with the GC off and with ``orjson``.
* verifyprof: ``read_kineto`` + ``breakdown(trace, whole_trace=True)`` + ``to_json()``.
* HTA (PyPI HolisticTraceAnalysis, in its own venv ``bench/out/hta-venv`` made from
  ``bench/requirements-hta.txt`` on first use): ``TraceAnalysis(trace_dir)`` +
  ``get_temporal_breakdown(visualize=False)``.

Prints the ratios against the targets of issue 2 (verifyprof <= 1.5x json.loads, HTA >= 5x
verifyprof) and writes them to ``bench/out/bench_kineto.json``.

A stage-level micro-benchmark: it times the Kineto reader and the breakdown themselves,
below any run, against the same file's ``json.loads``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
HTA_VENV = OUT / "hta-venv"
MARK = "BENCH_RESULT "


# ---- children: each prints one MARK line of JSON --------------------------------------------


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _file_text(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        import gzip

        data = gzip.decompress(data)
    return data


def child_json(path: Path, mode: str) -> dict:
    import gc

    if mode == "orjson":
        import orjson

        loads = orjson.loads
    else:
        loads = json.loads
    if mode in ("nogc", "orjson"):
        gc.disable()
    t0 = time.perf_counter()
    doc = loads(_file_text(path))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "events": len(doc["traceEvents"]), "peak_rss_mb": _peak_rss_mb()}


def child_verifyprof(path: Path) -> dict:
    sys.path.insert(0, str(REPO))
    from verifyprof.trace.kineto.reader import read_kineto

    try:
        from verifyprof.attribution.breakdown import breakdown
    except ImportError:
        breakdown = None
    t0 = time.perf_counter()
    trace = read_kineto([path])
    t1 = time.perf_counter()
    result = {
        "read_seconds": t1 - t0,
        "kernels": len(trace.kernels),
        "events": trace.meta["events"],
    }
    if breakdown is not None:
        report = breakdown(trace, whole_trace=True).to_json()
        t2 = time.perf_counter()
        steps = report["steps"]
        result.update(
            breakdown_seconds=t2 - t1,
            wall_ns=sum(s["wall_ns"] for s in steps),
            idle_ns=sum(s["phases"]["launch_gap"] + s["phases"]["host_wait"] for s in steps),
        )
    else:
        t2 = t1
    result.update(seconds=t2 - t0, with_breakdown=breakdown is not None, peak_rss_mb=_peak_rss_mb())
    return result


def child_hta(trace_dir: Path) -> dict:
    import logging

    logging.disable(logging.INFO)
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    t_import = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=str(trace_dir))
    t1 = time.perf_counter()
    frame = analyzer.get_temporal_breakdown(visualize=False)
    t2 = time.perf_counter()
    row = frame.iloc[0].to_dict()
    return {
        "import_seconds": t_import - t0,
        "load_seconds": t1 - t_import,
        "breakdown_seconds": t2 - t1,
        "seconds": t2 - t_import,
        "idle_us": float(row.get("idle_time(us)", float("nan"))),
        "total_us": float(row.get("kernel_time(us)", float("nan"))),
        "peak_rss_mb": _peak_rss_mb(),
    }


def run_child(python: Path, args: list[str], timeout: float = 1800) -> dict:
    proc = subprocess.run(
        [str(python), str(Path(__file__).resolve()), "--child", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    tail = (proc.stdout + proc.stderr)[-3000:]
    raise RuntimeError(f"benchmark child {args[0]} failed (exit {proc.returncode}):\n{tail}")


# ---- parent ----------------------------------------------------------------------------------


def ensure_trace(path: Path, mb: float) -> None:
    if path.exists():
        return
    print(f"generating {path} ({mb:.0f} MB) ...", flush=True)
    subprocess.run(
        [sys.executable, str(HERE / "gen_kineto_trace.py"), "--mb", str(mb), "--out", str(path)]
        + (["--gzip"] if path.name.endswith(".gz") else []),
        check=True,
    )


def ensure_hta() -> Path:
    python = HTA_VENV / "bin" / "python"
    if python.exists():
        return python
    print(
        f"creating {HTA_VENV} with {HERE / 'requirements-hta.txt'} (first run only) ...", flush=True
    )
    subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements-hta.txt")],
        check=True,
    )
    return python


def interleaved(contenders: dict[str, tuple[Path, list[str], int]]) -> dict[str, dict]:
    """Run the contenders round-robin (so load on a shared machine hits all alike); medians."""
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    rounds = max(repeat for _, _, repeat in contenders.values())
    for round_index in range(rounds):
        for name, (python, args, repeat) in contenders.items():
            if round_index < repeat:
                print(f"  round {round_index + 1}/{rounds}: {name}", flush=True)
                runs[name].append(run_child(python, args))
    results = {}
    for name, rs in runs.items():
        median = sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2]
        results[name] = {**median, "all_seconds": [round(r["seconds"], 3) for r in rs]}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Kineto reader + breakdown vs json.loads vs HTA")
    parser.add_argument(
        "--trace", type=Path, default=OUT / "kineto_large.json", help="generated if missing"
    )
    parser.add_argument("--mb", type=float, default=150.0, help="size to generate")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of json / verifyprof (median reported)"
    )
    parser.add_argument("--hta-repeat", type=int, default=1)
    parser.add_argument("--skip-hta", action="store_true")
    args = parser.parse_args(argv)

    OUT.mkdir(parents=True, exist_ok=True)
    trace = args.trace.resolve()
    ensure_trace(trace, args.mb)
    trace.read_bytes()  # warm the page cache for every contender alike
    me = Path(sys.executable)

    contenders = {
        "json.loads": (me, ["json", str(trace), "plain"], args.repeat),
        "json.loads (gc off)": (me, ["json", str(trace), "nogc"], args.repeat),
        "orjson.loads (gc off)": (me, ["json", str(trace), "orjson"], args.repeat),
        "verifyprof": (me, ["verifyprof", str(trace)], args.repeat),
    }
    if not args.skip_hta:
        hta_dir = OUT / "hta_trace_dir"
        hta_dir.mkdir(exist_ok=True)
        for stale in hta_dir.iterdir():
            stale.unlink()
        (hta_dir / trace.name).symlink_to(trace)
        contenders["HTA"] = (ensure_hta(), ["hta", str(hta_dir)], args.hta_repeat)
    results = interleaved(contenders)

    ours = results["verifyprof"]
    plain = results["json.loads"]["seconds"]
    size_mb = trace.stat().st_size / 1e6
    what = (
        "read_kineto + breakdown(whole_trace=True)"
        if ours["with_breakdown"]
        else "read_kineto only (no breakdown yet)"
    )
    print(
        f"\n{trace.name}: {size_mb:.1f} MB, {ours['events']:,} events, {ours['kernels']:,} kernels;"
        f" {os.cpu_count()} CPUs"
    )
    print(f"{'contender':28s} {'seconds':>8s} {'peak MB':>8s}  runs")
    for name, r in results.items():
        print(f"{name:28s} {r['seconds']:8.3f} {r['peak_rss_mb']:8.0f}  {r['all_seconds']}")
    print(
        f"verifyprof = {what}: read {ours['read_seconds']:.3f} s"
        + (f", breakdown {ours['breakdown_seconds']:.3f} s" if ours["with_breakdown"] else "")
    )
    ratios = {"verifyprof / json.loads": ours["seconds"] / plain}
    ratios["verifyprof / json.loads (gc off)"] = (
        ours["seconds"] / results["json.loads (gc off)"]["seconds"]
    )
    if "HTA" in results:
        hta = results["HTA"]
        ratios["HTA / verifyprof"] = hta["seconds"] / ours["seconds"]
        print(
            f"HTA: load {hta['load_seconds']:.3f} s, temporal breakdown"
            f" {hta['breakdown_seconds']:.3f} s (import {hta['import_seconds']:.1f} s not counted)"
        )
        if ours["with_breakdown"]:
            print(
                f"cross-check, whole trace: HTA span {hta['total_us'] / 1e3:.3f} ms, idle"
                f" {hta['idle_us'] / 1e3:.3f} ms; verifyprof wall {ours['wall_ns'] / 1e6:.3f} ms,"
                f" idle {ours['idle_ns'] / 1e6:.3f} ms (HTA shrinks every op to whole us:"
                " ceil(start), floor(end))"
            )
    print()
    print(
        f"verifyprof / json.loads            = {ratios['verifyprof / json.loads']:.2f}x   (target"
        " <= 1.5x)"
    )
    print(
        f"verifyprof / json.loads (gc off)   = {ratios['verifyprof / json.loads (gc off)']:.2f}x  "
        " (stricter baseline, for context)"
    )
    if "HTA / verifyprof" in ratios:
        print(
            f"HTA / verifyprof                   = {ratios['HTA / verifyprof']:.1f}x   (target"
            " >= 5x)"
        )
    report = {
        "trace": str(trace),
        "bytes": trace.stat().st_size,
        "cpus": os.cpu_count(),
        "verifyprof_measures": what,
        "results": results,
        "ratios": ratios,
    }
    (OUT / "bench_kineto.json").write_text(json.dumps(report, indent=2))
    ok = ratios["verifyprof / json.loads"] <= 1.5 and ratios.get("HTA / verifyprof", 5.0) >= 5.0
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


def child_main(args: list[str]) -> None:
    kind = args[0]
    if kind == "json":
        result = child_json(Path(args[1]), args[2])
    elif kind == "verifyprof":
        result = child_verifyprof(Path(args[1]))
    elif kind == "hta":
        result = child_hta(Path(args[1]))
    else:
        raise SystemExit(f"unknown child {kind}")
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        sys.exit(main())
