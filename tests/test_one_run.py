"""One resolved run per command: each input is read once, and the modelled step group's profile
is made once, whatever the command prints (a real ``verifyprof`` process on a bundled capture,
its opens counted by an audit hook and its ``verify_profile`` calls by a counting wrapper)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from open_counts import counted_run

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "traces" / "capture-hf-assisted"


def counts(tmp_path: Path, *command: str) -> dict:
    """The capture's opens by file name, and the profiles made (:mod:`open_counts`)."""
    found = counted_run([CAPTURE], tmp_path / "counts.json", *command)
    prefix = f"{CAPTURE.name}/"
    return found | {"opened": {k.removeprefix(prefix): n for k, n in found["opened"].items()}}


COMMANDS = {
    "breakdown": ("breakdown", str(CAPTURE)),
    "whatif": ("whatif", str(CAPTURE), "--json"),
    "kernels": ("kernels", str(CAPTURE), "--json"),
    "report": ("report", str(CAPTURE), "--json"),
}


@pytest.fixture(scope="module", params=sorted(COMMANDS))
def counted(request, tmp_path_factory) -> dict:
    """One real run of a command, its opens and profiles counted (read by the tests below)."""
    return counts(tmp_path_factory.mktemp(request.param), *COMMANDS[request.param])


def test_a_command_opens_the_manifest_and_the_trace_once(counted):
    assert counted["opened"].get("manifest.json") == 1
    assert counted["opened"].get("capture.sqlite.gz") == 1


def test_a_command_makes_the_verify_groups_profile_once(counted):
    assert counted["profiles"] == 1


def test_compare_of_two_open_runs_says_what_compare_of_their_inputs_says():
    from verifyprof import pipeline

    eager, graph = (
        ROOT / "traces" / "workload-dense-eager",
        ROOT / "traces" / "workload-dense-graph",
    )
    runs = [pipeline.open_run(p, keep_trace=True) for p in (eager, graph)]
    assert pipeline.compare(*runs).to_json() == pipeline.compare(eager, graph).to_json()


def test_kernels_of_a_run_are_what_the_kernels_command_prints(tmp_path):
    from verifyprof import pipeline

    printed = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "kernels", str(CAPTURE), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    table = pipeline.kernels(CAPTURE)
    shown = json.loads(printed.stdout)
    assert shown["scope"] == table.scope and shown["step_count"] == table.steps
