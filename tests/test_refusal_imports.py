"""A command refused before any read (a missing trace, a bad --range) answers its one line before
the analysis is loaded: pandas is never imported for it, so a mistyped path costs a fraction of a
second, not the whole stack's import (issue 35: the suite runs ~340 real CLI processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

PROBE = """
import sys
sys.argv = ["verifyprof", *sys.argv[1:]]
from verifyprof.cli import main
try:
    main()
except SystemExit as exc:
    print("exit", exc.code, "pandas" in sys.modules)
"""
EAGER = str(REPO / "traces" / "workload-dense-eager")


@pytest.mark.parametrize(
    "args",
    [
        ("kernels", "missing.sqlite"),
        ("breakdown", "missing.sqlite"),
        ("whatif", "missing.sqlite"),
        ("compare", "missing.sqlite", EAGER),
        ("breakdown", EAGER, "--range", "("),
    ],
    ids=["kernels", "breakdown", "whatif", "compare", "bad-range"],
)
def test_a_refusal_before_any_read_does_not_load_pandas(tmp_path, args):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == "exit 2 False", done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "verifyprof: error: " in done.stderr
