"""Options travel one way (issue 43): ``whatif`` builds one typed ``WhatifOptions`` keyword by
keyword, the pipeline resolves from it the accept length (``--accept-len`` > the manifest's > the
trace's) and today's batch (``--batch`` > the trace's ``bs=`` tag > 1) once, and the model takes
what the pipeline resolved, never reading the options for them again."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof import pipeline
from verifyprof.model.decision.whatif import prepare
from verifyprof.pipeline.model_files import given_for

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "traces" / "capture-workload-hooks"  # its manifest measured accept length 1.93333
UNTAGGED = ROOT / "traces" / "capture-workload-compile-hooks"  # its steps tag no batch (bs=)


def current(*args: str) -> dict:
    ran = verifyprof("whatif", *args, "--json")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)["current"]


def test_an_accept_length_given_on_the_command_line_reaches_the_model_as_given():
    today = current(str(CAPTURE), "--accept-len", "1.5")
    assert (today["accept_len"], today["accept_len_basis"]) == (1.5, "given")


def test_without_one_the_manifests_accept_length_reaches_the_model_as_measured():
    today = current(str(CAPTURE))
    assert today["accept_len"] == pytest.approx(1.93333, abs=1e-5)
    assert today["accept_len_basis"] == "measured"


def test_a_batch_given_on_the_command_line_reaches_the_model_as_todays_batch():
    today = current(str(UNTAGGED), "--accept-len", "2", "--batch", "4")
    assert today["batch"] == 4
    assert any("batch 4 as given (--batch)" in note for note in today["notes"])


def test_the_model_prepares_from_what_the_pipeline_resolved_not_from_the_options():
    """The accept length and batch the pipeline resolved are the model's; options that say
    otherwise when ``prepare`` is called change neither."""
    options = pipeline.WhatifOptions(accept_len=1.5, batch=4, source=str(UNTAGGED))
    run = pipeline.open_run([UNTAGGED], options)
    resolved = run.resolved
    given = given_for(resolved.frame, resolved.options, resolved.profile(), run.manifest_data)
    asked_again = replace(resolved.options, accept_len=None, batch=None)
    scenario = prepare(resolved.frame, asked_again, given).scenario
    assert (scenario.accept_len, scenario.accept_basis, scenario.batch) == (1.5, "given", 4)
