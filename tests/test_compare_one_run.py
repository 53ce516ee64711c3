"""``compare BEFORE AFTER`` is two resolved runs: each input read once (its manifest, its trace),
each side's verify group profiled once, whatever the comparison and its prediction check print;
``report --compare`` says what ``compare`` says, from the same reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import verifyprof
from open_counts import counted_run

ROOT = Path(__file__).resolve().parents[1]
BEFORE = ROOT / "traces" / "capture-workload-hooks"  # capture folders: manifest.json + trace
AFTER = ROOT / "traces" / "capture-workload-compile-hooks"
COMMANDS = {
    "compare": ("compare", str(BEFORE), str(AFTER), "--json"),
    "report": ("report", str(BEFORE), "--compare", str(AFTER), "--json"),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A cache holding both traces' decompressed exports, so that a command's count is its own
    reads, not the first decompression."""
    cache = tmp_path_factory.mktemp("cache")
    out = tmp_path_factory.mktemp("warm") / "counts.json"
    counted_run([BEFORE, AFTER], out, "compare", str(BEFORE), str(AFTER), "--json", cache=cache)
    return cache


@pytest.fixture(scope="module", params=sorted(COMMANDS))
def counted(request, cache, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp(request.param) / "counts.json"
    return counted_run([BEFORE, AFTER], out, *COMMANDS[request.param], cache=cache)


def test_each_sides_manifest_is_opened_once(counted):
    opened = counted["opened"]
    assert opened.get(f"{BEFORE.name}/manifest.json") == 1
    assert opened.get(f"{AFTER.name}/manifest.json") == 1


def test_each_sides_trace_is_opened_once(counted):
    opened = counted["opened"]
    assert opened.get(f"{BEFORE.name}/capture.sqlite.gz") == 1
    assert opened.get(f"{AFTER.name}/capture.sqlite.gz") == 1


def test_each_sides_verify_group_is_profiled_once(counted):
    assert counted["profiles"] == 2


def test_the_reports_comparison_is_what_compare_prints():
    compared = verifyprof("compare", str(BEFORE), str(AFTER), "--json")
    reported = verifyprof("report", str(BEFORE), "--compare", str(AFTER), "--json")
    assert compared.returncode == reported.returncode == 0, reported.stderr
    assert json.loads(reported.stdout)["compare"] == json.loads(compared.stdout)


def test_compare_of_two_open_capture_runs_is_what_compare_of_the_folders_says():
    from verifyprof import pipeline

    runs = [pipeline.open_run(p, keep_trace=True) for p in (BEFORE, AFTER)]
    compared = pipeline.compare(*runs).to_json()
    assert compared == pipeline.compare(BEFORE, AFTER).to_json()
    assert compared["predictions"] or compared["prediction_note"]  # BEFORE's manifest was read


def test_a_runs_compare_is_what_the_compare_command_prints():
    from verifyprof import pipeline

    before, after = (pipeline.open_run(p, keep_trace=True) for p in (BEFORE, AFTER))
    printed = verifyprof("compare", str(BEFORE), str(AFTER), "--json")
    assert printed.returncode == 0, printed.stderr
    compared = json.loads(json.dumps(before.compare(after).to_json()))
    assert compared == json.loads(printed.stdout) and compared["verdict_line"]
