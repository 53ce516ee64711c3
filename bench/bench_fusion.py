"""graph_fusion_verify (a CUDA graph plus Inductor-style fusion) predicted from the eager verify
steps, against torch.compile(mode="reduce-overhead") measured in the same process.

    python bench/bench_fusion.py [traces/workload-dense-compile]

The trace holds eager, CUDA-graph and compiled verify steps of one workload run on the H200
(traces/capture_workload.sh ONLY=compile). Printed: measured verify per mode (breakdown cost and
the workload's CUDA events), the predictions from the eager steps, and their errors, also for
the GPU side alone (kernels and node gaps, without the host wait inside the compiled step).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from verifyprof.contracts import phases
from verifyprof.pipeline import WhatifOptions, open_run


def main(folder: Path) -> None:
    trace = folder / "trace.sqlite.gz"
    summary = json.loads((folder / "summary.json").read_text())
    events = {
        ("compile" if r.get("compile") else r["mode"]): r["verify_ms"]["mean"]
        for r in summary["runs"]
        if r["kind"] == "spec"
    }
    options = WhatifOptions(
        source=str(trace),
        accept_len=2.0,
        mode="eager",
        candidates=["cuda_graph_verify", "graph_fusion_verify"],
    )
    run = open_run(trace, options)  # one read: the steps measured and the prediction
    steps = run.frame.steps
    verify = steps[steps["name"] == "verifyprof.verify"]
    kind = verify["attrs"].map(
        lambda a: (
            "compile"
            if a.get("compile") == "1"
            else ("graph" if a.get("graph") == "1" else "eager")
        )
    )
    measured = {k: verify[kind == k] for k in ("eager", "graph", "compile")}
    doc = run.ranked(str(trace)).to_json()
    predicted = {c["name"]: c["verify_ms"] for c in doc["candidates"]}
    print(f"{'verify':<34}{'breakdown ms':>14}{'CUDA events ms':>16}{'kernels':>9}")
    for k, rows in measured.items():
        print(
            f"{k:<34}{rows['cost_ns'].mean() / 1e6:>14.3f}"
            f"{events.get(k, float('nan')):>16.3f}{rows['kernels'].mean():>9.0f}"
        )
    compiled = measured["compile"]
    gpu_side = (compiled["cost_ns"] - compiled["host_wait"] - compiled["graph_launch"]).mean() / 1e6
    rows = [
        (
            "cuda_graph_verify vs graph mode",
            predicted["cuda_graph_verify"],
            measured["graph"]["cost_ns"].mean() / 1e6,
        ),
        (
            "graph_fusion_verify vs compile",
            predicted["graph_fusion_verify"],
            compiled["cost_ns"].mean() / 1e6,
        ),
        ("graph_fusion_verify vs compile, GPU side", predicted["graph_fusion_verify"], gpu_side),
    ]
    print(
        f"\n{'prediction (from the eager steps)':<42}{'predicted':>10}{'measured':>10}{'error':>8}"
    )
    for name, p, m in rows:
        print(f"{name:<42}{p:>10.3f}{m:>10.3f}{100 * (p / m - 1):>+7.1f}%")
    host = compiled["host_wait"].mean() / 1e6
    small = sum(compiled[f"count_{p}"].mean() for p in ("elementwise", "norm", "moe_aux"))
    print(
        f"\ncompiled step: host wait {host:.3f} ms inside it (compile's cudagraph-tree work on the"
        f" host before each replay, not modelled by the fusion candidate); {small:.0f} small"
        " kernels left after fusion; phases "
        + ", ".join(
            f"{p} {compiled[p].mean() / 1e6:.3f}" for p in phases.ALL if compiled[p].mean() > 1e4
        )
    )


if __name__ == "__main__":
    main(
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parents[1] / "traces" / "workload-dense-compile"
    )
