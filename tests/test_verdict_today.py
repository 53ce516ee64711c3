"""One verdict, today first (issue 42, items 1 and 6): the verdict's first sentence answers
"speculate or not today, and with which k", and agrees with today's draft-count curve; what the
plan's fixes change comes after, on its own line. Its words are honest: a given number is
"given", an accept length of 1 cannot pay, a trace with no speculative steps gets no verdict on
speculating, and a --hardware other than the trace's GPU is named beside it."""

from __future__ import annotations

import re

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES, public_traces

from verifyprof import pipeline
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.decision.whatif import WhatifOptions

BUNDLED = sorted(  # every bundled folder that holds a trace
    p.name
    for p in OWN_TRACES.iterdir()
    if p.is_dir() and any(p.glob("*.sqlite*")) | any(p.glob("*.json.gz"))
)
PUBLIC = [*public_traces("nsys"), *public_traces("kineto")]
MOE_GRID = [  # synthetic MoE situations: the bundled MoE traces at given acceptance and drafts
    (trace, accept, draft)
    for trace in ("workload-moe-graph", "workload-moe-eager")
    for accept in (1.3, 1.5, 2.0, 2.8)
    for draft in (None, 1.0, 3.0, 8.0)
]


def ranked(source, **options) -> dict:
    return pipeline.whatif(WhatifOptions(source=str(source), **options)).to_json()


def assert_agrees(data: dict) -> None:
    """The first sentence and today's draft-count curve say the same thing."""
    decision = data["verdict_parts"]["decision"]
    curve, plain = data["draft_curve"], data["plain_decoding"]
    if "depends on how the program runs plain decoding" in decision:
        return  # no answer without the unmeasured rate: the verdict says to measure it
    lead = decision.split(". ")[0]
    assert not lead.startswith(("Speculation pays today, not", "Turn speculation off today;"))
    if curve is None or not any(p["num_draft"] == 0 for p in curve["points"]):
        return
    best, ks = curve["best_num_draft"], curve["best_num_draft_set"]
    clear = best > 0 and 0 not in ks  # some k beats plain decoding by more than the band
    if clear:
        said = re.match(r"Speculate today, with (today's )?k=(\d+)", lead)
        assert said, lead
        assert int(said.group(2)) in ks
        if plain["speculation_loses"]:
            assert f"today's k={curve['current_num_draft']} loses to plain decoding" in lead
    else:
        assert not lead.startswith("Speculate today, with"), lead
    if lead.startswith("Turn speculation off"):
        assert not clear
    if plain["tokens_per_s"] > data["current"]["tokens_per_s"] and not clear:
        assert lead.startswith("Turn speculation off today"), lead


@pytest.mark.parametrize("trace", BUNDLED)
def test_the_first_line_agrees_with_todays_draft_count_curve_on_every_bundled_trace(trace):
    try:
        data = ranked(OWN_TRACES / trace)
    except VerifyprofError as err:  # no step ranges: the whole trace, with no verdict on it
        assert "no range is a step" in str(err)
        data = ranked(OWN_TRACES / trace, whole_trace=True, accept_len=2.0)
        assert data["verdict_parts"]["decision"].startswith("No speculative steps found")
    assert_agrees(data)


@pytest.mark.parametrize(("trace", "accept", "draft"), MOE_GRID)
def test_the_first_line_agrees_with_todays_draft_count_curve_on_moe_cases(trace, accept, draft):
    assert_agrees(ranked(OWN_TRACES / trace, accept_len=accept, draft_ms=draft))


def test_a_smaller_k_that_wins_is_the_answer_where_todays_k_loses():
    data = ranked(OWN_TRACES / "workload-moe-graph", accept_len=1.5, draft_ms=3.0)
    assert data["plain_decoding"]["speculation_loses"]  # today's k = 3 loses
    assert data["draft_curve"]["best_num_draft"] == 1
    decision = data["verdict_parts"]["decision"]
    assert decision.startswith("Speculate today, with k=1 (")
    assert "today's k=3 loses to plain decoding" in decision.split(". ")[0]
    assert data["plan"][0]["name"] != "no_speculation"  # the plan does not lead with turning off


def test_what_the_plan_changes_is_a_line_of_its_own_after_todays_answer():
    shown = verifyprof("whatif", str(OWN_TRACES / "workload-moe-eager"), env={"COLUMNS": "80"})
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("Verdict: Speculate today, with today's k=3")
    after = [i for i, line in enumerate(lines) if line.startswith("With the plan's fixes, plain")]
    assert after and after[0] > 0
    assert not any("With the plan's fixes" in line for line in lines[: after[0]])


@pytest.mark.parametrize("trace", PUBLIC, ids=lambda p: p.name)
def test_a_public_trace_without_speculative_steps_gets_no_verdict_on_speculating(trace):
    decode = "decode" in trace.name  # SGLang's decode steps: one token each
    step = {"step": "step[DECODE]", "accept_len": 1.0} if decode else {"whole_trace": True}
    data = ranked(trace, **({"accept_len": 2.0} | step))
    decision = data["verdict_parts"]["decision"]
    assert decision.startswith("No speculative steps found")
    assert "Speculat" not in data["verdict"].replace("No speculative", "")
    assert data["plain_decoding"] is None and data["draft_curve"] is None
    assert "no_speculation" not in {step["name"] for step in data["plan"]}


def test_an_accept_length_of_one_cannot_pay():
    data = ranked(OWN_TRACES / "workload-moe-graph", accept_len=1.0)
    decision = data["verdict_parts"]["decision"]
    assert decision.startswith("Turn speculation off today: at accept length 1.00 speculation")
    assert "Speculation pays" not in data["verdict"]
    assert "speculation wins" not in data["verdict"]
    assert data["plan"][0]["name"] == "no_speculation"
    assert data["draft_curve"]["best_num_draft"] == 0  # no k is the best at accept length 1
    rows = [row for c in data["load_curve"]["contexts"] for row in c["rows"]]
    assert rows and all(row["best_num_draft"] == 0 for row in rows)


@pytest.mark.parametrize(
    ("options", "word"),
    [((), "accept length 1.93,"), (("--accept-len", "2.0"), "accept length 2.00 given,")],
)
def test_an_accept_length_the_user_gave_is_given_not_measured(options, word):
    shown = verifyprof("whatif", str(OWN_TRACES / "workload-moe-graph"), *options)
    today = " ".join(shown.stdout.split())
    assert word in today


@pytest.mark.parametrize(("hardware", "cautions"), [(None, 0), ("h200", 0), ("h100", 1)])
def test_a_hardware_other_than_the_traces_gpu_is_one_caution_naming_both(hardware, cautions):
    data = ranked(OWN_TRACES / "workload-moe-graph", hardware=hardware)
    shown = data["verdict_parts"]["cautions"]
    assert len(shown) == cautions
    if cautions:
        assert "--hardware h100 (H100" in shown[0] and "NVIDIA H200" in shown[0]
        screen = verifyprof("whatif", str(OWN_TRACES / "workload-moe-graph"), "--hardware", "h100")
        assert screen.stdout.count("differs from the trace's GPU") == 1
