"""``capture --result NAME=REGEX``: a program that prints its numbers (gpt-fast's ``generate.py``
prints "Mean Accepted: ..." and "Average tokens/sec: ...") and writes no results.json gives them
to the manifest, to the baseline run and to the ``--decode-cmd`` run, read from its own output."""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path

import pytest
from capture_helpers import capture_program, read_manifest

RATE = "tokens_per_s=Average tokens/sec: ([0-9.]+)"
ACCEPT = "accept_len=Mean Accepted: ([0-9.]+)"

# gpt-fast's last lines, as its generate.py prints them; a rate line per sample, the average last
PRINTS = """
import sys
speculative = "--plain" not in sys.argv
print("Time for inference 1: 2.00 sec total, 50.00 tokens/sec")
print("==========")
if speculative:
    print("Acceptance probs: [0.25, 0.25, 0.5]")
    print("Mean Accepted: 1.25")
print("Average tokens/sec: {rate}")
"""


def program(tmp_path: Path, rate: float = 61.5) -> Path:
    path = tmp_path / "generate.py"
    path.write_text(textwrap.dedent(PRINTS.format(rate=rate)))
    return path


capture = capture_program  # the shape every test here runs


def test_printed_rate_and_accept_length_become_the_manifests_results(tmp_path, tag):
    out = tmp_path / "cap"
    proc = capture(
        out,
        program(tmp_path),
        "--result",
        RATE,
        "--result",
        ACCEPT,
        "--accept-len-convention",
        "accepted_drafts",
        tag=tag,
    )
    assert proc.returncode == 0, proc.stderr
    results = read_manifest(out)["results"]
    assert results["tokens_per_s"] == pytest.approx(61.5)
    assert results["accept_len"] == pytest.approx(2.25)  # 1.25 accepted drafts + the bonus token
    assert "throughput: 61.5 tok/s (reported by the program)" in proc.stdout


def test_a_baseline_run_takes_its_rate_through_the_same_pattern(tmp_path, tag):
    out = tmp_path / "cap"
    proc = capture(out, program(tmp_path), "--baseline-run", "--result", RATE, tag=tag)
    assert proc.returncode == 0, proc.stderr
    dilation = read_manifest(out)["dilation"]
    assert dilation["unprofiled_tokens_per_s"] == pytest.approx(61.5)
    assert dilation["factor"] == pytest.approx(1.0)


def test_a_decode_cmd_takes_its_plain_rate_through_the_same_pattern(tmp_path, tag):
    out = tmp_path / "cap"
    plain = tmp_path / "plain"
    plain.mkdir()
    decode = shlex.join([sys.executable, str(program(plain, rate=40.0)), "--plain"])
    proc = capture(out, program(tmp_path), "--decode-cmd", decode, "--result", RATE, tag=tag)
    assert proc.returncode == 0, proc.stderr
    assert read_manifest(out)["results"]["baseline_tokens_per_s"] == pytest.approx(40.0)


def test_a_pattern_that_matches_nothing_is_one_line_not_a_failure(tmp_path, tag):
    out = tmp_path / "cap"
    proc = capture(
        out, program(tmp_path), "--result", "tokens_per_s=Throughput: ([0-9.]+)", tag=tag
    )
    assert proc.returncode == 0, proc.stderr
    line = "--result tokens_per_s: 'Throughput: ([0-9.]+)' matched nothing in program.log"
    assert read_manifest(out)["results"]["result_problems"] == [line]
    assert line in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("tokens_per_s=Average tokens/sec: [0-9.]+", "has no group"),
        ("tokens_per_s=Average (tokens/sec: [0-9.]+", "is not a regex"),
        ("Average tokens/sec", "expected NAME=REGEX"),
    ],
)
def test_a_pattern_that_cannot_work_is_refused_before_the_program_starts(tmp_path, tag, spec, says):
    out = tmp_path / "cap"
    marker = tmp_path / "ran"
    script = tmp_path / "prog.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    proc = capture(out, script, "--result", spec, tag=tag)
    assert proc.returncode == 2
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not marker.exists()
