"""A breakdown JSON read back (whatif --from, compare, report) keeps the rules a breakdown is made
with (issue 22): each step's phases sum to its wall (within 1 ns per phase), its end is not
before its start, its wall is not 0. A file that breaks one, edited or written by something else,
is one line naming the step and the field, exit 2, and nothing is written.

Real CLI runs on traces/capture-hf-assisted/breakdown.json, one step edited in a copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import verifyprof
from clirun import digest
from conftest import OWN_TRACES

from verifyprof.contracts import phases

BREAKDOWN = OWN_TRACES / "capture-hf-assisted" / "breakdown.json"
STEP = 3  # the edited step's position in "steps"


def edited(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(BREAKDOWN.read_text())
    edit(doc["steps"][STEP])
    path = tmp_path / "breakdown.json"
    path.write_text(json.dumps(doc))
    return path


def commands(path: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "whatif": ["whatif", "--from", str(path), "--accept-len", "2"],
        "compare": ["compare", str(BREAKDOWN), str(path)],
        "report": ["report", str(path), "-o", str(tmp_path / "report.html")],
    }


def zero_wall(step: dict) -> None:
    step["wall_ns"] = step["cost_ns"] = step["gpu_span_ns"] = 0
    step["phases"] = dict.fromkeys(step["phases"], 0)


def end_before_start(step: dict) -> None:
    step["end_ns"] = step["start_ns"] - 1


def phases_over_the_wall(step: dict) -> None:
    step["phases"]["attention"] += 1000


def problem(kind: str, step: dict) -> str:
    if kind == "zero wall":
        return "'wall_ns' is 0: a step's window has a length (every phase share divides by it)"
    if kind == "end before start":
        return f"'end_ns' {step['start_ns'] - 1} is before 'start_ns' {step['start_ns']}"
    return (
        f"'phases' sum to {step['wall_ns'] + 1000} ns, not its 'wall_ns' {step['wall_ns']} (the"
        " phases of a step sum to its wall, within 1 ns per phase)"
    )


EDITS = {
    "zero wall": zero_wall,
    "end before start": end_before_start,
    "phases over the wall": phases_over_the_wall,
}


@pytest.mark.parametrize("command", ["whatif", "compare", "report"])
@pytest.mark.parametrize("kind", EDITS)
def test_a_step_breaking_a_breakdown_rule_is_refused_naming_the_step(tmp_path, kind, command):
    path = edited(tmp_path, EDITS[kind])
    kept = digest(path)
    original = json.loads(BREAKDOWN.read_text())["steps"][STEP]
    done = verifyprof(*commands(path, tmp_path)[command])
    assert done.returncode == 2, (done.stdout[-500:], done.stderr)
    assert done.stderr.strip().splitlines() == [
        f"verifyprof: error: {path}: breakdown step {STEP}: {problem(kind, original)}"
    ]
    assert digest(path) == kept and not (tmp_path / "report.html").exists()


def test_phases_within_one_ns_per_phase_of_the_wall_are_read(tmp_path):
    """The attribution rounds each phase to whole nanoseconds once: that much is not an error."""

    def one_ns_each(step: dict) -> None:
        for name in phases.ALL:
            step["phases"][name] = step["phases"].get(name, 0) + 1

    done = verifyprof(*commands(edited(tmp_path, one_ns_each), tmp_path)["whatif"], "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["current"]["accept_len"] == 2.0
