"""The MoE GEMM over tokens per forward follows the experts it reads, fitted to the captures
(issue 42, item 3). Synthetic pairs of captures come from the real H200 capture of the project's
MoE workload (``traces/workload-moe-graph``: 64 experts, top-4, batch 1, width 4): a second
capture at batch 8 is that capture with its MoE GEMM grown as routing with a known share rho
would grow it (and its attention grown with the KV it reads), its width sweep left out so that
the draft-count curve rests on the model, as it does for a program that sweeps no widths."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from verifyprof.model.cycle.batch_cost import Shape
from verifyprof.model.cycle.expert_union import UNPINNED_BAND, fit_union, touched
from verifyprof.model.decision.load_defaults import curve_notes
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.model.fixes.base import edited
from verifyprof.model.fixes.draft import at_drafts
from verifyprof.model.fixes.measured import Capture, measured_from
from verifyprof.model.inputs.model_config import model_from_workload
from verifyprof.pipeline import open_run
from verifyprof.pipeline.data_files import load_hardware

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "workload-moe-graph"
E, K = 64, 4
CONTEXT = 512.0


@pytest.fixture(scope="module")
def today():
    """The real capture's state (batch 1, width 4) with the workload's model and hardware."""
    run = open_run([str(TRACE)], WhatifOptions(), captures=True)
    profile, s = run.prepared.profile, run.prepared.scenario
    config = json.loads((TRACE / "summary.json").read_text())["config"]["target"]
    model = model_from_workload(config, TRACE / "summary.json")
    assert model.moe is not None and (model.moe.experts, model.moe.top_k) == (E, K)
    profile = replace(profile, width_times={})  # a program that sweeps no widths
    s = replace(s, model=model, hardware=s.hardware or load_hardware("h200"), context=CONTEXT)
    return profile, s


def at_batch(profile, s, batch: int, rho: float):
    """The capture at ``batch`` as routing of share ``rho`` would measure it: the MoE GEMM by the
    experts touched, attention by the KV read, the rest as at batch 1."""
    v = profile.verify.phases_ms
    width = profile.width
    moe = v["gemm_moe"] * touched(batch * width, E, K, rho) / touched(width, E, K, rho)
    deltas = {"gemm_moe": moe - v["gemm_moe"], "attention": v["attention"] * (batch - 1) * 0.5}
    other = edited(profile, deltas)
    other.width, other.batch = profile.width, batch
    return other, replace(s, batch=batch)


def pair(today, rho: float):
    profile, s = today
    k = s.num_draft
    c8 = at_batch(profile, s, 8, rho)
    caps = [
        Capture("C1", profile, s, 1, CONTEXT, k),
        Capture("C8", c8[0], c8[1], 8, CONTEXT, k),
    ]
    return measured_from(caps), caps


@pytest.mark.parametrize("rho", [0.3, 0.62, 1.0])
def test_rho_is_recovered_from_a_pair_of_captures_made_with_it(today, rho):
    m, _ = pair(today, rho)
    u = m.moe_union(today[1].model)
    assert u.pinned and u.rho == pytest.approx(rho, abs=1e-6)
    assert [n for n, _ in u.points] == [4.0, 32.0]  # batch x width of each capture


def test_the_load_curve_moves_the_moe_gemm_by_the_fitted_union_between_and_past_the_captures(
    today,
):
    rho = 0.4
    m, caps = pair(today, rho)
    c1 = caps[0]
    v = c1.profile.verify.phases_ms["gemm_moe"]
    w = c1.profile.width
    for batch in (2, 4, 16, 64):
        deltas, _, _ = m.move(
            c1.profile, c1.scenario, Shape(1, w, CONTEXT), Shape(batch, w, CONTEXT)
        )
        want = v * touched(batch * w, E, K, rho) / touched(w, E, K, rho)
        assert v + deltas["gemm_moe"] == pytest.approx(want, rel=1e-9), batch


def test_the_draft_count_curve_moves_the_moe_gemm_by_the_fitted_union(today):
    rho = 0.4
    m, caps = pair(today, rho)
    c8 = caps[1]
    k = c8.num_draft
    for k2 in (1, 2, 5):
        after, _, notes = at_drafts(c8.profile, c8.scenario, k, k2, 1.5)
        v = c8.profile.verify.phases_ms["gemm_moe"]
        want = v * touched(8 * (k2 + 1), E, K, rho) / touched(8 * (k + 1), E, K, rho)
        assert after.verify.phases_ms["gemm_moe"] == pytest.approx(want, rel=1e-9), k2
        assert any("rho 0.40 fitted" in n for n in notes)


def test_a_growth_the_union_cannot_give_falls_back_to_independent_routing_with_a_wider_band(
    today,
):
    profile, s = today
    m, caps = pair(today, 1.0)
    c8 = caps[1]
    grown = edited(c8.profile, {"gemm_moe": c8.profile.verify.phases_ms["gemm_moe"] * 4})
    grown.width, grown.batch = c8.profile.width, 8
    wide = measured_from([caps[0], replace(caps[1], profile=grown)])
    u = wide.moe_union(s.model)
    assert not u.pinned and u.rho == 1.0 and "not the experts read" in u.why
    frm, to = Shape(1, profile.width, CONTEXT), Shape(4, profile.width, CONTEXT)
    _, _, band = wide.move(profile, wide.captures[0].scenario, frm, to)
    _, _, pinned_band = m.move(profile, m.captures[0].scenario, frm, to)
    assert band == pytest.approx(pinned_band + UNPINNED_BAND)


def test_one_capture_keeps_the_model_files_union_and_says_so(today):
    profile, s = today
    one = measured_from([Capture("C1", profile, s, 1, CONTEXT, s.num_draft)])
    assert one.moe_union(s.model) is None
    words = " ".join(one.union_notes(s.model))
    assert "independent routing (roofline; one token count captured)" in words


def test_the_details_show_the_measured_growth_and_both_unions(today):
    m, caps = pair(today, 0.62)
    s = replace(caps[0].scenario, measured=m)
    notes = curve_notes(s, m.slopes, None)
    growth = next(n for n in notes if n.startswith("MoE expert GEMM measured"))
    assert "at 4, " in growth and "at 32 tokens per forward" in growth and "us a token" in growth
    at_top = f"{touched(32, E, K, 0.62):.1f} fitted (rho 0.62) vs {touched(32, E, K):.1f}"
    assert any(f"experts touched per layer at 32 tokens (E=64, K=4): {at_top}" in n for n in notes)


# Published anchors: checks of the form, not fitted data.


def test_vllm_mlx_763_a_30b_a3b_verify_over_width_fits_a_share_below_independent_routing():
    # 8.47 ms at width 1, 28.13 ms at width 8; Qwen3-30B-A3B routes top-8 of 128 experts.
    # Taken as all MoE the share is 0.43: a lower bound (the verify's fixed parts grow less).
    u = fit_union(128, 8, [(1, 8.47), (8, 28.13)])
    assert u.pinned and 0.40 < u.rho < 0.45
    assert u.touched(8) == pytest.approx(8 * 28.13 / 8.47, rel=1e-6)


def test_ik_llama_1630_a_two_token_forward_at_3x_is_past_what_any_union_gives():
    # GLM-4.5-Air (128 experts, top-8): 2 tokens read at most 1.94x one token's experts, so a
    # 3.05x forward is another kernel path; the fit says so and keeps independent routing.
    u = fit_union(128, 8, [(1, 1.0), (2, 3.05)])
    assert not u.pinned and u.rho == 1.0
    assert "3.05x" in u.why and "1.94x" in u.why


def test_cohere_31_percent_fewer_experts_is_a_share_of_069_at_saturation():
    # Cohere, as a secondary summary reports it: up to 31% fewer experts than independent routing
    many = 10_000
    assert touched(many, 64, 4, 0.69) / touched(many, 64, 4) == pytest.approx(0.69 + 0.31 * 4 / 64)


def test_the_json_load_curve_says_which_union_the_moe_gemm_moves_by():
    from cli_helpers import verifyprof

    proc = verifyprof("whatif", str(TRACE), "--json")
    union = json.loads(proc.stdout)["load_curve"]["moe_union"]
    assert union["used"] is False and union["pinned"] is False  # one capture: the roofline's
    assert (union["experts"], union["top_k"], union["points"][0]["tokens"]) == (E, K, 4.0)
    dense = verifyprof("whatif", str(ROOT / "traces" / "workload-dense-graph"), "--json")
    assert "moe_union" not in json.loads(dense.stdout)["load_curve"]  # dense: no key
