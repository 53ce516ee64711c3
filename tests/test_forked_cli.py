"""The forked CLI process (``forked_cli``) the suite uses in place of a fresh interpreter gives
what a fresh ``python -m verifyprof.cli`` gives: the same bytes on stdout and stderr, the same
exit status, the same working directory and environment."""

from __future__ import annotations

import os
import subprocess
import sys

import forked_cli
import pytest
from conftest import PUBLIC, REPO

MOCK = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"


def fresh(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", *args],
        capture_output=True,
        timeout=120,
        **kwargs,
    )


def same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_a_table_a_usage_error_and_a_refusal_are_what_a_fresh_process_prints(tmp_path):
    env = {**os.environ, "COLUMNS": "120"}
    for args in (
        ["kernels", str(MOCK)],
        ["breakdown", str(MOCK), "--no-such-option"],
        ["kernels", "missing.sqlite"],
    ):
        same(forked_cli.run(args, cwd=tmp_path, env=env), fresh(args, cwd=tmp_path, env=env))


def test_a_start_up_variable_is_honoured_as_a_fresh_interpreter_honours_it(tmp_path):
    """PYTHONIOENCODING is read when the interpreter starts: a request with another value gets
    a zygote started with it."""
    env = {**os.environ, "PYTHONIOENCODING": "ascii:backslashreplace"}
    args = ["kernels", str(tmp_path / "caf\u00e9.sqlite")]
    done = forked_cli.run(args, env=env)
    assert b"caf\\xe9.sqlite" in done.stderr
    same(done, fresh(args, env=env))


def test_the_child_runs_in_the_callers_folder_and_may_lose_it(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    done = forked_cli.run(["kernels", "in/trace.sqlite"], cwd=gone, remove_cwd=True, text=True)
    assert done.returncode == 2 and "no longer exists (deleted)" in done.stderr
    assert not gone.exists()
    here = forked_cli.run(["kernels", MOCK.name], cwd=MOCK.parent, text=True)
    assert here.returncode == 0, here.stderr
    assert REPO.exists()


def test_a_run_past_its_time_is_killed_and_the_next_one_runs(tmp_path):
    """As subprocess.run's timeout: TimeoutExpired, the child killed; the zygote serves the next
    request (its messages about the killed child read, none left for the next)."""
    with pytest.raises(subprocess.TimeoutExpired):
        forked_cli.run(
            ["capture", "--backend", "none", "--out", str(tmp_path / "cap"), "--", "sleep", "60"],
            timeout=3,
        )
    after = forked_cli.run(["kernels", str(MOCK)], text=True)
    assert after.returncode == 0 and "kernel" in after.stdout.lower()
