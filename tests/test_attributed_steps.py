"""The attributed steps are one product of a trace (``attribution.assignment.AttributedSteps``):
the kernel tables read the steps a run holds already, and their mode rule is the breakdown's.
Real bundled traces, read once per module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from verifyprof import pipeline
from verifyprof.attribution.assignment import attributed_steps
from verifyprof.attribution.kernels import kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX
from verifyprof.pipeline.kernel_scope import VERIFY_KERNELS_REGEX

ROOT = Path(__file__).resolve().parents[1]
TRACES = {
    "dense-eager": ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz",
    "moe-graph": ROOT / "traces" / "workload-moe-graph" / "trace.sqlite.gz",
    "hf-assisted": ROOT / "traces" / "capture-hf-assisted" / "capture.sqlite.gz",
}


@pytest.fixture(scope="module", params=sorted(TRACES))
def trace(request):
    return pipeline.load(TRACES[request.param])


def test_the_verify_ranges_kernels_from_the_default_steps_are_those_of_their_own_steps(trace):
    rules = load_taxonomy()
    held = attributed_steps(trace, rules, DEFAULT_STEP_REGEX)
    shared = kernel_table(trace, rules, VERIFY_KERNELS_REGEX, attributed=held)
    own = kernel_table(trace, rules, VERIFY_KERNELS_REGEX)
    assert held.regex == DEFAULT_STEP_REGEX  # read from the default ranges' steps, not new ones
    assert len(own.table) > 0 and shared.steps == own.steps > 0
    pd.testing.assert_frame_equal(shared.table, own.table)


def test_a_kernel_tables_step_mode_is_the_breakdowns(trace):
    run = pipeline.Run.of_trace(trace)
    steps = run.breakdown.steps
    modes = run.attributed.modes  # per step, over its devices
    one_device = steps[steps["device"] >= 0].groupby("step")["device"].nunique() == 1
    rows = steps[steps["step"].isin(one_device[one_device].index)]
    assert len(rows) > 0
    assert np.array_equal(modes[rows["step"].to_numpy()], rows["mode"].to_numpy())


def test_a_run_assigns_its_steps_once_for_its_breakdown_and_its_kernel_table(trace, monkeypatch):
    from verifyprof.attribution import assignment

    calls = []
    real = assignment.assign_steps
    monkeypatch.setattr(assignment, "assign_steps", lambda *a: calls.append(1) or real(*a))
    run = pipeline.Run.of_trace(trace)
    table = run.kernels()  # the story group's: its breakdown, then its kernels
    assert run.breakdown is not None and table.steps > 0
    assert len(calls) == 1
    assert table.to_json() == pipeline.kernels(trace).to_json()
