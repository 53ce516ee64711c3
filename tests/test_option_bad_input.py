"""Options and surroundings that once ended in a traceback (issue 22): a regex Python cannot
compile, a 300-character hooks spec, a cache folder that cannot be searched. Each is one line,
``verifyprof: error: ...``, exit 2, through the real CLI on real traces."""

from __future__ import annotations

import gzip
import os
import shutil

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES, PUBLIC

MOCK = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"
TWO_RANKS = OWN_TRACES / "torchrun-2ranks-one-gpu"
OVERFLOW = "a{99999999999}"  # re: OverflowError, "the repetition number is too large"
as_root = os.geteuid() == 0


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


@pytest.mark.skipif(as_root, reason="root searches folders without the x permission")
def test_a_cache_folder_that_cannot_be_searched_is_blamed_on_the_cache(tmp_path, monkeypatch):
    trace = tmp_path / "in" / "mock.sqlite.gz"
    trace.parent.mkdir()
    trace.write_bytes(gzip.compress(MOCK.read_bytes()))
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0)
    monkeypatch.setenv("VERIFYPROF_CACHE", str(cache))
    try:
        line = one_line(verifyprof("breakdown", str(trace), "--whole-trace"), str(cache))
    finally:
        cache.chmod(0o755)
        shutil.rmtree(cache)
    assert line.startswith(f"verifyprof: error: {trace}: cannot write its derived copy")


def test_the_hooks_error_names_the_preset_shortened(tmp_path):
    line = one_line(verifyprof("hooks", "y" * 300))
    assert "y" * 41 not in line and "…" in line and len(line) < 300
