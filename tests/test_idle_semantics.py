"""What a step's idle and overlapped time is called, in eager, graph and pipelined execution.

Built with the trace builder (the same tables the readers produce) so each rule is seen alone;
tests/test_golden.py holds the same rules on the real H200 and public traces.
"""

from __future__ import annotations

import pytest
from tracebuilder import TraceBuilder

from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts import phases
from verifyprof.contracts.ranges import VERIFY, range_text

US = 1_000


def pipelined_graph_replays(n=10, replay=2_000 * US, launch=20 * US):
    """``n`` verify steps whose graph replays are launched back to back with no sync: the host
    closes each range long before the GPU gets to its replay (SGLang's overlap scheduler)."""
    b = TraceBuilder()
    gpu = 100 * US
    for i in range(n):
        t = i * 50 * US
        b.range(range_text(VERIFY, bs=1, tokens=4, graph=1), t, t + 40 * US)
        corr = b.launch(t + 5 * US, t + 5 * US + launch, api="cudaGraphLaunch")
        start = max(gpu, t + 30 * US)
        for node in range(4):  # four nodes, 10 us apart inside the replay
            s = start + node * (replay // 4)
            b.kernel("nvjet_tst_verify", s, s + replay // 4 - 10 * US, corr)
        gpu = start + replay
    return b.build()


def verify_rows(trace):
    rows = breakdown(trace).steps
    return rows[rows["name"] == VERIFY].reset_index(drop=True)


def test_queued_pipelined_steps_cost_their_gpu_occupancy_not_their_window():
    rows = verify_rows(pipelined_graph_replays())
    last = rows.iloc[-1]
    assert last["wall_ns"] > 15_000 * US  # its window reaches back over nine earlier replays
    assert last["cost_ns"] == pytest.approx(2_000 * US, rel=0.05)
    assert last["other_work"] == last["wall_ns"] - last["cost_ns"]


def test_queued_pipelined_steps_show_no_launch_gap():
    rows = verify_rows(pipelined_graph_replays())
    assert rows["launch_gap"].sum() == 0


def test_idle_between_nodes_of_a_replay_is_graph_gap():
    rows = verify_rows(pipelined_graph_replays(n=1))
    assert rows.loc[0, "graph_gap"] == 3 * 10 * US  # three gaps between four nodes


def test_graph_launch_call_before_its_first_node_is_graph_launch():
    rows = verify_rows(pipelined_graph_replays(n=1, launch=20 * US))
    # the call runs 5..25 us, the first node starts at 100 us: idle from the call's start to it
    assert rows.loc[0, "graph_launch"] == 95 * US


def test_phases_still_sum_to_the_window_and_cost_to_window_less_other_work():
    rows = verify_rows(pipelined_graph_replays())
    assert (rows[list(phases.ALL)].sum(axis=1) == rows["wall_ns"]).all()
    assert (rows["cost_ns"] == rows["wall_ns"] - rows["other_work"]).all()


def test_a_long_runtime_call_with_the_gpu_idle_is_host_wait_not_launch_gap():
    """A runtime call that keeps the host 400 ms while the GPU idles (a synchronous copy waiting,
    a lazy module load) is the host stuck, not launch overhead."""
    b = TraceBuilder()
    b.range(range_text(VERIFY, bs=1, tokens=4, graph=0), 0, 500_000 * US)
    b.kernel("nvjet_tst_a", 10 * US, 20 * US, b.launch(1 * US, 6 * US))
    b.kernel(
        "nvjet_tst_b",
        400_010 * US,
        400_020 * US,
        b.launch(30 * US, 400_000 * US, api="cudaLaunchKernel"),
    )
    row = verify_rows(b.build()).iloc[0]
    assert row["host_wait"] > 399_000 * US
    assert row["launch_gap"] < 100 * US


def test_queued_work_blocked_on_an_idle_gpu_is_host_wait():
    """Kernels launched at once but started 300 ms later on an idle GPU (an event wait on work
    outside the trace, as in the MI300X SGLang decode) were blocked, not launch overhead."""
    b = TraceBuilder()
    b.range(range_text(VERIFY, bs=1, tokens=4, graph=0), 0, 400_000 * US)
    b.kernel("nvjet_tst_a", 10 * US, 20 * US, b.launch(1 * US, 6 * US))
    b.kernel("nvjet_tst_b", 300_000 * US, 300_010 * US, b.launch(30 * US, 35 * US))
    row = verify_rows(b.build()).iloc[0]
    assert row["host_wait"] > 299_000 * US
    assert row["launch_gap"] < 100 * US


def test_eager_launch_bound_steps_keep_their_launch_gap():
    b = TraceBuilder()
    b.range(range_text(VERIFY, bs=1, tokens=4, graph=0), 0, 800 * US)
    for i in range(20):  # a launch every 40 us, each kernel 5 us: the GPU starves on launches
        t = i * 40 * US
        b.kernel("nvjet_tst_a", t + 10 * US, t + 15 * US, b.launch(t, t + 8 * US))
    row = verify_rows(b.build()).iloc[0]
    assert row["launch_gap"] > 0.8 * row["wall_ns"]
    assert row["other_work"] == 0 and row["graph_gap"] == 0


# ---- real pipelined steps from the H200 (traces/workload-dense-pipelined-*, made by
# traces/capture_workload.sh ONLY=pipelined): 30 verify forwards queued back to back, no host
# sync; the workload recorded each step's GPU occupancy with CUDA events on the stream.

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from verifyprof.model.decision.whatif import WhatifOptions  # noqa: E402
from verifyprof.pipeline import breakdown_frame, whatif  # noqa: E402

TRACES = Path(__file__).resolve().parents[1] / "traces"


def pipelined(mode):
    folder = TRACES / f"workload-dense-pipelined-{mode}"
    run = next(
        r
        for r in json.loads((folder / "summary.json").read_text())["runs"]
        if r["kind"] == "verify_pipelined"
    )
    steps = breakdown_frame(folder / "trace.sqlite.gz").steps
    verify = steps[steps["name"] == VERIFY].sort_values("step")
    return folder, np.array(run["per_step"]["verify_ms"]), verify


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_real_pipelined_steps_cost_their_measured_gpu_occupancy_within_5_percent(mode):
    _, occupancy, verify = pipelined(mode)
    cost = verify["cost_ns"].to_numpy() / 1e6
    assert len(cost) == len(occupancy) == 30
    assert np.all(np.abs(cost / occupancy - 1) < 0.05)


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_whatif_models_real_pipelined_verify_at_its_gpu_occupancy(mode):
    folder, occupancy, _ = pipelined(mode)
    doc = whatif(WhatifOptions(source=str(folder / "trace.sqlite.gz"), accept_len=2.0)).to_json()
    assert doc["current"]["verify_ms"] == pytest.approx(occupancy.mean(), rel=0.05)


def test_real_pipelined_graph_steps_show_no_launch_gap_and_their_windows_other_work():
    _, _, verify = pipelined("graph")
    assert verify["launch_gap"].sum() == 0
    assert verify["other_work"].max() > 25e6  # the last step's window reaches back over ~15 replays
