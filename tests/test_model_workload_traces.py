"""The model on the project's real H200 workload traces (traces/workload-*,
traces/capture_workload.sh).

Accounting first (the cycle the model builds from a trace must be the cycle the workload timed
with CUDA events), then the two predictions bench/bench_whatif.py reports, held to the issue's
15% on the committed traces: eager -> CUDA graph, and t(n) from one width.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.model.fixes.base import Scenario, current_cycle
from verifyprof.model.fixes.draft import verify_at_width
from verifyprof.model.fixes.setup import launch_costs_of
from verifyprof.model.fixes.verify import cuda_graph_verify
from verifyprof.model.inputs.model_config import model_from_workload
from verifyprof.model.inputs.profile import verify_profile
from verifyprof.pipeline import breakdown_frame, whatif
from verifyprof.pipeline.data_files import load_hardware

TRACES = Path(__file__).resolve().parents[1] / "traces"
DENSE_EAGER = TRACES / "workload-dense-eager"
DENSE_GRAPH = TRACES / "workload-dense-graph"
MOE_EAGER = TRACES / "workload-moe-eager"
MOE_GRAPH = TRACES / "workload-moe-graph"


@pytest.fixture(scope="module")
def breakdowns():
    return {
        d.name: breakdown_frame(d / "trace.sqlite.gz")
        for d in (DENSE_EAGER, DENSE_GRAPH, MOE_EAGER, MOE_GRAPH)
        if (d / "trace.sqlite.gz").exists()
    }


def summary(directory: Path) -> dict:
    return json.loads((directory / "summary.json").read_text())


def run_of(directory: Path, kind: str, width: int | None = None) -> dict:
    return next(
        r
        for r in summary(directory)["runs"]
        if r["kind"] == kind and (width is None or r.get("width") == width)
    )


def test_eager_verify_is_the_40_loop_steps_at_width_4(breakdowns):
    profile = verify_profile(breakdowns[DENSE_EAGER.name])
    assert (profile.verify.steps, profile.width, profile.verify.mode) == (40, 4, "eager")
    assert sorted(profile.width_times) == [1, 2, 4, 8, 16]  # the sweep, kept apart


@pytest.mark.parametrize("directory", [DENSE_EAGER, DENSE_GRAPH, MOE_EAGER])
def test_cycle_from_the_trace_is_the_cycle_cuda_events_timed(breakdowns, directory):
    # Range windows start when the host enters a range, CUDA events when the GPU reaches the mark:
    # the spec_step window also holds the host's ~0.1 ms before its first launch (3% of a graph
    # cycle).
    ranking = whatif(
        WhatifOptions(
            source=str(directory / "trace.sqlite.gz"), manifest=directory / "manifest.json"
        )
    )
    spec = run_of(directory, "spec")
    assert ranking.current.cycle_ms == pytest.approx(spec["step_ms"]["mean"], rel=0.05)
    assert ranking.current.verify_ms == pytest.approx(spec["verify_ms"]["mean"], rel=0.02)
    assert ranking.current.tokens_per_s == pytest.approx(spec["tokens_per_s_per_request"], rel=0.05)
    assert ranking.current.decode_ms == pytest.approx(
        run_of(directory, "decode")["decode_ms"]["mean"], rel=0.05
    )


def test_graph_verify_windows_overlapping_the_draft_are_cut_to_their_own_time(breakdowns):
    profile = verify_profile(breakdowns[DENSE_GRAPH.name])
    steps = breakdowns[DENSE_GRAPH.name].steps
    raw = steps[
        (steps["name"] == "verifyprof.verify") & ~steps["attrs"].map(lambda a: "sweep" in a)
    ]["wall_ns"]
    assert (
        raw.mean() / 1e6 > profile.verify.wall_ms + 0.3
    )  # host ahead: windows reach back over the draft
    assert profile.verify.wall_ms == pytest.approx(
        run_of(DENSE_GRAPH, "spec")["verify_ms"]["mean"], rel=0.02
    )


@pytest.mark.parametrize("eager,graph", [(DENSE_EAGER, DENSE_GRAPH), (MOE_EAGER, MOE_GRAPH)])
def test_cuda_graph_prediction_from_eager_is_within_15_percent_of_the_graph_run(
    breakdowns, eager, graph
):
    assert graph.name in breakdowns, f"{graph} missing from traces/"
    profile = verify_profile(breakdowns[eager.name])
    h200 = load_hardware("h200")  # its launch costs as whatif takes them (0.4 us a graph node)
    scenario = Scenario(
        accept_len=2.0, hardware=h200, costs=launch_costs_of(h200, profile.calibration)
    )
    predicted = cuda_graph_verify(
        profile, scenario, current_cycle(profile, scenario)
    ).cycle.verify_ms
    measured = run_of(graph, "spec")["verify_ms"]["mean"]
    assert (
        profile.verify.wall_ms > 4 * measured
    )  # eager is host-bound: the prediction has most to remove
    assert abs(predicted / measured - 1) <= 0.15


@pytest.mark.parametrize(
    "directory,mode", [(DENSE_GRAPH, "graph"), (MOE_GRAPH, "graph"), (MOE_EAGER, "eager")]
)
def test_t_of_n_from_width_4_predicts_widths_2_to_16_within_15_percent(breakdowns, directory, mode):
    assert directory.name in breakdowns, f"{directory} missing from traces/"
    base = verify_profile(breakdowns[directory.name], sweep=True, width=4, mode=mode)
    s = summary(directory)
    model = model_from_workload(s["config"]["target"], directory / "summary.json")
    scenario = Scenario(
        accept_len=2.0,
        hardware=load_hardware("h200"),
        model=model,
        context=s["config"]["max_len"],
        use_measured_widths=False,
    )
    for width in (2, 8, 16):  # width 1 in graph mode misses: see test below
        predicted, _ = verify_at_width(base, scenario, width)
        measured = run_of(directory, "verify_sweep", width)["verify_ms"]["mean"]
        assert abs(predicted / measured - 1) <= 0.15, (width, predicted, measured)


def test_moe_t_of_n_follows_the_expert_union(breakdowns):
    base = verify_profile(breakdowns[MOE_GRAPH.name], sweep=True, width=4, mode="graph")
    s = summary(MOE_GRAPH)
    model = model_from_workload(s["config"]["target"], MOE_GRAPH / "summary.json")
    scenario = Scenario(
        accept_len=2.0, hardware=load_hardware("h200"), model=model, use_measured_widths=False
    )
    t16, _ = verify_at_width(base, scenario, 16)
    measured_growth = (
        run_of(MOE_GRAPH, "verify_sweep", 16)["verify_ms"]["mean"]
        - run_of(MOE_GRAPH, "verify_sweep", 4)["verify_ms"]["mean"]
    )
    assert model.expert_union(16) / model.expert_union(4) == pytest.approx(
        2.84, abs=0.01
    )  # E=64, k=4
    assert t16 - base.verify.wall_ms == pytest.approx(measured_growth, rel=0.25)


def test_graph_width_1_is_where_the_model_misses(breakdowns):
    """The width-1 verify graph's first kernel starts only as its ~0.8 ms cudaGraphLaunch returns
    (wider graphs start within ~0.1 ms): on an idle GPU the launch is exposed, which an eager
    trace cannot show. The miss is documented in bench/README.md; this pins it."""
    base = verify_profile(breakdowns[DENSE_GRAPH.name], sweep=True, width=1, mode="graph")
    assert base.verify.wall_ms - base.verify.gpu_span_ms > 0.5
