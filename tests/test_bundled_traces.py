"""A first try on the bundled inputs works, or the folder says why (issue 44): each folder under
``traces/`` works with the README's commands (``breakdown``, ``kernels``, ``whatif`` given the
folder), or ``traces/README.md`` has a line saying what it is for and naming a command that
reads it, and that command works. A trace without step ranges is broken down as the whole
trace, with a line saying so, as ``kernels`` lists it."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from cli_helpers import REPO, verifyprof

TRACES = REPO / "traces"
FOLDERS = sorted(p.name for p in TRACES.iterdir() if p.is_dir())
COMMANDS = ("breakdown", "kernels", "whatif")


def said_for() -> dict[str, str]:
    """traces/README.md's "What each folder is for": each bullet, its lines joined, by folder."""
    text = (TRACES / "README.md").read_text()
    section = text.split("## What each folder is for", 1)[1].split("\n## ", 1)[0]
    bullets = re.findall(r"^- `([\w.-]+)/`:(.*?)(?=^- |\Z)", section, re.M | re.S)
    return {name: " ".join(body.split()) for name, body in bullets}


SAID = said_for()


def failing(folder: str) -> list[str]:
    return [c for c in COMMANDS if verifyprof(c, str(TRACES / folder)).returncode != 0]


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_trace_folder_works_or_its_readme_line_says_what_reads_it(folder):
    fails = failing(folder)
    if not fails:
        assert folder not in SAID  # listed as an exception only while it is one
        return
    assert folder in SAID, f"{folder} fails {fails} and traces/README.md does not say why"
    readers = re.findall(r"`(verifyprof [^`]+)`", SAID[folder])
    assert readers, SAID[folder]
    for command in readers:
        args = [str(REPO / a) if a.startswith("traces/") else a for a in shlex.split(command)[1:]]
        ran = verifyprof(*args)
        assert ran.returncode == 0, (command, ran.stderr)


def test_the_readme_lists_only_folders_that_exist():
    assert SAID and sorted(set(SAID) - set(FOLDERS)) == []


@pytest.mark.parametrize(
    "trace",
    [
        "traces/torchrun-2ranks-one-gpu",
        "traces/two-processes-one-gpu",
        "tests/data/public/nsys/pipit_saxpy_mpi_a100_nsys2022.2.sqlite.gz",
    ],
)
def test_breakdown_without_step_ranges_is_the_whole_trace_and_says_so(trace):
    shown = verifyprof("breakdown", str(REPO / trace))
    assert shown.returncode == 0, shown.stderr
    assert "steps: one per device spanning the whole trace (no range is a step" in " ".join(
        shown.stdout.split()
    )
    data = json.loads(verifyprof("breakdown", str(REPO / trace), "--json").stdout)
    assert data["options"]["whole_trace"] is True
    assert data["options"]["whole_trace_because"] == "no range is a step"
    assert {s["name"] for s in data["steps"]} == {"whole_trace"}
    asked = verifyprof("breakdown", str(REPO / trace), "--range", "^no such range$")
    assert asked.returncode == 2 and "no range matches --range" in asked.stderr  # asked: refused
