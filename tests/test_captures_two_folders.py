"""Captures of one program taken by two ``capture --batches`` runs into two folders (B8 on an
H100: batch 1, 4 and 16 into one, batch 64 into another, each run handed its own copy of the
prompts file): the copies' paths differ, which no evidence can call a load, so the user says the
option names only an input (``--load-option --prompts=none``) and the captures join."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import verifyprof

ROOT = Path(__file__).resolve().parents[1]
B8 = ROOT / "bench" / "results" / "external_h100_b8" / "captures-b"
MODEL = ("--model", str(ROOT / "bench" / "models" / "gptfast-7b.toml"))
FOLDERS = (B8 / "batch-1", B8 / "batch-64")


def test_two_folders_whose_inputs_differ_only_in_path_are_refused_saying_none_declares_it():
    """B8's captures predate the inputs' fingerprints: nothing says the two files are one."""
    proc = verifyprof("whatif", *map(str, FOLDERS), *MODEL)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "batch-64 is not a capture of the same program as batch-1: --prompts" in line
    assert "whatif --load-option --prompts=AXIS" in line
    assert "none where it only names a path to one input" in line


def test_an_option_declared_none_joins_the_captures_without_making_it_a_load():
    proc = verifyprof(
        "whatif", *map(str, FOLDERS), *MODEL, "--load-option", "--prompts=none", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    notes = json.loads(proc.stdout)["load_curve"]["notes"]
    (joined,) = [n for n in notes if n.startswith("one model from 2 capture(s)")]
    assert "batch-1 (batch 1," in joined and "batch-64 (batch 64," in joined
    assert "--prompts" not in " ".join(notes)


@pytest.mark.parametrize("axis", ["nothing", ""])
def test_a_declaration_names_one_of_the_axes_or_none(axis):
    proc = verifyprof("whatif", *map(str, FOLDERS), "--load-option", f"--prompts={axis}")
    assert proc.returncode == 2
    assert "AXIS one of batch, num_draft, context, none" in proc.stderr


def test_none_on_an_option_known_to_set_a_load_is_refused():
    proc = verifyprof("whatif", *map(str, FOLDERS), "--load-option", "--batch=none")
    assert proc.returncode == 2
    assert "--load-option --batch=none: --batch sets the batch" in proc.stderr


def test_an_option_declared_twice_is_refused():
    twice = ("--load-option", "--prompts=none", "--load-option", "--prompts=batch")
    proc = verifyprof("whatif", *map(str, FOLDERS), *twice)
    assert proc.returncode == 2
    assert "--load-option: --prompts given twice" in proc.stderr
