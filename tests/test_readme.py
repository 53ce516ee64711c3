"""The README holds (issue 33): every command sample in it (a fenced block without a language
whose first line is a ``verifyprof`` command) is run, and every line it shows is in the command's
output, in order, at 100 columns; every repository path it names exists in a clone (none outside
it, such as ``../shared``)."""

from __future__ import annotations

import re
import shlex

import pytest
from cli_helpers import REPO, verifyprof

README = (REPO / "README.md").read_text()
SAMPLES = [
    block.split("\n", 1)
    for block in re.findall(r"^```\n(verifyprof .*?)\n```$", README, re.M | re.S)
]
PATH = re.compile(
    r"(?<![\w/.-])((?:\.\./[\w.-]+|traces|tests|bench|docs|verifyprof|reports|notebooks|scripts)"
    r"/[\w./+*-]*)"
)


def test_the_readme_has_command_samples():
    assert len(SAMPLES) >= 4


@pytest.mark.parametrize("command,shown", SAMPLES, ids=[c for c, _ in SAMPLES])
def test_each_readme_sample_is_what_the_command_prints(command, shown):
    ran = verifyprof(*shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert ran.returncode == 0, ran.stderr
    printed = iter((ran.stdout + ran.stderr).splitlines())
    for line in shown.splitlines():  # each shown line, in order (samples are condensed)
        assert any(out.rstrip() == line.rstrip() for out in printed), line


def test_every_path_the_readme_names_exists_in_a_clone():
    named = {m.rstrip(".,)") for m in PATH.findall(README)}
    concrete = {p for p in named if not re.search(r"[*<>]|[A-Z]{3,}", p)}
    assert len(concrete) > 10
    missing = sorted(p for p in concrete if p.startswith("../") or not (REPO / p).exists())
    assert missing == []
