"""Traces made by `verifyprof capture` on the H200 (traces/capture_verifyprof.sh): the hooked
ranges are there and `breakdown` finds the verify steps the programs reported."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from cli_helpers import verifyprof
from conftest import NSYS_REP_HEAD, OWN_TRACES

from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts.errors import ToolMissingError
from verifyprof.trace import load_trace

WORKLOAD = OWN_TRACES / "capture-workload-hooks"
HF = OWN_TRACES / "capture-hf-assisted"


def manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def test_workload_ranges_come_from_the_hooks_with_its_own_ranges_off():
    m = manifest(WORKLOAD)
    assert "--no-ranges" in m["command"]["target"]
    assert m["hooks"]["presets"] == ["workload"]
    (process,) = m["hooks"]["processes"]
    assert process["patched"] >= 6 and process["missing"] == []


def test_breakdown_finds_every_hooked_workload_verify_in_both_modes():
    result = breakdown(load_trace(WORKLOAD / "capture.sqlite.gz"))
    verify = result.steps[result.steps["name"] == "verifyprof.verify"]
    summary = json.loads((WORKLOAD / "workload.json").read_text())
    spec_runs = [r for r in summary["runs"] if r["kind"] == "spec"]
    assert len(verify) == sum(r["steps"] for r in spec_runs) == 60
    assert set(verify["mode"]) == {"eager", "graph"}
    assert (verify[verify["mode"] == "graph"]["graph_launches"] == 1).all()
    assert (verify["kernels"] > 100).all()


def test_hooked_verify_graph_time_agrees_with_the_programs_cuda_events():
    result = breakdown(
        load_trace(WORKLOAD / "capture.sqlite.gz"), step_regex=r"^verifyprof\.verify .*graph=1"
    )
    summary = json.loads((WORKLOAD / "workload.json").read_text())
    (graph_run,) = [r for r in summary["runs"] if r["kind"] == "spec" and r["mode"] == "graph"]
    # the GPU projection of the graphed verify vs the workload's own CUDA-event timing
    assert result.steps["gpu_span_ns"].median() / 1e6 == pytest.approx(
        graph_run["verify_ms"]["median"], rel=0.05
    )


def test_capture_manifest_records_accept_length_and_throughput():
    results = manifest(WORKLOAD)["results"]
    assert 1.5 < results["accept_len"] < 2.5 and results["tokens_per_s"] > 0
    assert results["baseline_tokens_per_s"] > 0


def test_hf_assisted_verify_steps_match_what_transformers_reported():
    m = manifest(HF)
    assert m["hooks"]["presets"] == ["hf-assisted"] and m["hooks"]["processes"][0]["missing"] == []
    result = breakdown(load_trace(HF / "capture.sqlite.gz"))
    verify = result.steps[result.steps["name"] == "verifyprof.verify"]
    assert len(verify) == m["results"]["verify_steps"] == 12
    assert (verify["kernels"] > 0).all()
    drafts = result.steps[result.steps["name"] == "verifyprof.draft"]
    assert drafts["step"].nunique() == 12


def test_nsys_report_without_nsys_says_how_to_export_it_elsewhere(monkeypatch, tmp_path):
    if shutil.which("nsys"):
        pytest.skip("nsys is installed here: the report would simply be exported")
    report = tmp_path / "capture.nsys-rep"
    report.write_bytes(NSYS_REP_HEAD.read_bytes())
    with pytest.raises(ToolMissingError, match=r"nsys export --type sqlite"):
        load_trace(report)
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(report)],
        capture_output=True,
        text=True,
    )
    assert (
        done.returncode == 2
        and "capture.nsys-rep" in done.stderr
        and len(done.stderr.strip().splitlines()) == 1
    )


def test_the_h200_hf_capture_with_a_baseline_run_records_the_dilation_whatif_reads():
    from verifyprof.contracts.manifest import read_manifest

    path = OWN_TRACES / "capture10-hf-assisted-dilation" / "manifest.json"
    manifest = read_manifest(path)
    assert (
        manifest.dilation == pytest.approx(25.856 / 20.049, rel=1e-3)
        and manifest.dilation_source == "baseline run"
    )
    assert manifest.unprofiled_tps == pytest.approx(25.856, rel=1e-3)
    assert manifest.unprofiled_baseline_tps == pytest.approx(25.077, rel=1e-3)  # baseline/
    hooks = json.loads(path.read_text())["hooks"]
    assert hooks["presets"] == [] and hooks["never_fired"] == [] and hooks["trace_ranges"] == 190


def test_the_compiled_workload_with_user_hooks_only_has_graph_mode_verify_steps_and_its_dilation():
    """H200: the workload's verify under torch.compile (reduce-overhead, fullgraph), hooked on the
    very method it compiles, through user --hook targets only, with a baseline run."""
    from verifyprof.contracts.manifest import read_manifest
    from verifyprof.pipeline import breakdown_frame

    folder = OWN_TRACES / "capture-workload-compile-userhooks"
    m = manifest(folder)
    assert m["hooks"]["presets"] == [] and m["hooks"]["never_fired"] == []
    assert "--no-ranges" in m["command"]["target"]
    assert read_manifest(folder / "manifest.json").dilation == pytest.approx(154.1 / 65.1, rel=0.01)
    steps = breakdown_frame(folder).steps
    verify = steps[steps["name"] == "verifyprof.verify"]
    assert verify["mode"].value_counts().to_dict() == {"eager": 20, "graph": 20}
    graph = verify[verify["mode"] == "graph"]
    assert graph["kernels"].mean() == 167  # Inductor's fused forward, replayed as a graph
    assert graph["cost_ns"].mean() < verify[verify["mode"] == "eager"]["cost_ns"].mean() / 5


def test_at_the_unprofiled_rate_speculation_races_the_unprofiled_plain_rate():
    """Both sides of the race on one basis: today's cycle anchored to the baseline run's 25.86
    tok/s races that run's own plain decoding (25.08), not the profiled run's (21.47), so the
    speedup is the one the unprofiled run measured itself (its results' speedup_vs_decode)."""
    folder = OWN_TRACES / "capture10-hf-assisted-dilation"
    trace = OWN_TRACES / "capture-hf-assisted" / "capture.sqlite.gz"  # the same program's trace
    done = verifyprof("whatif", str(trace), "--manifest", str(folder / "manifest.json"), "--json")
    assert done.returncode == 0, done.stderr
    current = json.loads(done.stdout)["current"]
    measured = json.loads((folder / "baseline" / "results.json").read_text())
    assert current["basis"] == "unprofiled"
    assert current["speedup"] == pytest.approx(measured["speedup_vs_decode"], rel=2e-3)
    assert any("plain decoding at the unprofiled rate" in n for n in current["notes"])
