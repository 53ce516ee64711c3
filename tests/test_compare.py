"""`verifyprof compare`: the bundled eager and CUDA-graph verify traces of one workload, before and
after."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifyprof import pipeline
from verifyprof.cli import app
from verifyprof.model.decision.families import kernel_family

ROOT = Path(__file__).resolve().parents[1]
EAGER = ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz"
GRAPH = ROOT / "traces" / "workload-dense-graph" / "trace.sqlite.gz"
EAGER_MANIFEST = EAGER.parent / "manifest.json"
MOE_EAGER = ROOT / "traces" / "workload-moe-eager"
DILATED = ROOT / "traces" / "capture-workload-compile-userhooks"  # eager, dilation measured
HOOKED = ROOT / "traces" / "capture-workload-compile-hooks"


@pytest.fixture(scope="module")
def eager() -> pipeline.Run:
    return pipeline.open_run(EAGER, keep_trace=True)


@pytest.fixture(scope="module")
def graph() -> pipeline.Run:
    return pipeline.open_run(GRAPH, keep_trace=True)


@pytest.fixture(scope="module")
def eager_to_graph(eager, graph) -> dict:
    return pipeline.compare(eager, graph, manifest=EAGER_MANIFEST).to_json()


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_graph_verify_is_faster_than_eager(eager_to_graph):
    out = eager_to_graph
    assert out["schema"] == "verifyprof.compare/1"
    assert out["comparable"] and out["verdict"] == "faster"
    assert out["verify"]["after_ms"] < 0.3 * out["verify"]["before_ms"]
    assert re.match(r"faster: verify (wall|cost) 12\.631 -> 2\.202 ms", out["verdict_line"])


def test_the_launch_gap_is_what_graphs_removed(eager_to_graph):
    phases = {row["phase"]: row for row in eager_to_graph["phases"]}
    biggest = min(eager_to_graph["phases"], key=lambda row: row["delta_ms"])
    assert biggest["phase"] == "launch_gap"
    assert sum(row["delta_ms"] for row in eager_to_graph["phases"]) == pytest.approx(
        eager_to_graph["verify"]["delta_ms"], abs=1e-6
    )
    assert abs(phases["gemm_dense"]["delta_pct"]) < 5  # the same kernels ran
    counts = eager_to_graph["counts"]
    assert (
        counts["kernels"]["delta"] == 0
        and counts["launches"]["after"] == 1
        and counts["graph_launches"]["after"] == 1
    )


def test_same_kernel_families_on_both_sides(eager_to_graph):
    families = eager_to_graph["kernel_families"]
    assert families["available"] and families["appeared"] == [] and families["vanished"] == []
    assert families["families_before"] == families["families_after"] > 5


def test_prediction_check_models_what_changed_verify_and_draft_graphed(eager_to_graph):
    """The graph run graphed the drafter too: compare checks both fixes together, so the
    whole cycle is predicted, not the verify alone."""
    (pred,) = eager_to_graph["predictions"]
    assert pred["candidate"] == "cuda_graph_verify+cuda_graph_draft"
    assert pred["accept_len"] == pytest.approx(2.025)
    assert pred["measured_verify_ms"] == pytest.approx(eager_to_graph["verify"]["after_ms"])
    assert pred["verify_error_pct"] == pytest.approx(
        100 * (pred["predicted_verify_ms"] / pred["measured_verify_ms"] - 1)
    )
    assert abs(pred["verify_error_pct"]) < 15
    assert abs(pred["cycle_error_pct"]) < 15 and abs(pred["tokens_per_s_error_pct"]) < 15


def test_a_trace_compared_with_itself_is_no_change(graph):
    out = pipeline.compare(graph, graph).to_json()
    assert out["verdict"] == "no change" and out["verify"]["delta_ms"] == 0
    assert (
        all(row["delta_ms"] == 0 for row in out["phases"])
        and out["mode_switch"] is None
        and out["warnings"] == []
    )


def test_graph_to_eager_is_loud(eager, graph):
    out = pipeline.compare(graph, eager).to_json()
    assert out["verdict"] == "slower" and out["mode_switch"] == "graph->eager"
    assert any("SWITCHED FROM CUDA GRAPHS TO EAGER" in w for w in out["warnings"])


def test_graph_to_eager_names_the_mode_change_it_reports(eager, graph):
    """No candidate models taking graphs away: the note says so, with the mode and launch counts
    of the table above it, never that the mode stayed the same."""
    out = pipeline.compare(graph, eager, manifest=EAGER_MANIFEST).to_json()
    note = out["prediction_note"]
    b, a = out["before"], out["after"]
    assert out["predictions"] == [] and note.startswith("no what-if candidate models this change")
    assert f"verify {b['mode']} -> {a['mode']}" in note and (b["mode"], a["mode"]) == (
        "graph",
        "eager",
    )
    assert f"{b['launches']:.0f} -> {a['launches']:.0f} launches" in note
    assert "are the same" not in note


def test_dense_to_moe_names_the_kernel_count_and_the_new_phases(eager):
    """Dense -> MoE in one mode: the kernel count the table shows and the MoE phases, named."""
    out = pipeline.compare(eager, MOE_EAGER, manifest=EAGER_MANIFEST).to_json()
    note = out["prediction_note"]
    kernels = out["counts"]["kernels"]
    assert kernels["after"] > 1.5 * kernels["before"]
    assert f"verify kernels {kernels['before']:.0f} -> {kernels['after']:.0f}" in note
    assert "gemm_moe" in note and "are the same" not in note
    assert out["change"] and all(word in note for word in out["change"])


def test_nothing_changed_says_what_stayed_with_its_values(graph):
    out = pipeline.compare(graph, graph, manifest=EAGER_MANIFEST).to_json()
    assert out["predictions"] == [] and out["change"] == []
    assert "mode (graph)" in out["prediction_note"] and "width (4)" in out["prediction_note"]


def test_compare_labels_traced_and_unprofiled_numbers_as_whatif_states_them():
    """An eager capture with a measured dilation: the table is the mean step as traced, and the
    verify at the unprofiled rate is whatif's own 'current' verify, labelled as such."""
    out = pipeline.compare(DILATED, HOOKED).to_json()
    b = out["before"]
    code, text = cli("whatif", "--from", str(DILATED), "--json")
    assert code == 0, text
    current = json.loads(text)["current"]
    assert b["basis"] == "traced" and b["statistic"] == "mean" and b["dilation"] > 1
    assert b["unprofiled_verify_ms"] == pytest.approx(current["verify_ms"])
    assert b["unprofiled_verify_ms"] < out["verify"]["before_ms"]  # the profiler's time out
    assert out["after"]["dilation"] is None and out["after"]["unprofiled_verify_ms"] is None
    assert b["label"] == f"mean of {b['steps']} steps of {b['group']}, device {b['device']}"
    code, text = cli("compare", str(DILATED), str(HOOKED))
    assert code == 0
    flat = " ".join(text.split())
    assert "mean ms per step as traced" in flat and "verify cost (traced)" in flat
    assert "unprofiled rate (whatif's)" in flat and f"{current['verify_ms']:.3f}" in flat


