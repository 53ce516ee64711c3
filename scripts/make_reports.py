"""Example reports from the bundled traces: ``python scripts/make_reports.py`` (from the repo root).

Writes ``reports/compare-dense-eager-vs-graph.html`` (the eager verify workload with its
what-if, the CUDA-graph run as AFTER: the before/after section first, then the report of the
eager run), ``reports/compare-dense-eager-vs-graph.json`` (``verifyprof compare --json``) and
``reports/load-mha-h200.html`` (three real H200 captures of one batched program as one measured
model: its load and draft-count curves with each point's basis and band). The pages share one
``reports/plotly.min.js`` (a page ``report`` writes carries its own copy, 4.8 MB of its ~5 MB).
That file is the installed plotly package's own and is not tracked (issue 43: the tracked tree
<= 60 MB): ``python scripts/make_reports.py --plotly`` writes it alone, beside the committed
pages, so that they open. The same as::

    verifyprof report traces/workload-dense-eager/trace.sqlite.gz --manifest
    traces/workload-dense-eager/manifest.json \\
        --compare traces/workload-dense-graph/trace.sqlite.gz -o
        reports/compare-dense-eager-vs-graph.html
    verifyprof report bench/results/load_mha_h200_2/C1 bench/results/load_mha_h200_2/C8 \\
        bench/results/load_mha_h200_2/C8L --model bench/models/hf-chain-7b-mha.toml \\
        --batch 1,2,4,8,16,32,64 --context 512,2048 -o reports/load-mha-h200.html
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from plotly.offline import get_plotlyjs

from verifyprof import pipeline
from verifyprof.report import files, html

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT / "traces" / "workload-dense-eager"
GRAPH = ROOT / "traces" / "workload-dense-graph"
OUT = ROOT / "reports"


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))  # paths in the pages as a reader of the repo sees them


def share_plotly(page: Path) -> None:
    """The page with its inline plotly.js swapped for the examples' one shared copy."""
    inline = f'<script type="text/javascript">{get_plotlyjs()}</script>'
    text = page.read_text()
    assert text.count(inline) == 1, f"{page}: no inline plotly.js"
    page.write_text(text.replace(inline, '<script src="plotly.min.js"></script>'))


def write_plotly() -> Path:
    """The examples' shared plotly.js, from the installed plotly package (not tracked)."""
    out = OUT / "plotly.min.js"
    out.write_text(get_plotlyjs())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plotly", action="store_true", help="write reports/plotly.min.js only")
    if parser.parse_args().plotly:
        print(f"wrote {relative(write_plotly())}")
        return
    eager, graph, manifest = (
        relative(EAGER / "trace.sqlite.gz"),
        relative(GRAPH / "trace.sqlite.gz"),
        relative(EAGER / "manifest.json"),
    )
    os.chdir(ROOT)
    write_plotly()
    name = "compare-dense-eager-vs-graph"
    data = pipeline.report(eager, compare_with=graph, manifest=manifest)
    html.write_report(data, OUT / f"{name}.html")
    share_plotly(OUT / f"{name}.html")
    print(f"wrote reports/{name}.html")
    comparison = pipeline.compare(eager, graph, manifest=manifest)
    files.write_json(OUT / "compare-dense-eager-vs-graph.json", comparison.to_json(gate=5.0))
    print(f"wrote reports/compare-dense-eager-vs-graph.json: {comparison.verdict_line()}")
    runs = [f"bench/results/load_mha_h200_2/{name}" for name in ("C1", "C8", "C8L")]
    load = ["--model", "bench/models/hf-chain-7b-mha.toml", "--batch", "1,2,4,8,16,32,64"]
    load += ["--context", "512,2048", "-o", "reports/load-mha-h200.html"]
    cli = [sys.executable, "-m", "verifyprof.cli", "report", *runs, *load]
    subprocess.run(cli, check=True)  # several captures: the CLI's one path (open_run)
    share_plotly(OUT / "load-mha-h200.html")


if __name__ == "__main__":
    main()
