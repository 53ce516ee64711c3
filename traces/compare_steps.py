"""Per-step check of `verifyprof breakdown` against the workload's own CUDA-event timings.

    python traces/compare_steps.py traces/workload-dense-pipelined-graph
    python traces/compare_steps.py traces/workload-dense-compile --json

For every workload run in the folder's ``summary.json`` that times verify forwards (pipelined
verifies, and the verify phase of speculative steps), the verify steps of the trace with the
same range attributes are matched in order to the run's per-step CUDA-event times (``verify_ms``:
for pipelined steps the GPU occupancy between events recorded just before and after each step).
Prints, per run, the medians of breakdown's wall, ``launch_gap`` and wall minus ``launch_gap``
beside the event time, and how many steps agree within 5% (issue 9: a step's cost under
pipelining is what it occupies on the GPU). Runs ``verifyprof breakdown --json`` as a user would.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

TOLERANCE = 0.05


def breakdown_steps(trace: Path) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "verifyprof.cli", "breakdown", str(trace), "--json"],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["steps"]


def run_attrs(run: dict[str, Any]) -> dict[str, str]:
    """The range attributes the workload gave this run's verify steps (runner.py, pipelined.py)."""
    attrs = {"bs": str(run["bs"]), "tokens": str(run.get("width", run.get("verify_tokens"))),
             "graph": "1" if run.get("verify_graph", run["graph"]) else "0"}
    if run.get("compile"):
        attrs["compile"] = "1"
    if run["kind"] == "verify_pipelined":
        attrs["pipelined"] = "1"
    return attrs


def compare(folder: Path) -> list[dict[str, Any]]:
    summary = json.loads((folder / "summary.json").read_text())
    trace = next(folder.glob("*.sqlite.gz"))
    verify = [s for s in breakdown_steps(trace) if s["name"] == "verifyprof.verify"]
    rows = []
    for run in summary["runs"]:
        if run["kind"] not in ("spec", "verify_pipelined"):
            continue
        want = run_attrs(run)
        steps = sorted((s for s in verify if s["attrs"] == want), key=lambda s: s["start_ns"])
        events = run["per_step"]["verify_ms"]
        if len(steps) != len(events):
            rows.append({"run": f"{run['kind']} {run['mode']}",
                         "error": f"{len(steps)} trace steps for {len(events)} timed"})
            continue
        wall = [s["wall_ns"] / 1e6 for s in steps]
        gap = [s["phases"]["launch_gap"] / 1e6 for s in steps]
        within = sum(abs(w - e) <= TOLERANCE * e for w, e in zip(wall, events))
        rows.append({"run": f"{run['kind']} {run['mode']}", "attrs": want, "steps": len(steps),
                     "breakdown_wall_ms": statistics.median(wall), "breakdown_launch_gap_ms": statistics.median(gap),
                     "breakdown_wall_minus_gap_ms": statistics.median(w - g for w, g in zip(wall, gap)),
                     "cuda_event_ms": statistics.median(events), "steps_within_5pct": within,
                     "max_wall_ms": max(wall), "max_launch_gap_ms": max(gap)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = {str(folder): compare(folder) for folder in args.folders}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for folder, rows in out.items():
        print(folder)
        for r in rows:
            if "error" in r:
                print(f"  {r['run']:24s} {r['error']}")
                continue
            print(f"  {r['run']:24s} {r['steps']:3d} steps  breakdown wall {r['breakdown_wall_ms']:7.3f} ms"
                  f" (launch_gap {r['breakdown_launch_gap_ms']:7.3f}, rest {r['breakdown_wall_minus_gap_ms']:6.3f})"
                  f"  CUDA events {r['cuda_event_ms']:7.3f} ms  within 5%: {r['steps_within_5pct']}/{r['steps']}"
                  f"  max wall {r['max_wall_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
