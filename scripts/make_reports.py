"""Example reports from the bundled traces: ``python scripts/make_reports.py`` (from the repo root).

Writes ``reports/dense-eager.html`` (the eager verify workload with its what-if),
``reports/compare-dense-eager-vs-graph.html`` (the same, with the CUDA-graph run as AFTER) and
``reports/compare-dense-eager-vs-graph.json`` (``verifyprof compare --json``) and
``reports/load-mha-h200.html`` (three real H200 captures of one batched program as one measured
model: its load and draft-count curves with each point's basis and band). The same as::

    verifyprof report traces/workload-dense-eager/trace.sqlite.gz --manifest
    traces/workload-dense-eager/manifest.json -o reports/dense-eager.html
    verifyprof report traces/workload-dense-eager/trace.sqlite.gz --manifest
    traces/workload-dense-eager/manifest.json \\
        --compare traces/workload-dense-graph/trace.sqlite.gz -o
        reports/compare-dense-eager-vs-graph.html
    verifyprof report bench/results/load_mha_h200_2/C1 bench/results/load_mha_h200_2/C8 \\
        bench/results/load_mha_h200_2/C8L --model bench/models/hf-chain-7b-mha.toml \\
        --batch 1,2,4,8,16,32,64 --context 512,2048 -o reports/load-mha-h200.html
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from verifyprof import pipeline
from verifyprof.report import files, html

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT / "traces" / "workload-dense-eager"
GRAPH = ROOT / "traces" / "workload-dense-graph"
OUT = ROOT / "reports"


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))  # paths in the pages as a reader of the repo sees them


def main() -> None:
    eager, graph, manifest = (
        relative(EAGER / "trace.sqlite.gz"),
        relative(GRAPH / "trace.sqlite.gz"),
        relative(EAGER / "manifest.json"),
    )
    os.chdir(ROOT)
    before, after = pipeline.load_input(eager), pipeline.load_input(graph)
    for name, compare_with in (("dense-eager", None), ("compare-dense-eager-vs-graph", graph)):
        data = pipeline.report(eager, compare_with=compare_with, manifest=manifest)
        size = html.write_report(data, OUT / f"{name}.html")
        print(f"wrote reports/{name}.html ({size / 1e6:.1f} MB)")
    comparison = pipeline.compare(before, after, manifest=manifest)
    files.write_json(OUT / "compare-dense-eager-vs-graph.json", comparison.to_json(gate=5.0))
    print(f"wrote reports/compare-dense-eager-vs-graph.json: {comparison.verdict_line()}")
    runs = [f"bench/results/load_mha_h200_2/{name}" for name in ("C1", "C8", "C8L")]
    load = ["--model", "bench/models/hf-chain-7b-mha.toml", "--batch", "1,2,4,8,16,32,64"]
    load += ["--context", "512,2048", "-o", "reports/load-mha-h200.html"]
    cli = [sys.executable, "-m", "verifyprof.cli", "report", *runs, *load]
    subprocess.run(cli, check=True)  # several captures: the CLI's one path (resolve_captures)


if __name__ == "__main__":
    main()
