"""`verifyprof hooks`: what a capture would wrap, checked in the user's own Python."""

from __future__ import annotations

import json
import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verifyprof.cli", "hooks", *args], capture_output=True, text=True, timeout=120)


def test_workload_preset_targets_all_exist_in_this_checkout():
    done = run("workload", "--json")
    assert done.returncode == 0, done.stderr
    states = {s["target"]: s["state"] for s in json.loads(done.stdout)}
    assert states["verifyprof.workload.runner:Workload.verify"] == "patched"
    assert set(states.values()) == {"patched"}


def test_a_user_target_that_does_not_exist_is_reported_missing_with_exit_1():
    done = run("json:no_such_function=verify", "--json")
    assert done.returncode == 1
    (status,) = json.loads(done.stdout)
    assert status["state"] == "missing" and "no_such_function" in status["detail"]


def test_a_malformed_hook_spec_is_a_one_line_error():
    done = run("not-a-target=verify")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
