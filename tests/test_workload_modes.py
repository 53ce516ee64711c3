"""The workload's pipelined verifies (no host sync between steps) and its torch.compile'd verify
on the CPU, and the committed H200 traces of those modes (traces/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from workload_helpers import (
    REPO,
    TINY_ARGS,
    ReplayedOnCPU,
    range_names,
    run_main,
    tiny_workload,
)

from verifyprof.contracts import ranges
from verifyprof.workload.__main__ import main

# --- pipelined verifies (no host sync between steps) and the torch.compile'd verify ----------

PIPELINED = "verifyprof.verify bs=1 tokens=4 graph=0 pipelined=1"


def test_pipelined_verifies_each_get_their_own_range(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(
            tmp_path,
            "--steps",
            "0",
            "--decode-steps",
            "0",
            "--widths",
            "",
            "--pipelined",
            "3",
            "--warmup",
            "0",
        )
    assert range_names(prof) == [
        "verifyprof.prefill bs=1 tokens=16",
        PIPELINED,
        PIPELINED,
        PIPELINED,
    ]
    assert ranges.split_text(PIPELINED) == (
        ranges.VERIFY,
        {"bs": "1", "tokens": "4", "graph": "0", "pipelined": "1"},
    )


@torch.inference_mode()
def test_pipelined_verifies_are_queued_without_a_host_sync_between_them(monkeypatch):
    workload = tiny_workload(steps=0, pipelined=5)
    calls = []
    monkeypatch.setattr(workload, "_sync", lambda: calls.append("sync"))
    monkeypatch.setattr(workload, "accept", lambda *a: calls.append("accept"))
    original_verify = workload.verify
    monkeypatch.setattr(
        workload, "verify", lambda *a: calls.append("verify") or original_verify(*a)
    )
    workload.run_pipelined("eager", 5)
    assert calls == ["sync", *["verify"] * 5, "sync"]  # one sync before the queue, one after


def test_pipelined_summary_tiles_the_gpu_window_with_per_step_occupancy(tmp_path):
    summary = run_main(
        tmp_path, "--steps", "0", "--decode-steps", "0", "--widths", "", "--pipelined", "6"
    )
    (run,) = summary["runs"]
    assert (run["kind"], run["mode"], run["steps"], run["width"], run["graph"], run["compile"]) == (
        "verify_pipelined",
        "eager",
        6,
        4,
        False,
        False,
    )
    per_step = run["per_step"]
    assert [len(per_step[k]) for k in ("verify_ms", "gpu_gap_ms", "host_ms")] == [6, 5, 6]
    assert run["verify_ms"]["n"] == 6 and min(per_step["verify_ms"]) > 0
    # each step's occupancy (start event to end event) plus the gaps between steps is the whole
    # window
    assert sum(per_step["verify_ms"]) + sum(per_step["gpu_gap_ms"]) == pytest.approx(
        run["gpu_elapsed_ms"], rel=1e-6
    )
    # the host's time inside a step's range never exceeds the events around it (on the CPU: the same
    # clock)
    assert all(h <= v for h, v in zip(per_step["host_ms"], per_step["verify_ms"]))
    assert {"gpu_elapsed_ms", "host_elapsed_ms", "host_wait_ms"} <= set(run)


@torch.inference_mode()
def test_pipelined_graph_replays_compute_the_eager_logits(monkeypatch):
    from verifyprof.workload import graphs

    monkeypatch.setattr(graphs, "Graph", ReplayedOnCPU)
    workload = tiny_workload(steps=0, pipelined=3)
    workload.graphs = graphs.PhaseGraphs(workload.state, (), with_decode=False)
    eager = workload.state.verify().clone()
    result = workload.run_pipelined("graph", 3)
    assert result["graph"] and result["verify_ms"]["n"] == 3
    assert torch.equal(workload.graphs.verify.output, eager)


def test_a_run_with_nothing_to_measure_exits_2(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert (
        main([*TINY_ARGS, "--steps", "0", "--decode-steps", "0", "--widths", "", "--out", str(out)])
        == 2
    )
    assert "nothing to measure" in capsys.readouterr().err


def test_pipelined_only_manifest_reports_the_pipelined_verify_time(tmp_path):
    from verifyprof.workload import write_manifest

    directory = tmp_path / "workload-dense-pipelined-eager"
    directory.mkdir()
    summary = run_main(
        directory, "--steps", "0", "--decode-steps", "0", "--widths", "", "--pipelined", "3"
    )
    assert (
        write_manifest.main(
            [str(directory), "--script", "traces/capture_pipelined.sh", "--", "python"]
        )
        == 0
    )
    doc = json.loads((directory / "manifest.json").read_text())
    run = summary["runs"][0]
    assert doc["results"] == {
        "verify_ms_median": run["verify_ms"]["median"],
        "mode": "eager",
        "pipelined_verify_ct": 3,
    }
    assert doc["command"]["script"] == "traces/capture_pipelined.sh"


COMPILE_ARGS = [
    "--compile-backend",
    "eager",
]  # Dynamo on the CPU without Inductor's C++ build: seconds


@torch.inference_mode()
def test_compiled_verify_computes_the_eager_logits():
    workload = tiny_workload(modes=("eager", "compile"), steps=1, compile_backend="eager")
    assert torch.equal(workload.verify(False, compiled=True), workload.state.verify())
    assert workload.compiled.fullgraph and workload.compiled.fullgraph_error is None


@torch.inference_mode()
def test_compile_mode_speculation_emits_the_same_tokens_as_eager():
    workload = tiny_workload(
        modes=("eager", "compile"), steps=8, accept_len=None, batch=2, compile_backend="eager"
    )
    eager, compiled = workload.run_spec("eager", 8, seed=0), workload.run_spec("compile", 8, seed=0)
    assert compiled["compile"] and not eager["compile"]
    assert compiled["tokens_head"] == eager["tokens_head"]
    assert compiled["per_step"]["accept_len"] == eager["per_step"]["accept_len"]


def test_compile_mode_ranges_carry_compile_1_and_skip_decode_and_sweep(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_main(
            tmp_path,
            "--mode",
            "eager,compile",
            *COMPILE_ARGS,
            "--steps",
            "1",
            "--decode-steps",
            "1",
            "--widths",
            "2",
            "--sweep-steps",
            "1",
            "--pipelined",
            "1",
            "--warmup",
            "0",
        )
    eager = [
        "verifyprof.spec_step bs=1 tokens=4 graph=0",
        "verifyprof.draft bs=1 tokens=3 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0",
        "verifyprof.accept bs=1 tokens=4",
        "verifyprof.draft_extend bs=1 tokens=4 graph=0",
        "verifyprof.decode bs=1 tokens=1 graph=0",
        "verifyprof.verify bs=1 tokens=2 graph=0 sweep=1",
        PIPELINED,
    ]
    compiled = [
        "verifyprof.spec_step bs=1 tokens=4 graph=0 compile=1",
        "verifyprof.draft bs=1 tokens=3 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0 compile=1",
        "verifyprof.accept bs=1 tokens=4",
        "verifyprof.draft_extend bs=1 tokens=4 graph=0",
        "verifyprof.verify bs=1 tokens=4 graph=0 compile=1 pipelined=1",
    ]
    assert range_names(prof) == ["verifyprof.prefill bs=1 tokens=16", *eager, *compiled]


def test_compile_summary_records_eager_and_compiled_verify_timings(tmp_path):
    summary = run_main(
        tmp_path,
        "--mode",
        "eager,compile",
        *COMPILE_ARGS,
        "--steps",
        "3",
        "--decode-steps",
        "0",
        "--widths",
        "",
    )
    eager, compiled = summary["runs"]
    assert [(r["kind"], r["mode"], r["verify_ms"]["n"]) for r in summary["runs"]] == [
        ("spec", "eager", 3),
        ("spec", "compile", 3),
    ]
    assert compiled["verify_ms_eager_over_compile"] == pytest.approx(
        eager["verify_ms"]["median"] / compiled["verify_ms"]["median"]
    )
    info = summary["config"]["compile"]
    assert (info["backend"], info["fullgraph"], info["cudagraphs"]) == ("eager", True, False)
    assert info["first_call_s"] > 0 and info["calls"] >= 3  # compiled before the measured steps


def test_an_unknown_compile_backend_exits_2_with_one_line(tmp_path, capsys):
    assert (
        main(
            [
                *TINY_ARGS,
                "--mode",
                "compile",
                "--compile-backend",
                "nope",
                "--out",
                str(tmp_path / "s.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "nope" in err and "\n" not in err


# --- the committed H200 traces of these modes (traces/README.md): the data others test against ---

TRACES = REPO / "traces"


def _nsys_projection_ns(folder: Path, range_text: str) -> int:
    import csv

    with open(folder / "stats_nvtx_gpu_proj_sum.csv", newline="") as f:
        row = next(
            r for r in csv.DictReader(f) if r["Range"].partition(":")[2] == range_text
        )  # DOMAIN:text
    return int(row["Total Proj Time (ns)"])


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_committed_pipelined_occupancy_agrees_with_nsys_projection(mode):
    folder = TRACES / f"workload-dense-pipelined-{mode}"
    (run,) = json.loads((folder / "summary.json").read_text())["runs"]
    text = f"verifyprof.verify bs=1 tokens=4 graph={int(mode == 'graph')} pipelined=1"
    projected_ms = _nsys_projection_ns(folder, text) / 1e6
    assert run["steps"] == 30
    assert sum(run["per_step"]["verify_ms"]) == pytest.approx(projected_ms, rel=0.05)


def test_committed_pipelined_graph_host_ran_ahead_of_the_gpu():
    (run,) = json.loads((TRACES / "workload-dense-pipelined-graph" / "summary.json").read_text())[
        "runs"
    ]
    assert (
        run["host_elapsed_ms"] < run["gpu_elapsed_ms"] / 2
    )  # the case breakdown books as launch_gap
    assert (
        max(run["per_step"]["gpu_gap_ms"]) < 0.05 * run["verify_ms"]["median"]
    )  # the GPU never idled


def test_committed_compile_pair_measured_eager_graph_and_compiled_verify_in_one_process():
    summary = json.loads((TRACES / "workload-dense-compile" / "summary.json").read_text())
    info = summary["config"]["compile"]
    assert (info["mode"], info["fullgraph"], info["cudagraphs"], info["cudagraph_skips"]) == (
        "reduce-overhead",
        True,
        True,
        0,
    )
    verify = {r["mode"]: r["verify_ms"]["median"] for r in summary["runs"] if r["kind"] == "spec"}
    assert verify["compile"] < verify["graph"] < verify["eager"]
    kernels = (TRACES / "workload-dense-compile" / "stats_cuda_gpu_kern_sum.csv").read_text()
    assert "triton_" in kernels  # Inductor's fused kernels are in the trace
