"""Robust anchors (issue 42, item 5): every measured rate that anchors the model (the baseline
runs, the profiled process's own unprofiled calls, --decode-cmd's runs) is shown with n, median
and spread; a baseline that disagrees with the program's own unprofiled calls by more than their
spread is flagged in one warning and never used alone. On a real H200 capture (batch 1, three
baseline runs at 280.5-283.7 tok/s) whose results gain the program's own unprofiled calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import verifyprof

C1 = Path(__file__).resolve().parents[1] / "bench" / "results" / "load_mha_h200_3" / "C1"


def capture_with_own_calls(tmp_path: Path, calls: list[float], capture: Path = C1) -> Path:
    """A copy of a capture whose profiled process also measured itself unprofiled at ``calls``."""
    out = tmp_path / capture.name
    shutil.copytree(capture, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["results"]["unprofiled_tokens_per_s"] = calls
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def whatif_json(capture: Path) -> dict:
    shown = verifyprof("whatif", str(capture), "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_a_baseline_off_the_programs_own_calls_is_flagged_and_not_used_alone(tmp_path):
    capture = capture_with_own_calls(tmp_path, [266.0, 267.5])  # the baseline: 282.5, +6%
    data = whatif_json(capture)
    rates = data["current"]["anchor_rates"]
    assert rates["baseline_flagged"]
    assert rates["anchor_tokens_per_s"] == pytest.approx(266.75)
    assert data["current"]["unprofiled_tokens_per_s"] == pytest.approx(266.75)
    (caution,) = data["verdict_parts"]["cautions"]
    assert "the baseline runs (282.5 tok/s, n=3) disagree" in caution and "+6%" in caution
    screen = " ".join(verifyprof("whatif", str(capture), env={"COLUMNS": "80"}).stdout.split())
    assert screen.count("disagree with the profiled process's own unprofiled calls") == 1


def test_a_baseline_that_agrees_with_the_programs_own_calls_anchors_as_before(tmp_path):
    data = whatif_json(capture_with_own_calls(tmp_path, [281.0, 284.0]))
    rates = data["current"]["anchor_rates"]
    assert not rates["baseline_flagged"] and not data["verdict_parts"]["cautions"]
    assert data["current"]["unprofiled_tokens_per_s"] == pytest.approx(282.538, abs=1e-3)


def test_every_anchoring_rate_is_shown_with_n_median_and_spread(tmp_path):
    capture = capture_with_own_calls(tmp_path, [266.0, 267.5])
    sources = {s["source"]: s for s in whatif_json(capture)["current"]["anchor_rates"]["sources"]}
    base = sources["baseline runs (--baseline-run, unprofiled)"]
    assert base["n"] == 3 and base["median_tokens_per_s"] == pytest.approx(282.538, abs=1e-3)
    assert base["spread"] == pytest.approx((283.717 - 280.455) / 282.538, abs=1e-4)
    own = sources["the profiled process's own unprofiled calls"]
    assert own["n"] == 2 and own["median_tokens_per_s"] == pytest.approx(266.75)
    decode = sources["--decode-cmd runs (unprofiled)"]
    assert decode["what"] == "plain decoding" and decode["n"] == 1
    details = " ".join(verifyprof("whatif", str(capture), "--details").stdout.split())
    assert (
        "anchoring rate: speculating, baseline runs (--baseline-run, unprofiled): n=3," in details
    )
    assert "median 282.5 tok/s, spread 1.2%" in details


def test_a_flagged_baseline_in_another_capture_is_named_by_its_capture(tmp_path):
    c8 = capture_with_own_calls(
        tmp_path, [1770.0, 1780.0], C1.parent / "C8"
    )  # baseline 1866 a batch of 8
    model = str(C1.parents[3] / "bench" / "models" / "hf-chain-7b-mha.toml")
    shown = verifyprof("whatif", str(C1), str(c8), "--model", model, "--json")
    assert shown.returncode == 0, shown.stderr
    (caution,) = json.loads(shown.stdout)["verdict_parts"]["cautions"]
    assert caution.startswith("C8: the baseline runs (233.2 tok/s, n=3) disagree")  # a request


def test_plain_decodings_rates_that_disagree_are_one_caution(tmp_path):
    capture = tmp_path / "C1"
    shutil.copytree(C1, capture)
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest["dilation"]["unprofiled_baseline_tokens_per_s"] = 120.0  # --decode-cmd: 137.2
    (capture / "manifest.json").write_text(json.dumps(manifest))
    (caution,) = whatif_json(capture)["verdict_parts"]["cautions"]
    assert caution.startswith("plain decoding's measured rates disagree: --decode-cmd runs")
    assert "137.2 tok/s (n=1) against the baseline run's own plain decoding 120.0" in caution


B5_16 = C1.parents[1] / "external_h100_b5" / "captures-b" / "batch-16"  # a batched gpt-fast


def capture_with_samples(tmp_path: Path, unprofiled: list[float]) -> Path:
    """A copy of B5's batch-16 capture whose baseline run printed these per-sample rates."""
    out = tmp_path / B5_16.name
    shutil.copytree(B5_16, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["dilation"]["samples"]["unprofiled"] = unprofiled
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def test_a_cold_first_sample_with_two_warm_ones_is_one_unsettled_anchor_caution():
    data = whatif_json(B5_16)  # its baseline samples 123.8, 149.1, 156.0 tok/s: 13.5% under
    (caution,) = data["verdict_parts"]["cautions"]
    assert caution.startswith("the unprofiled baseline's per-sample rates start cold")
    assert "run 6 or more samples" in caution


def test_settled_samples_carry_no_unsettled_caution(tmp_path):
    for samples in ([149.1, 156.0, 150.2], [77.7, 190.7, 169.7, 182.5, 188.9, 198.2]):
        data = whatif_json(capture_with_samples(tmp_path / str(len(samples)), samples))
        assert not any("start cold" in c for c in data["verdict_parts"]["cautions"]), samples


def test_every_capture_of_a_folder_that_starts_cold_says_it_once():
    folder = B5_16.parent  # four captures, each with a cold first sample
    screen = verifyprof("whatif", str(folder), env={"COLUMNS": "80"}).stdout
    assert " ".join(screen.split()).count("per-sample rates start cold") == 1
