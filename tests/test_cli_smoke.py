"""The installed command as real processes: the console script and ``python -m verifyprof.cli``
exit with the codes users and scripts see, and print what the in-process runs of the other CLI
tests (tests/cli_helpers.py) print. Few on purpose: an interpreter start per test is slow."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from cli_helpers import REPO, console_script, verifyprof
from conftest import OWN_TRACES

BUNDLED = OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz"  # the README's first command
PLAIN = ("whatif", "--verify-ms", "15", "--accept-len", "2.0", "--baseline-tps", "82", "--json")


def test_console_script_breaks_down_the_bundled_trace_with_exit_0():
    done = console_script("breakdown", str(BUNDLED))
    assert done.returncode == 0, done.stderr
    assert (
        "verifyprof.verify [bs=1 tokens=4 graph=0]" in done.stdout and "launch_gap" in done.stdout
    )


def test_console_script_bad_input_is_one_line_exit_2_without_traceback():
    done = console_script("breakdown", str(BUNDLED), "--range", "TARGET_VERIFY_NOT_HERE")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("verifyprof: error: ")
        and "trace.sqlite.gz" in lines[0]
    )
    assert "Traceback" not in done.stderr


def test_console_script_missing_hook_target_exits_1():
    done = console_script("hooks", "json:no_such_function=verify", "--json")
    assert done.returncode == 1
    (status,) = json.loads(done.stdout)
    assert status["state"] == "missing"


def test_python_m_verifyprof_cli_prints_what_the_in_process_run_prints():
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", *PLAIN],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    in_process = verifyprof(*PLAIN)
    assert in_process.returncode == 0 and json.loads(done.stdout) == json.loads(in_process.stdout)
    assert round(json.loads(done.stdout)["current"]["tokens_per_s"], 1) == 133.3


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["table", "json"])
def test_a_closed_pipe_stops_quietly_with_141_for_tables_and_json_alike(output):
    """``verifyprof breakdown T | head -0``: the reader is gone before the first write; no error
    line, and the exit code other Unix tools give (128 + SIGPIPE), whatever the output format."""
    script = Path(sysconfig.get_path("scripts")) / "verifyprof"
    command = [str(script), "breakdown", str(BUNDLED), "--all", *output]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    ) as proc:
        proc.stdout.close()  # the reader went away: every write fails
        stderr = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    assert code == 141 and stderr == ""
