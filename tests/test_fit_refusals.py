"""A measured fit that cannot be made (a number that is not finite) costs what rests on it and
nothing else, by one rule for one capture and several: the load curve is left out with one line
naming the capture and what is wrong with its number (infinite, or not a number), the rest of
the answer is printed, exit 0, in the console, ``--json`` and the report. On the real H200
captures of ``bench/results/load_h200`` (C2 batch 1, C3 batch 8, k = 4) and
``bench/results/load_mha_h200`` (C1 k = 4, C1k1 k = 1, both batch 1): a copy of C3 whose
program's command line says ``--context inf`` (or ``nan``) is one a fit cannot use; the other
numbers are made not finite in the real captures' states, in process."""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof.model.cycle.phase_fit import UnusableFit
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.model.fixes.measured import Capture, measured_from
from verifyprof.pipeline import open_run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "results" / "load_h200"
C2, C3 = RUNS / "C2", RUNS / "C3"
MODEL = ROOT / "bench" / "models" / "hf-chain-7b.toml"
# hf_chain.py's default context, which C2 and C3 do not record: stated, as a user states it
STATED = ("--capture-context", "256")
MHA = ROOT / "bench" / "results" / "load_mha_h200"
MHA_MODEL = ROOT / "bench" / "models" / "hf-chain-7b-mha.toml"
WORDS = {"inf": "infinite", "nan": "not a number"}


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> dict[str, Path]:
    """Copies of C3 whose program ran, its command line says, at context inf and nan."""
    out = {}
    for value in WORDS:
        folder = tmp_path_factory.mktemp(f"context-{value}") / "C3x"
        shutil.copytree(C3, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["command"]["target"] += ["--context", value]
        (folder / "manifest.json").write_text(json.dumps(manifest))
        out[value] = folder
    return out


def whatif_json(*captures: Path) -> dict:
    proc = verifyprof("whatif", *map(str, captures), "--model", str(MODEL), *STATED, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_an_unusable_fit_over_several_captures_costs_the_load_curve_and_nothing_else(broken):
    got, whole = whatif_json(C2, broken["inf"]), whatif_json(C2, C3)
    assert got["load_curve"] is None and whole["load_curve"] is not None
    kept = set(whole) - {"load_curve", "current"}
    assert {k: got[k] for k in kept} == {k: whole[k] for k in kept}
    today = {k: v for k, v in whole["current"].items() if k != "notes"}
    assert {k: got["current"][k] for k in today} == today


@pytest.mark.parametrize("value", WORDS)
def test_the_console_names_the_capture_whose_number_made_no_fit_and_what_it_is(broken, value):
    shown = verifyprof("whatif", str(C2), str(broken[value]), "--model", str(MODEL), *STATED)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())  # as wrapped
    assert shown.stdout.startswith("Verdict: ")
    assert (
        f"Load: no load curve: no fit over batch and context: the step at batch 8 (C3x) has a"
        f" context that is {WORDS[value]} (context {value});"
    ) in text
    assert "the rest of the answer is from C2 alone: recapture C3x or leave it out" in text


def test_one_capture_and_several_leave_out_the_same_part_of_the_answer(broken):
    alone, first = whatif_json(broken["inf"]), whatif_json(broken["inf"], C2)
    assert alone["load_curve"] is None and first["load_curve"] is None
    said = alone.pop("load_curve_skipped"), first.pop("load_curve_skipped")
    assert alone == first
    assert said[0].startswith(f"no load curve: {broken['inf']}: no fit over batch and context:")
    assert "(C3x) has a context that is infinite" in said[1]
    for line in said:
        assert "the step at batch 8 (" in line


def test_the_report_of_several_captures_shows_the_page_and_why_the_load_curve_is_missing(
    broken, tmp_path
):
    page = tmp_path / "page.html"
    args = (str(C2), str(broken["nan"]), "--model", str(MODEL), *STATED, "-o", str(page), "--json")
    proc = verifyprof("report", *args)
    assert proc.returncode == 0, proc.stderr
    why = json.loads(proc.stdout)["whatif"]["load_curve_skipped"]
    assert "(C3x) has a context that is not a number (context nan)" in why
    shown = re.search(r'data-key="no-load">(.*?)</p>', page.read_text(), re.S)
    assert shown is not None and html.unescape(shown.group(1)) == why


@pytest.mark.parametrize("where", ["results", "command"])
def test_a_negative_context_is_refused_as_nan_is_not_taken_as_measured(tmp_path, where):
    """Before, a capture whose program reported (or ran with) context -512 made a measured point
    there and moved the load curve; NaN and infinity were already refused."""
    folder = tmp_path / "C3x"
    shutil.copytree(C3, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    if where == "results":
        manifest["results"]["context"] = -512
    else:
        manifest["command"]["target"] += ["--context", "-512"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    got = whatif_json(C2, folder)
    assert got["load_curve"] is None
    assert "(C3x) has a context that is negative (context -512)" in got["load_curve_skipped"]


@pytest.fixture(scope="module")
def captures() -> list[Capture]:
    """C2 and C3 as the measured model holds them (today's C2 first)."""
    o = WhatifOptions(model=str(MODEL), capture_contexts=((None, 256.0),))
    resolved = open_run([str(C2), str(C3)], o, captures=True).joined
    return resolved.prepared.scenario.measured.captures


def test_an_infinite_width_sweep_time_is_called_infinite_not_a_nan(captures):
    c2, c3 = captures
    sweep = {**c2.profile.width_times, 3: float("inf")}
    c2 = replace(c2, profile=replace(c2.profile, width_times=sweep))
    with pytest.raises(UnusableFit) as err:
        measured_from([c2, c3])
    assert str(err.value) == (
        "no fit over batch and context: the width sweep at batch 1 (C2) has a time that is"
        " infinite (width 3: inf ms)"
    )
    assert err.value.capture == "C2"


def _with_part(c: Capture, name: str, busy_ms: float) -> Capture:
    parts = tuple(replace(p, busy_ms=busy_ms) if p.name == name else p for p in c.scenario.parts)
    return replace(c, scenario=replace(c.scenario, parts=parts))


def test_a_part_time_that_is_not_a_number_makes_no_per_request_slope_rather_than_a_nan_one(
    captures,
):
    c2, c3 = captures
    assert [p.name for p in c3.scenario.parts if p.name == "accept"]
    with pytest.raises(UnusableFit) as err:
        measured_from([c2, _with_part(c3, "accept", float("nan"))])
    assert str(err.value) == (
        "no slope per request of the cycle's parts: C3 (batch 8) has a time that is not a number"
        " (accept nan ms)"
    )


def test_an_infinite_draft_time_makes_no_draft_count_line_rather_than_an_infinite_one():
    """C1 and C1k1 measured the draft at k = 4 and k = 1 at one load: the line through them
    scales the draft to other draft counts."""
    o = WhatifOptions(model=str(MHA_MODEL))
    resolved = open_run([str(MHA / "C1"), str(MHA / "C1k1")], o, captures=True).joined
    c1, c1k1 = resolved.prepared.scenario.measured.captures
    assert c1.key[:2] == c1k1.key[:2] and c1.num_draft != c1k1.num_draft
    with pytest.raises(UnusableFit) as err:
        measured_from([c1, _with_part(c1k1, "draft", float("inf"))])
    assert str(err.value).startswith(
        "no draft-count line: the draft of C1k1 (batch 1, k = 1) has a time that is infinite (inf"
    )
    assert err.value.capture == "C1k1"
