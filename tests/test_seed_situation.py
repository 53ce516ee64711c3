"""The seed's situation decided right (issue 26), on real traces: cycles counted per cycle with
the program's loop as a part, today's rate anchored to what was measured (a noisy dilation not
applied), plain decoding predicted in the mode the program runs single-token forwards, and the
verify over width a bounded monotone fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifyprof import pipeline
from verifyprof.contracts.schema import frame_from_json
from verifyprof.model.cycle.width_fit import fit_widths
from verifyprof.model.decision.candidates import rank_candidates
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.model.fixes.base import state_parts
from verifyprof.pipeline import prepared_of

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "traces/capture-hf-assisted"
SEED = ROOT / "bench/results/seed_h200"


def prepared(folder: Path, breakdown: dict | None = None):
    frame = (
        frame_from_json(breakdown)
        if breakdown is not None
        else pipeline.breakdown_frame(str(folder / "breakdown.json"))
    )
    return prepared_of(frame, WhatifOptions(manifest=folder / "manifest.json"))


@pytest.fixture(scope="module")
def hf_frame():
    return pipeline.breakdown_frame(str(HF / "capture.sqlite.gz"))


def test_drafts_are_counted_per_cycle_not_all_drafts_over_one_widths_verifies(hf_frame):
    prep = prepared_of(hf_frame, WhatifOptions(manifest=HF / "manifest.json"))
    steps = hf_frame.steps
    windows = steps[steps["name"] == "cycle_window"]
    verify = prep.profile.verify
    own = windows[windows["attrs"].map(lambda a: a.get("tokens")) == verify.attrs["tokens"]]
    assert len(own) == verify.steps  # one cycle window per modelled verify
    drafts_in_trace = (steps["name"] == "verifyprof.draft").sum()
    assert drafts_in_trace > verify.steps  # 12 drafts, 8 width-5 verifies
    assert prep.profile.cycle_ms == pytest.approx(own["wall_ns"].mean() / 1e6)
    drafts = steps[steps["name"] == "verifyprof.draft"]["cost_ns"]
    all_over_some = drafts.sum() / verify.steps / 1e6  # the old count: 82.3 ms a cycle
    assert prep.profile.draft_ms < 0.8 * all_over_some
    assert prep.profile.draft_ms <= drafts.max() / 1e6  # one draft a cycle


def test_the_programs_loop_between_hooked_ranges_is_a_part_with_its_syncs(hf_frame):
    prep = prepared_of(hf_frame, WhatifOptions(manifest=HF / "manifest.json"))
    loop = [p for p in state_parts(prep.profile, prep.scenario) if p.name == "loop"]
    assert len(loop) == 1 and loop[0].cost_ms > 1.0 and loop[0].syncs > 10
    assert any("loop outside the hooked ranges" in n for n in prep.scenario.notes)
    ranking = rank_candidates(prep.profile, prep.scenario)
    graphed = next(c for c in ranking.candidates if c.name == "cuda_graph_verify")
    kept = [p for p in state_parts(graphed.profile, graphed.scenario) if p.name == "loop"]
    assert kept == loop  # a graph does not remove host Python between phases


def test_a_user_range_named_for_its_phase_keeps_that_phase(hf_frame):
    """draft_propose is a draft (data/ranges.toml), as verifyprof.draft is."""
    data = json.loads(
        json.dumps(pipeline.breakdown(str(HF / "capture.sqlite.gz")).to_json(), default=int)
    )
    for step in data["steps"]:
        if step["name"] == "verifyprof.draft":
            step["name"] = "draft_propose"
    renamed = prepared_of(frame_from_json(data), WhatifOptions(manifest=HF / "manifest.json"))
    plain = prepared_of(hf_frame, WhatifOptions(manifest=HF / "manifest.json"))
    assert renamed.profile.draft_ms == pytest.approx(plain.profile.draft_ms)


def test_a_dilation_inside_the_baseline_runs_spread_is_noise_and_not_applied():
    prep = prepared(SEED / "C1")  # 91.2 / 61.7 / 66.3 tok/s unprofiled: 44% apart, 1.19x
    assert prep.dilation is None and prep.scenario.basis == "traced run"
    assert any("is noise, not applied" in n for n in prep.scenario.notes)
    manifest = json.loads((SEED / "C1/manifest.json").read_text())
    rate = manifest["dilation"]["profiled_tokens_per_s"]
    assert rank_candidates(prep.profile, prep.scenario).current.tokens_per_s == pytest.approx(rate)


def test_today_reproduces_the_median_unprofiled_rate_when_the_dilation_holds():
    prep = prepared(SEED / "C2")  # 291.0 / 294.0 / 293.9 tok/s unprofiled: 1% apart, 1.14x
    manifest = json.loads((SEED / "C2/manifest.json").read_text())
    assert prep.scenario.basis == "unprofiled"
    today = rank_candidates(prep.profile, prep.scenario).current.tokens_per_s
    assert today == pytest.approx(manifest["dilation"]["unprofiled_tokens_per_s"], rel=0.05)


def test_plain_decoding_is_predicted_graphed_where_the_drafter_replays_graphs():
    ranking = rank_candidates(*(lambda p: (p.profile, p.scenario))(prepared(SEED / "C1")))
    plain = ranking.plain
    assert not plain.measured and plain.mode == "graph" and plain.mode_evidenced
    assert plain.alternative[0] == "eager" and plain.alternative[1] < plain.tokens_per_s
    assert ranking.verdict.decision.startswith("Turn speculation off")
    assert "run eager, plain decoding would make" in ranking.verdict.decision


def test_the_width_model_is_monotone_and_at_most_proportional_on_a_real_sweep():
    prep = prepared(SEED / "C1")  # the eager verify's sweep: 64.2, 63.0, 60.1, 65.9, 56.7, 60.0
    fit = fit_widths(prep.profile.width_times)
    values = [fit.at(w)[0] for w in range(1, 12)]
    assert all(b >= a - 1e-9 for a, b in zip(values, values[1:]))
    assert all(values[i] / (i + 1) >= values[i + 1] / (i + 2) - 1e-9 for i in range(10))
    assert fit.at(4)[1] == "fitted" and fit.at(11)[1] == "extrapolated"
