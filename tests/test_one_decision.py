"""One decision (issue 33): the verdict, the plan, the draft-count curve and the load curve come
from one state. Where plain decoding wins after the plan, the plan ends by turning speculation
off and the load curve and the server settings agree; no speculative fix is called first while
it leaves the rate below plain decoding's."""

from __future__ import annotations

import pytest
from conftest import OWN_TRACES

from verifyprof import pipeline
from verifyprof.model.decision.whatif import WhatifOptions


def ranked(name: str, **options) -> dict:
    return pipeline.whatif(WhatifOptions(source=str(OWN_TRACES / name), **options)).to_json()


def test_speculating_today_but_not_after_the_plan_ends_the_plan_by_turning_it_off():
    data = ranked("workload-dense-eager")
    plain, plan = data["plain_decoding"], data["plan"]
    assert not plain["speculation_loses"]  # speculating wins today
    assert plan[-1]["name"] == "no_speculation"
    assert plan[-1]["tokens_per_s"] == pytest.approx(plain["tokens_per_s_along_plan"][-1])
    assert plan[-1]["tokens_per_s"] > plan[-2]["tokens_per_s"]  # plain decoding wins after it
    assert "then speculation off" in data["verdict_parts"]["plan"]


def test_the_load_curve_is_todays_and_the_one_after_the_plan_a_key_of_its_own():
    data = ranked("workload-dense-eager")  # speculating wins today, plain decoding after the plan
    today, after = data["load_curve"], data["load_curve_after_plan"]
    assert not any("after the plan's fixes" in note for note in today["notes"])
    first = today["contexts"][0]["rows"][0]
    assert first["batch"] == 1 and first["best_num_draft"] == data["draft_curve"]["best_num_draft"]
    assert first["plain_tokens_per_s"] == pytest.approx(data["plain_decoding"]["tokens_per_s"])
    assert any("after the plan's fixes" in note for note in after["notes"])
    first = after["contexts"][0]["rows"][0]
    assert first["batch"] == 1 and first["best_num_draft"] == 0  # plain decoding, as the plan
    assert first["plain_tokens_per_s"] == pytest.approx(data["plan"][-1]["tokens_per_s"], rel=1e-6)


def test_plain_decoding_winning_today_and_after_turns_speculation_off_first():
    data = ranked("capture-hf-assisted")
    plain, plan = data["plain_decoding"], data["plan"]
    assert plain["speculation_loses"]
    assert plan[0]["name"] == "no_speculation"
    assert plan[0]["tokens_per_s"] == pytest.approx(plain["tokens_per_s"])
    speculative = {"fewer_draft_tokens", "more_draft_tokens", "cuda_graph_draft"}
    assert not speculative & {step["name"] for step in plan}  # fixes a decode step takes
    assert data["verdict_parts"]["plan"].startswith("First: turn speculation off")
    assert "First fix" not in data["verdict"]


def test_speculation_winning_throughout_keeps_its_own_plan():
    data = ranked("workload-dense-graph")
    assert data["verdict_parts"]["decision"].startswith("Speculate today, with today's k=3")
    assert "no_speculation" not in {step["name"] for step in data["plan"]}
    assert data["verdict_parts"]["plan"].startswith("First fix: ")
