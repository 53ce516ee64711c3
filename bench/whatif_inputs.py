"""What ``bench_whatif.py`` checks: each workload's eager and graph breakdowns (one trace holding
both, or one of each) with their workload summaries (the CUDA-event measurements), found in a
``traces/capture_workload.sh`` or ``--run`` layout or given one by one; the model config and the
context the workload ran at.

Part of ``bench_whatif.py``, a model-level micro-benchmark: the model config is the model's own
reading of a workload summary.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.inputs.model_config import ModelConfig, model_from_workload
from verifyprof.pipeline import breakdown_frame

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass
class Inputs:
    label: str
    eager: BreakdownFrame  # the breakdown holding the eager steps
    graph: BreakdownFrame | None  # the breakdown holding the graph steps (may be the same one)
    eager_summary: dict[str, Any] | None = None
    graph_summary: dict[str, Any] | None = None
    sources: dict[str, str] = field(default_factory=dict)


def read_json(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    data = json.loads(path.read_text())
    # a capture manifest (traces/capture_workload.sh) carries the summary inside
    return data.get("workload_summary", data) if isinstance(data, dict) else None


def from_dir(directory: Path) -> list[Inputs]:
    """``traces/capture_workload.sh`` layout (NAME/trace.sqlite.gz + NAME/summary.json), or
    ``--run``'s."""
    found = []
    for kind in ("dense", "moe"):
        eager, graph = directory / f"workload-{kind}-eager", directory / f"workload-{kind}-graph"
        both = directory / f"{kind}.sqlite.gz"
        if (eager / "trace.sqlite.gz").exists():
            found.append(
                load_inputs(
                    kind,
                    eager / "trace.sqlite.gz",
                    graph / "trace.sqlite.gz" if (graph / "trace.sqlite.gz").exists() else None,
                    eager / "summary.json",
                    graph / "summary.json" if (graph / "summary.json").exists() else None,
                )
            )
        elif both.exists():
            summary = directory / f"{kind}.summary.json"
            found.append(load_inputs(kind, both, None, summary if summary.exists() else None, None))
    if not found:
        raise SystemExit(
            f"{directory}: no workload-{{dense,moe}}-eager/trace.sqlite.gz nor"
            " {dense,moe}.sqlite.gz"
        )
    return found


def load_inputs(
    label: str,
    eager_trace: Path,
    graph_trace: Path | None,
    eager_summary: Path | None,
    graph_summary: Path | None,
) -> Inputs:
    started = time.time()
    eager = breakdown_frame(eager_trace)
    graph = breakdown_frame(graph_trace) if graph_trace is not None else eager
    es = read_json(eager_summary)
    gs = read_json(graph_summary) if graph_summary is not None else es
    print(
        f"[{label}] broke down {eager_trace}"
        + (f" and {graph_trace}" if graph_trace else "")
        + f" in {time.time() - started:.1f} s"
    )
    return Inputs(
        label,
        eager,
        graph,
        es,
        gs,
        {
            "eager_trace": str(eager_trace),
            "graph_trace": str(graph_trace or eager_trace),
            "eager_summary": str(eager_summary),
            "graph_summary": str(graph_summary or eager_summary),
        },
    )


def summary_runs(summary: dict[str, Any] | None, kind: str, mode: str) -> list[dict[str, Any]]:
    if not summary:
        return []
    return [r for r in summary.get("runs", []) if r.get("kind") == kind and r.get("mode") == mode]


def model_for(inputs: Inputs) -> ModelConfig | None:
    summary = inputs.eager_summary or inputs.graph_summary
    if not summary:
        return None
    config = summary.get("config", {})
    dtype = DTYPES.get(str(config.get("dtype", "bfloat16")), "bf16")
    return model_from_workload(
        config.get("target", {}), Path(inputs.sources.get("eager_summary", "summary")), dtype
    )


def context_for(inputs: Inputs) -> float:
    """The workload attends over its whole static cache (a mask hides the unused slots)."""
    summary = inputs.eager_summary or inputs.graph_summary or {}
    config = summary.get("config", {})
    return float(config.get("max_len") or config.get("run", {}).get("context") or 0)
