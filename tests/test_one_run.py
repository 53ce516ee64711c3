"""One resolved run per command: each input is read once, and the modelled step group's profile
is made once, whatever the command prints (a real ``verifyprof`` process on a bundled capture,
its opens counted by an audit hook and its ``verify_profile`` calls by a counting wrapper)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "traces" / "capture-hf-assisted"

PROBE = r"""
import collections, json, sys
from pathlib import Path

folder, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
opened = collections.Counter()


def audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, Path)):
        path = Path(args[0]).absolute()
        if path.parent == folder:
            opened[path.name] += 1


sys.addaudithook(audit)
import verifyprof.model.inputs.profile as profile

made = []
real = profile.verify_profile


def counted(*args, **kw):
    made.append(kw.get("step_name"))
    return real(*args, **kw)


profile.verify_profile = counted  # before any module imports it by name
from verifyprof.cli import main

sys.argv = ["verifyprof", *sys.argv[3:]]
try:
    main()
except SystemExit as done:
    code = done.code
else:
    code = 0
out.write_text(json.dumps({"opened": opened, "profiles": len(made), "code": code}))
"""


def counts(tmp_path: Path, *command: str) -> dict:
    out = tmp_path / "counts.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(CAPTURE), str(out), *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.is_file(), done.stderr[-2000:]
    found = json.loads(out.read_text())
    assert found["code"] in (0, None), done.stderr[-2000:]
    return found


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
