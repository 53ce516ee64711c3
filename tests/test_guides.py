"""The guides for the next engineer (docs/guides/) name real files: every path a guide names in
backticks exists (a placeholder such as ``<name>`` stands for a new file: its folder exists)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))
NAMED = re.compile(r"`((?:verifyprof|tests|docs|bench)/[^`\s]*)`")


def named_paths(guide: Path) -> list[str]:
    return NAMED.findall(guide.read_text())


def test_there_is_a_guide_for_each_kind_of_change():
    names = {g.stem for g in GUIDES}
    assert {
        "add-a-phase-or-kernel-rule",
        "add-a-fix",
        "add-a-trace-format",
        "add-a-command",
        "add-a-hardware-or-model-file",
    } <= names


@pytest.mark.parametrize("guide", GUIDES, ids=lambda g: g.stem)
def test_every_file_a_guide_names_exists(guide):
    missing = []
    for named in named_paths(guide):
        path = ROOT / named
        if "<" in named:  # a new file: the folder it goes in
            path = ROOT / named.split("<")[0]
        if not path.exists():
            missing.append(named)
    assert missing == []


@pytest.mark.parametrize("guide", [g for g in GUIDES if g.stem != "README"], ids=lambda g: g.stem)
def test_every_guide_names_the_test_to_add(guide):
    assert any(p.startswith("tests/test_") for p in named_paths(guide))
