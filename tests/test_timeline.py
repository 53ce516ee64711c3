"""attribution.timeline: one step's ops, launch calls and idle gaps, consistent with its breakdown
row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verifyprof import pipeline
from verifyprof.attribution.timeline import own_gaps, step_timelines
from verifyprof.contracts import phases

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["workload-dense-eager", "workload-dense-graph"])
def test_median_verify_timeline_adds_up_to_its_breakdown_row(name):
    loaded = pipeline.open_run(ROOT / "traces" / name / "trace.sqlite.gz", keep_trace=True)
    windows = pipeline.median_verify_windows(loaded.frame, loaded.breakdown.summary())
    (tl,) = step_timelines(loaded.trace, loaded.breakdown, windows)
    row = loaded.breakdown.steps.set_index(["step", "device"]).loc[windows[0]]
    assert tl.name == "verifyprof.verify" and tl.end_ns - tl.start_ns == row["wall_ns"]
    assert tl.idle_ns == {p: int(row[p]) for p in phases.OTHER + phases.IDLE if row[p]}
    assert (tl.ops["kind"] == "kernel").sum() == row["kernels"] and len(tl.calls) == row["launches"]
    busy = sum(int(row[p]) for p in loaded.frame.steps.columns if p in tl.ops["phase"].unique())
    assert busy == row["wall_ns"] - sum(tl.idle_ns.values())


def test_own_gaps_are_the_window_less_the_ops():
    # ops [10, 20), [15, 30) and [50, 60) in a window [0, 100)
    gap_start, gap_end = own_gaps(np.array([10, 15, 50]), np.array([20, 30, 60]), 0, 100)
    assert list(zip(gap_start.tolist(), gap_end.tolist())) == [(0, 10), (30, 50), (60, 100)]


def test_ops_are_capped_longest_first():
    loaded = pipeline.open_run(
        ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz", keep_trace=True
    )
    windows = pipeline.median_verify_windows(loaded.frame, loaded.breakdown.summary())
    (full,) = step_timelines(loaded.trace, loaded.breakdown, windows)
    (capped,) = step_timelines(loaded.trace, loaded.breakdown, windows, max_ops=50)
    assert len(capped.ops) == 50 and capped.ops_total == len(full.ops)
    widths = (full.ops["end"] - full.ops["start"]).sort_values(ascending=False)
    assert (
        sorted((capped.ops["end"] - capped.ops["start"]).tolist(), reverse=True)
        == widths.head(50).tolist()
    )