def test_gate_passes_when_verify_got_faster():
    code, output = cli("compare", str(EAGER), str(GRAPH), "--gate", "5")
    assert code == 0 and "gate 5%: passed" in output and "faster: verify " in output


def test_gate_fails_when_verify_got_slower_by_more_than_pct():
    code, output = cli("compare", str(GRAPH), str(EAGER), "--gate", "5")
    assert code == 1 and "FAILED" in output and "SWITCHED FROM CUDA GRAPHS TO EAGER" in output


def test_gate_passes_a_slowdown_within_pct():
    code, output = cli("compare", str(GRAPH), str(EAGER), "--gate", "500", "--json")
    data = json.loads(output)
    assert (
        code == 0
        and data["gate"] == {"pct": 500.0, "failed": False}
        and 400 < data["verify"]["delta_pct"] < 500
    )


def test_breakdown_json_inputs_compare_like_their_traces(tmp_path, eager_to_graph):
    before = tmp_path / "eager.json"
    before.write_text(
        subprocess.run(
            [sys.executable, "-m", "verifyprof.cli", "breakdown", str(EAGER), "--json"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    )
    out = pipeline.compare(before, GRAPH).to_json()
    assert out["verify"] == eager_to_graph["verify"] and out["phases"] == eager_to_graph["phases"]
    assert (
        out["kernel_families"]["available"] is False
        and "breakdown JSON" in out["kernel_families"]["reason"]
    )


def test_different_gpus_are_not_comparable(tmp_path, graph):
    data = json.loads(
        subprocess.run(
            [sys.executable, "-m", "verifyprof.cli", "breakdown", str(GRAPH), "--json"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    )
    other = copy.deepcopy(data)
    other["trace"]["devices"][0]["name"] = "NVIDIA H100 80GB HBM3"
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(other))
    out = pipeline.compare(graph, path).to_json()
    assert out["verdict"] == "not comparable" and out["verdict_line"].startswith(
        "not comparable (different GPUs"
    )


def test_a_missing_input_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifyprof.cli",
            "compare",
            str(tmp_path / "nope.json"),
            str(GRAPH),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "160"},
    )
    lines = proc.stderr.strip().splitlines()
    assert (
        proc.returncode == 2
        and len(lines) == 1
        and lines[0].startswith("verifyprof: error: ")
        and "nope.json" in lines[0]
    )


def test_kernel_family_drops_templates_signatures_and_numbers():
    assert (
        kernel_family(
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16,"
            " float>(int, float)"
        )
        == "at::native::vectorized_layer_norm_kernel"
    )
    assert kernel_family("nvjet_sm90_tst_128x64_64x8_2x1_v_bz_TNT") == kernel_family(
        "nvjet_sm90_tst_256x128_64x4_1x2_v_bz_TNT"
    )


def test_traces_without_ranges_compare_whole_and_are_not_called_verify():
    """Two real 2-GPU training captures (no verify ranges): ``--whole-trace`` compares one step per
    device of each, and the verdict names the whole-trace step, not a verify step."""
    public = ROOT / "tests" / "data" / "public" / "nsys"
    before, after = (
        public / "nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz",
        public / "nsysai_mfu_2gpu_after_nsys2026.2.sqlite.gz",
    )
    ran = CliRunner().invoke(app, ["compare", str(before), str(after), "--whole-trace", "--json"])
    assert ran.exit_code == 0, ran.output
    data = json.loads(ran.stdout)
    assert (
        data["before"]["step"] == data["after"]["step"] == "whole_trace"
        and data["before"]["devices"] == 2
    )
    assert (
        data["verdict_line"].startswith(f"{data['verdict']}: whole-trace cost ")
        and "verify" not in data["verdict_line"]
    )


def test_whole_trace_compare_counts_kernel_families_over_the_whole_trace():
    code, out = cli("compare", str(EAGER), str(GRAPH), "--whole-trace", "--json")
    assert code == 0, out
    families = json.loads(out)["kernel_families"]
    assert families["scope"] == "the whole trace (--whole-trace)"
    code, out = cli("compare", str(EAGER), str(GRAPH), "--json")
    assert json.loads(out)["kernel_families"]["scope"] == "the verify ranges"


def test_table_titles_wrap_at_the_terminal_width_unpadded():
    result = CliRunner().invoke(app, ["compare", str(EAGER), str(GRAPH)], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("Verify step per phase"))
    assert len(lines[title]) > 64 and lines[title] == lines[title].rstrip()
    assert all(len(line) <= 100 for line in lines[title : title + 2])
    assert not [line for line in lines if line.startswith("Prediction") and line != line.rstrip()]


def test_compare_step_decode_predicts_one_token_a_step_as_whatif_does():
    # the bundled folders' manifests hold the speculative accept length (2.025); a decode step
    # makes one token per request, whatif --step decode says so, and compare's check agrees
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "compare", str(EAGER.parent), str(GRAPH.parent)]
        + ["--step", "decode", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (check,) = json.loads(done.stdout)["predictions"]
    assert check["predicted_accept_len"] == check["accept_len"] == 1.0
    assert check["measured_tokens_per_s"] == pytest.approx(1e3 / check["measured_cycle_ms"])


def test_a_run_under_other_step_windows_cuts_its_own_steps(eager):
    steps = len(eager.frame.steps)
    whole = eager.under(pipeline.WhatifOptions(whole_trace=True))
    assert whole.trace is eager.trace  # read once
    assert len(whole.frame.steps) == 1 < steps  # the whole trace as one step, not the verify's
    same = eager.under(pipeline.WhatifOptions(step="verifyprof.verify"))  # a name: no ranges added
    assert same.frame is eager.frame  # the same windows: what was made from them is shared
    prefill = eager.under(pipeline.WhatifOptions(step="prefill"))  # its phase's ranges added
    assert prefill.trace is eager.trace and prefill.frame is not eager.frame


def test_compare_refuses_a_speculative_accept_length_for_a_decode_step_as_whatif_does():
    code, out = cli("compare", str(EAGER), str(GRAPH), "--step", "decode", "--accept-len", "2")
    assert code == 2
    assert "--step decode: a decode step makes one token per request, not 2" in out
