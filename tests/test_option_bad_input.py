"""Options and surroundings that once ended in a traceback (issue 22): a regex Python cannot
compile, a 300-character hooks spec, a cache folder that cannot be searched. Each is one line,
``verifyprof: error: ...``, exit 2, through the real CLI on real traces."""

from __future__ import annotations

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES, PUBLIC

MOCK = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"
TWO_RANKS = OWN_TRACES / "torchrun-2ranks-one-gpu"
OVERFLOW = "a{99999999999}"  # re: OverflowError, "the repetition number is too large"


def one_line(done, *fragments: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["breakdown", "kernels"])
def test_a_range_whose_repetition_overflows_is_one_line(command):
    one_line(
        verifyprof(command, str(MOCK), "--range", OVERFLOW),
        f"--range '{OVERFLOW}' is not a valid regular expression",
        "repetition number is too large",
    )


def test_a_range_nested_past_the_recursion_limit_is_one_line():
    one_line(
        verifyprof("breakdown", str(MOCK), "--range", "(" * 5000 + ")" * 5000),
        "is not a valid regular expression",
    )


def test_a_bad_range_over_rank_files_is_one_line_not_one_per_file():
    one_line(
        verifyprof("breakdown", str(TWO_RANKS), "--range", "verify("),
        "--range 'verify(' is not a valid regular expression",
    )


def test_a_taxonomy_pattern_whose_repetition_overflows_is_one_line_naming_the_file(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[[rule]]\nphase = "norm"\npatterns = ["{OVERFLOW}"]\n')
    line = one_line(verifyprof("kernels", str(MOCK), "--taxonomy", str(rules)))
    assert line.startswith(f"verifyprof: error: {rules}: taxonomy rule 1 (norm): bad regex")


@pytest.mark.parametrize(
    "args",
    [
        ["hooks", "x" * 300],
        ["hooks", "sglang," + "x" * 300],
    ],
    ids=["preset", "in-a-list"],
)
def test_a_300_character_hooks_spec_is_one_line(args):
    """The preset lookup stat()ed hooks/xxx...x.toml: OSError, file name too long."""
    one_line(verifyprof(*args))


def test_a_300_character_hooks_preset_for_capture_is_refused_before_anything_runs(tmp_path):
    out = tmp_path / "capture"
    one_line(
        verifyprof(
            "capture", "--out", str(out), "--backend", "none", "--hooks", "x" * 300, "--", "true"
        ),
        "unknown hook preset",
    )
    assert not out.exists()


def test_the_hooks_error_names_the_preset_shortened(tmp_path):
    line = one_line(verifyprof("hooks", "y" * 300))
    assert "y" * 41 not in line and "…" in line and len(line) < 300
