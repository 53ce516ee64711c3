"""``capture --result NAME[]=REGEX``: a program that prints its rate per sample and then
their average (the batched gpt-fast fork, 6f68835: "Time for inference 1: 3.94 sec total, 11.92
tokens/sec", then 32.29 and 29.64, then "Average tokens/sec: 24.62") counts its first, cold
sample in that average. Every match is kept, and the dilation's rates are the samples' medians."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from capture_helpers import capture_program, read_manifest

from verifyprof.capture.log_results import results_from_log
from verifyprof.contracts.manifest import read_manifest as manifest_of

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = r"tokens_per_s_samples[]=Time for inference \d+: [0-9.]+ sec total, ([0-9.]+) tokens/sec"
RATE = "tokens_per_s=Average tokens/sec: ([0-9.]+)"
# the fork's unprofiled batch-1 run on the H100 (bench/results/external_h100_b2)
FORK_LOG = ROOT / "bench/results/external_h100_b2/captures-b/batch-1/baseline/program.log"

PRINTS = """
import os
rates = [12.0, 30.0, 28.0] if not os.environ.get("BASELINE") else [14.0, 36.0, 33.0]
for i, r in enumerate(rates):
    print(f"Time for inference {i + 1}: 1.00 sec total, {r:.2f} tokens/sec")
print(f"Average tokens/sec: {sum(rates) / len(rates):.2f}")
"""


def test_a_samples_pattern_keeps_every_match_in_order():
    found = results_from_log(FORK_LOG, (tuple(SAMPLES.split("=", 1)),))
    assert found == {"tokens_per_s_samples": [11.92, 32.29, 29.64]}


def test_any_other_pattern_keeps_its_last_match_whatever_its_name():
    pattern = r"num_samples=Time for inference \d+: [0-9.]+ sec total, ([0-9.]+) tokens/sec"
    assert results_from_log(FORK_LOG, (tuple(pattern.split("=", 1)),)) == {"num_samples": 29.64}


def program(tmp_path: Path) -> Path:
    """Its unprofiled (baseline) run prints faster samples than its profiled one, each run's
    first sample cold."""
    path = tmp_path / "generate.py"
    text = textwrap.dedent(PRINTS).replace(
        'os.environ.get("BASELINE")', '"baseline" in os.environ.get("VERIFYPROF_CAPTURE_DIR", "")'
    )
    path.write_text(text)
    return path


def test_the_dilation_of_a_program_printing_samples_is_their_medians(tmp_path, tag):
    out = tmp_path / "cap"
    proc = capture_program(
        out, program(tmp_path), "--baseline-run", "--result", RATE, "--result", SAMPLES, tag=tag
    )
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["profiled_tokens_per_s"] == 28.0  # median of 12, 30, 28; the average: 23.33
    assert dilation["unprofiled_tokens_per_s"] == 33.0  # median of 14, 36, 33; the average: 27.67
    assert dilation["factor"] == pytest.approx(33.0 / 28.0)
    assert dilation["samples"]["unprofiled"] == [14.0, 36.0, 33.0]
    assert manifest_of(out / "manifest.json").dilation_samples == ((12, 30, 28), (14, 36, 33))


def test_a_capture_whose_samples_start_cold_with_two_warm_ones_says_they_are_unsettled(
    tmp_path, tag
):
    out = tmp_path / "cap"
    proc = capture_program(
        out, program(tmp_path), "--baseline-run", "--result", RATE, "--result", SAMPLES, tag=tag
    )
    assert proc.returncode == 0, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "its unprofiled samples 14.0, 36.0, 33.0 tok/s start cold" in said
    assert "run 6 or more samples for a settled rate" in said


def test_without_samples_the_dilation_is_the_programs_average(tmp_path, tag):
    out = tmp_path / "cap"
    proc = capture_program(out, program(tmp_path), "--baseline-run", "--result", RATE, tag=tag)
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["unprofiled_tokens_per_s"] == pytest.approx(27.67)
    assert "samples" not in dilation


def test_fewer_than_three_samples_leave_the_programs_average(tmp_path, tag):
    path = tmp_path / "generate.py"
    path.write_text(program(tmp_path).read_text().replace("[12.0, 30.0, 28.0]", "[12.0, 30.0]"))
    out = tmp_path / "cap"
    proc = capture_program(
        out, path, "--baseline-run", "--result", RATE, "--result", SAMPLES, tag=tag
    )
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["profiled_tokens_per_s"] == pytest.approx(21.0)  # the program's average
    assert "samples" not in dilation
