"""Our numbers on the project's own H200 traces against NVIDIA's `nsys stats` of the same files.

`traces/workload-*/stats_nvtx_gpu_proj_sum.csv` and `stats_cuda_gpu_kern_sum.csv` were written by
`nsys stats` on the H200 right after capture (traces/capture_workload.sh); they are the oracle.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import OWN_TRACES

from verifyprof.attribution.breakdown import breakdown
from verifyprof.attribution.kernels import kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.trace import load_trace

TRACE_DIRS = sorted(p for p in OWN_TRACES.glob("workload-*") if (p / "trace.sqlite.gz").exists())
ids = [p.name for p in TRACE_DIRS]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module", params=TRACE_DIRS, ids=ids)
def traced(request):
    trace = load_trace(request.param / "trace.sqlite.gz")
    return request.param, trace


def test_every_workload_trace_has_its_nsys_stats_oracle():
    assert len(TRACE_DIRS) >= 3
    for folder in TRACE_DIRS:
        assert (folder / "stats_nvtx_gpu_proj_sum.csv").exists() and (
            folder / "stats_cuda_gpu_kern_sum.csv"
        ).exists()


def test_range_gpu_projection_matches_nvtx_gpu_proj_sum(traced):
    folder, trace = traced
    result = breakdown(trace, step_regex=r"^verifyprof\.")
    steps = result.steps
    rows = [
        r
        for r in read_csv(folder / "stats_nvtx_gpu_proj_sum.csv")
        if r["Range"].startswith("verifyprof:")
    ]
    assert len(rows) >= (
        1 if "pipelined" in folder.name else 5
    )  # pipelined sets: verify ranges only
    for row in rows:  # other domains (e.g. CCCL's cub ranges) are not steps
        text = row["Range"].removeprefix("verifyprof:")
        ours = steps[steps["text"] == text]
        assert len(ours) == int(row["Range Instances"]), text
        expected = int(row["Total Proj Time (ns)"])
        assert ours["gpu_span_ns"].sum() == pytest.approx(expected, rel=0.005), text


def test_per_kernel_totals_match_cuda_gpu_kern_sum(traced):
    folder, trace = traced
    table = kernel_table(trace, load_taxonomy()).table.set_index("name")
    rows = read_csv(folder / "stats_cuda_gpu_kern_sum.csv")
    assert len(rows) == len(table)
    for row in rows:
        ours = table.loc[row["Name"]]
        assert ours["count"] == int(row["Instances"]), row["Name"]
        assert ours["total_ns"] == pytest.approx(int(row["Total Time (ns)"]), rel=0.005), row[
            "Name"
        ]


def test_per_kernel_spread_matches_cuda_gpu_kern_sum(traced):
    """One call's median, min and max per kernel, as nsys stats' Med, Min and Max (ns)."""
    folder, trace = traced
    table = kernel_table(trace, load_taxonomy()).table.set_index("name")
    for row in read_csv(folder / "stats_cuda_gpu_kern_sum.csv"):
        ours = table.loc[row["Name"]]
        assert (ours["min_ns"], ours["max_ns"]) == (int(row["Min (ns)"]), int(row["Max (ns)"]))
        assert ours["median_ns"] == pytest.approx(float(row["Med (ns)"]), abs=0.5), row["Name"]
        assert ours["mean_ns"] == pytest.approx(float(row["Avg (ns)"]), abs=0.5), row["Name"]


def test_phases_sum_to_wall_for_every_step(traced):
    _, trace = traced
    for step in breakdown(trace).to_json()["steps"]:
        assert sum(step["phases"].values()) == step["wall_ns"]


def test_graph_mode_verify_is_one_graph_launch_and_eager_is_hundreds_of_launches():
    graph = breakdown(
        load_trace(OWN_TRACES / "workload-dense-graph" / "trace.sqlite.gz"),
        step_regex=r"^verifyprof\.verify bs=1 tokens=4 graph=1$",
    )
    eager = breakdown(
        load_trace(OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz"),
        step_regex=r"^verifyprof\.verify bs=1 tokens=4 graph=0$",
    )
    assert set(graph.steps["mode"]) == {"graph"} and set(graph.steps["launches"]) == {1}
    assert set(eager.steps["mode"]) == {"eager"} and eager.steps["launches"].min() > 300
    # what CUDA graphs remove: the eager verify is dominated by launch gaps, the graphed one is not
    assert eager.steps["launch_gap"].median() > 0.5 * eager.steps["wall_ns"].median()
    assert graph.steps["launch_gap"].median() < 0.15 * eager.steps["launch_gap"].median()
