"""Ranks captured on one H200, each into its own file, as two nodes' files are (each of its own
device 0): two processes' nsys reports, whose kernels wait behind each other's work on a GPU each
trace shows idle, and two torchrun ranks' Kineto files from torch 2.11."""

from __future__ import annotations

import json

from conftest import REPO

from verifyprof import pipeline
from verifyprof.pipeline.parallel import ParallelOptions
from verifyprof.trace import load_trace

FOLDER = REPO / "traces" / "two-processes-one-gpu"
NODE_A, NODE_B = FOLDER / "node-a.sqlite.gz", FOLDER / "node-b.sqlite.gz"
TORCHRUN = REPO / "traces" / "torchrun-2ranks-one-gpu"


def as_json(result) -> dict:
    return json.loads(json.dumps(result.to_json()))


def test_a_wait_before_the_whole_trace_window_opens_is_not_booked_inside_it():
    """The window opens at the first kernel; that kernel's call returned 2.1 ms before, and the
    wait in between (behind the other process) lies outside it. It used to be booked from the
    call's return and break the phase sum: 'timestamps cannot be attributed consistently'."""
    trace = load_trace(NODE_B)
    first = trace.kernels.sort_values("start").iloc[0]
    call = trace.api[trace.api["correlation"] == first["correlation"]].iloc[0]
    assert (
        2_000_000 < first["start"] - call["end"] < 2_200_000
    )  # the 2.1 ms wait behind the other process
    steps = as_json(pipeline.breakdown(NODE_B, whole_trace=True))["steps"]
    assert len(steps) == 1 and steps[0]["kernels"] == 20451
    assert sum(steps[0]["phases"].values()) == steps[0]["wall_ns"]
    assert steps[0]["phases"]["host_wait"] > 0  # the waits inside the window stay host wait


def test_two_reports_captured_at_once_are_one_run_of_two_devices():
    alone = [as_json(pipeline.breakdown(f, whole_trace=True))["steps"][0] for f in (NODE_A, NODE_B)]
    both = as_json(
        pipeline.breakdown(
            [str(NODE_A), str(NODE_B)], whole_trace=True, parallel=ParallelOptions(workers=2)
        )
    )
    assert both["trace"]["warnings"] == [  # no file skipped; the one GPU both drove is named
        "node-a.sqlite.gz, node-b.sqlite.gz ran on one GPU (UUID"
        " 3713df95-95c9-f464-ddd8-ddd94c211c1b), read as devices [0, 1]: each file's time waiting"
        " behind the others' work on it reads as host wait"
    ]
    assert [(s["device"], s["kernels"]) for s in both["steps"]] == [
        (0, alone[0]["kernels"]),
        (1, alone[1]["kernels"]),
    ]
    assert [s["phases"] for s in both["steps"]] == [
        s["phases"] for s in alone
    ]  # each read as alone


def test_torchrun_ranks_on_one_gpu_are_two_ranks_on_two_devices_each_step_as_read_alone():
    """torch 2.11's Kineto files, ``distributedInfo`` from a gloo process group: rank 1's device 0
    comes after rank 0's, and each rank's five ProfilerSteps are what its file alone gives."""
    files = sorted(TORCHRUN.glob("run-TP-*.trace.json.gz"))
    both = as_json(
        pipeline.breakdown(TORCHRUN, step_regex="ProfilerStep", parallel=ParallelOptions(workers=2))
    )
    assert [d["device"] for d in both["trace"]["devices"]] == [0, 1] and both["trace"]["ranks"] == [
        0,
        1,
    ]
    for rank, path in enumerate(files):
        alone = as_json(pipeline.breakdown(path, step_regex="ProfilerStep"))["steps"]
        mine = [s for s in both["steps"] if s["rank"] == rank]
        assert len(mine) == len(alone) == 5 and {s["device"] for s in mine} == {rank}
        assert [s["phases"] for s in mine] == [s["phases"] for s in alone]


def test_the_verdict_and_the_table_say_which_steps_they_describe():
    """Two devices: the table's mean is over both, the verdict's numbers are the critical
    device's mean step. The table shows that rank's share beside its column (the verdict's 58%)
    and both say which steps they are."""
    from typer.testing import CliRunner

    from verifyprof.cli import app

    done = CliRunner().invoke(
        app, ["breakdown", str(FOLDER), "--whole-trace"], env={"COLUMNS": "160"}
    )
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    doc = as_json(pipeline.breakdown([str(NODE_A), str(NODE_B)], whole_trace=True))
    (group,) = doc["summary"]["groups"]
    rank = max(group["by_rank"], key=lambda r: group["by_rank"][r]["wall_ns"]["mean"])
    mine = group["by_rank"][rank]
    share = 100 * mine["phases"]["gemm_dense"] / mine["wall_ns"]["mean"]
    assert f"means over all {group['steps']} steps" in text
    assert f"rank {rank} *" in text and "% of wall" in text  # the header's two lines
    gemm = next(line for line in done.output.splitlines() if line.startswith("gemm_dense"))
    cells = gemm.split()
    at = cells.index(f"{mine['phases']['gemm_dense'] / 1e6:.3f}")
    assert cells[at + 1] == f"{share:.1f}"  # the verdict's rank's share, beside its mean
    verdict = text[text.index("verdict (") :]
    assert verdict.startswith(f"verdict (rank {rank}'s mean of 1 step: the critical one of 2")
    assert f"{share:.0f}% of its cost gemm_dense" in verdict
    assert f"{100 * group['phases']['gemm_dense']['share']:.1f}" in text  # the mean over both
