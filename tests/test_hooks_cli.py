"""`verifyprof hooks`: what a capture would wrap, checked in the user's own Python (the real entry,
`cli.main`, in-process; the console script's exit 1 for a missing target: tests/test_cli_smoke.py)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import Ran, verifyprof

from verifyprof.capture.hooks import api as hook_api


@pytest.fixture(autouse=True)
def no_hooks_before_or_after():
    """`hooks` installs what it checks and leaves it installed, as the command's own process ends
    right after; in-process each test starts and ends with none, like that fresh process."""
    hook_api.uninstall()
    yield
    hook_api.uninstall()


def run(*args: str) -> Ran:
    return verifyprof("hooks", *args)


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
