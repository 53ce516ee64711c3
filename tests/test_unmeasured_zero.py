"""No answer from an unmeasured zero (issue 33): plain decoding from plain numbers is the
given rate or the model's roofline, never the verify's own time, and the verdict hedges where
the answer flips with it; the context is never 0; a best draft count at the edge of the range or
resting on drafts priced at 0 says so; ``--mode compile`` keeps the compiled run's drafts; table
names that would print alike keep what differs."""

from __future__ import annotations

import json

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES

from verifyprof import pipeline
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.report.layout import distinct, fit_label

# the seed's numbers: Kimi-K2 on 8 H200s over PCIe Gen5; it measured plain decoding at 12.2 ms
SEED = ["--verify-ms", "30", "--accept-len", "2", "--num-draft", "3", "--model", "kimi-k2"]
SEED += ["--hardware", "h200", "--tp", "8", "--link", "pcie_gen5"]


def whatif_json(*args: str) -> dict:
    ran = verifyprof("whatif", *args, "--json")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_plain_numbers_never_take_plain_decoding_from_the_verifys_own_time():
    data = whatif_json(*SEED)
    plain = data["plain_decoding"]
    verify_at_width_1 = 1e3 / 28.282  # what it used to say: the verify at width 1, 35.4 tok/s
    assert plain["tokens_per_s"] > 3 * verify_at_width_1
    assert "roofline" in plain["source"] and plain["measured"] is False
    assert any("roofline floor" in a for a in data["basis"]["assumed"])


def test_where_the_unmeasured_plain_rate_flips_the_answer_the_verdict_names_the_option():
    decision = whatif_json(*SEED)["verdict_parts"]["decision"]
    assert decision.startswith("Speculate or not depends on plain decoding's step")
    assert "--decode-ms" in decision and "--baseline-tps" in decision


def test_the_measured_plain_step_decides_as_the_seed_did():
    data = whatif_json(*SEED, "--decode-ms", "12.2")
    assert data["plain_decoding"]["tokens_per_s"] == pytest.approx(1e3 / 12.2)
    assert data["verdict_parts"]["decision"].startswith("Turn speculation off today")


def test_a_model_without_a_context_reads_a_stated_default_never_zero():
    data = whatif_json(*SEED[:2], "--draft-ms", "3", *SEED[2:], "--decode-ms", "12.2")
    contexts = [c["context"] for c in data["load_curve"]["contexts"]]
    assert 0 not in contexts and contexts[0] == 2048
    assert any("stated default" in a for a in data["basis"]["assumed"])


def test_a_best_k_at_the_edge_on_free_drafts_says_both_and_prints_no_flags():
    ranking = pipeline.whatif(
        WhatifOptions(source=str(OWN_TRACES / "workload-dense-pipelined-graph"))
    )
    curve = ranking.to_json()["draft_curve"]
    assert curve["best_at_edge"] and not curve["draft_cost_known"]
    drafts = ranking.verdict.drafts
    assert "the largest tried" in drafts and "--draft-ms" in drafts and "SGLang" not in drafts
    shown = verifyprof("whatif", str(OWN_TRACES / "workload-dense-pipelined-graph")).stdout
    assert "drafts priced at 0" in shown and "is the largest tried" in shown


def test_mode_compile_models_the_compiled_run_with_its_draft_steps():
    compiled = whatif_json(str(OWN_TRACES / "workload-dense-compile"), "--mode", "compile")
    assert "compile=1" in compiled["verdict_parts"]["group"]
    assert compiled["current"]["draft_ms"] > 0  # its cycle's drafts, not dropped as a --range did
    graph = whatif_json(str(OWN_TRACES / "workload-dense-compile"), "--mode", "graph")
    assert any("--mode compile selects" in note for note in graph["current"]["notes"])


def test_names_that_would_print_alike_keep_what_differs():
    labels = ["verify [tokens=4 graph=1]", "verify [tokens=4 graph=1 compile=1]"]
    assert len({fit_label(label, 21) for label in labels}) == 1  # the plain cut: alike
    shown = distinct(labels, 21, fit_label)
    assert len(set(shown)) == 2 and all(len(s) <= 21 for s in shown)
    assert shown[1].startswith("verify [") and shown[1].endswith("compile=1]")


def test_breakdown_rows_stay_distinct_at_80_columns():
    ran = verifyprof("breakdown", str(OWN_TRACES / "workload-dense-compile"), env={"COLUMNS": "80"})
    lines = ran.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("step ")) + 2
    stop = next(i for i, line in enumerate(lines) if line.startswith("  attributes left out"))
    names = [line.split("  ")[0] for line in lines[start:stop]]
    assert len(names) == len(set(names)) >= 8
