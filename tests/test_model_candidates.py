"""Candidates predicted from real breakdowns: each changes only what its fix would change.

The public B200 vLLM trace (gpt-oss-120b MoE step, rank 0 of 8, eager, MXFP4 experts,
symmetric-memory allreduce) is a real eager step with a large launch gap, 73 allreduces and MoE
GEMMs. The speculative-loop accounting (draft / accept / draft-extend per cycle, decode baseline,
width sweep) runs on traces built with tests/tracebuilder.py through the real breakdown, until
the workload's H200 traces are committed under traces/.
"""

from __future__ import annotations

import pytest
from conftest import PUBLIC  # tests/data/public: copies of the shared public traces
from tracebuilder import TraceBuilder

from verifyprof.attribution.breakdown import breakdown
from verifyprof.contracts.ranges import (
    ACCEPT,
    DECODE,
    DRAFT,
    DRAFT_EXTEND,
    SPEC_STEP,
    VERIFY,
    range_text,
)
from verifyprof.contracts.schema import frame_from_json
from verifyprof.model.decision.candidates import Scenario, rank_candidates
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.model.fixes import registry
from verifyprof.model.inputs.acceptance import parse_survival
from verifyprof.model.inputs.profile import verify_profile
from verifyprof.pipeline import whatif
from verifyprof.pipeline.data_files import load_hardware, load_model_config
from verifyprof.trace import load_trace


def profile_of(data, **options):
    """The model's reduction of a breakdown JSON document, read back as the model reads it."""
    return verify_profile(frame_from_json(data), **options)


B200 = PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"
needs_b200 = pytest.mark.public_traces


@pytest.fixture(scope="module")
def b200_breakdown():
    return breakdown(load_trace(B200), whole_trace=True).to_json()


def b200_ranking(data, **scenario):
    profile = profile_of(data, width=888)
    defaults = dict(
        accept_len=2.5,
        num_draft=3,
        hardware=load_hardware("b200"),
        model=load_model_config("gpt-oss-120b"),
        tp=8,
    )
    return profile, rank_candidates(profile, Scenario(**(defaults | scenario)))


def by_name(ranking, name):
    return next(c for c in ranking.candidates if c.name == name)


@needs_b200
def test_cuda_graph_removes_the_measured_launch_gap_and_adds_graph_costs(b200_breakdown):
    profile, ranking = b200_ranking(b200_breakdown)
    v = profile.verify
    hw = load_hardware("b200").launch
    idle = v.phases_ms["launch_gap"] + v.phases_ms["host_wait"]
    assert v.wall_ms == v.gpu_span_ms  # a whole-trace step has no idle edges: all idle is interior
    expected = (
        v.wall_ms
        - idle
        + (hw.graph_launch_us - hw.kernel_launch_us + v.kernels * hw.graph_node_us) / 1e3
    )
    assert by_name(ranking, "cuda_graph_verify").cycle.verify_ms == pytest.approx(expected)
    assert (
        idle > 70
    )  # the step is host-bound: 72.9 of 84.5 ms with the GPU idle while the host issues work


@needs_b200
def test_candidates_are_ranked_by_predicted_tokens_per_second(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown)
    rates = [c.cycle.tokens_per_s for c in ranking.candidates]
    assert rates == sorted(rates, reverse=True)
    assert [c.name for c in ranking.candidates[:2]] == [
        "graph_fusion_verify",
        "cuda_graph_verify",
    ]  # graphs plus fusion beat graphs alone


@needs_b200
def test_every_candidate_lists_its_assumptions(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown)
    assert all(
        c.assumptions and all(isinstance(a, str) and a for a in c.assumptions)
        for c in ranking.candidates
    )


@needs_b200
def test_every_candidate_applies_or_says_why_not(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown)
    listed = {c.name for c in ranking.candidates} | {s["name"] for s in ranking.skipped}
    assert listed == set(registry.names())
    assert {s["name"]: s["reason"] for s in ranking.skipped}["kernel_floor:attention"].endswith(
        "give --context"
    )


@needs_b200
def test_custom_allreduce_replaces_measured_per_call_time_with_the_modelled_one(b200_breakdown):
    profile, ranking = b200_ranking(b200_breakdown)
    cand = by_name(ranking, "custom_allreduce")
    total = profile.verify.totals_ms["allreduce"]
    calls = 73  # 2 x 36 layers + embedding; the trace holds exactly 73 multimem allreduce kernels
    assert cand.details["measured_us"] == pytest.approx(total / calls * 1e3)
    predicted = total * (calls * cand.details["allreduce_us"] / 1e3) / total
    assert cand.cycle.verify_ms == pytest.approx(profile.verify.wall_ms - (total - predicted))


@needs_b200
def test_allreduce_fusion_also_removes_the_norms_and_one_launch_per_allreduce(b200_breakdown):
    profile, ranking = b200_ranking(b200_breakdown)
    custom, fused = by_name(ranking, "custom_allreduce"), by_name(ranking, "allreduce_fusion")
    per_launch = (
        profile.verify.phases_ms["launch_gap"] + profile.verify.phases_ms["host_wait"]
    ) / profile.verify.kernels
    removed = profile.verify.phases_ms["norm"] + 73 * per_launch
    assert custom.cycle.verify_ms - fused.cycle.verify_ms == pytest.approx(removed)


@needs_b200
def test_allreduce_fusion_is_not_offered_on_sm120(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown, hardware=load_hardware("rtx-pro-6000"))
    reasons = {s["name"]: s["reason"] for s in ranking.skipped}
    assert "unavailable on RTX PRO 6000" in reasons["allreduce_fusion"]


@needs_b200
def test_allreduce_candidates_need_the_tensor_parallel_size(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown, tp=1)
    assert "custom_allreduce" in {s["name"] for s in ranking.skipped}


@needs_b200
def test_kernel_floor_moe_is_routed_bytes_over_bandwidth(b200_breakdown):
    profile, ranking = b200_ranking(b200_breakdown)
    model = load_model_config("gpt-oss-120b")
    floor_ms = (
        model.routed_bytes(888, 8) / 8e12 * 1e3
    )  # every expert touched at 888 tokens, MXFP4, /8 ranks
    cand = by_name(ranking, "kernel_floor:gemm_moe")
    assert cand.details["floor_ms"] == pytest.approx(floor_ms, rel=0.01)
    assert cand.cycle.verify_ms == pytest.approx(
        profile.verify.wall_ms - profile.verify.phases_ms["gemm_moe"] + cand.details["floor_ms"]
    )


@needs_b200
def test_better_drafter_keeps_the_cycle_and_raises_the_accept_length(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown, drafter_gain=0.4)
    cand = by_name(ranking, "better_drafter")
    assert (
        cand.cycle.cycle_ms == ranking.current.cycle_ms
        and cand.cycle.accept_len == pytest.approx(2.9)
    )
    assert cand.gain == pytest.approx(0.4 / 2.5)


@needs_b200
def test_better_drafter_is_capped_at_all_drafts_accepted(b200_breakdown):
    _, ranking = b200_ranking(b200_breakdown, accept_len=3.9, drafter_gain=0.5)
    assert by_name(ranking, "better_drafter").cycle.accept_len == 4.0


# ---- the speculative loop, through the real breakdown on built traces ----------------------


def spec_loop_trace(cycles=3, eager_gap=40_000, verify_width=4, sweep=(2, 4, 8), decode=2):
    """Cycles of draft (3 kernels) / verify (8 kernels, gaps between them) / accept / extend,
    then decode steps and a width sweep; times in ns, one GPU."""
    b = TraceBuilder()
    t = 0

    def kernels(count, name, length, gap):
        nonlocal t
        for _ in range(count):
            corr = b.launch(t, t + 2_000)
            b.kernel(name, t + gap, t + gap + length, corr)
            t += gap + length

    for _ in range(cycles):
        start = t
        b.range(range_text(DRAFT, bs=1, tokens=verify_width - 1, graph=0), t, t + 3 * 60_000)
        kernels(3, "nvjet_tst_draft", 50_000, 10_000)
        v0 = t
        kernels(4, "nvjet_tst_verify", 100_000, eager_gap)
        kernels(4, "flash_fwd_kernel", 50_000, eager_gap)
        b.range(range_text(VERIFY, bs=1, tokens=verify_width, graph=0), v0, t)
        a0 = t
        kernels(1, "TopKTopPSamplingFromProbKernel", 20_000, 5_000)
        t += 30_000  # host sync reading the accept lengths
        b.range(range_text(ACCEPT, bs=1, tokens=verify_width), a0, t)
        e0 = t
        kernels(1, "nvjet_tst_extend", 40_000, 10_000)
        b.range(range_text(DRAFT_EXTEND, bs=1, tokens=verify_width, graph=0), e0, t)
        t += 20_000
        b.range(range_text(SPEC_STEP, bs=1, tokens=verify_width, graph=0), start, t)
    for _ in range(decode):
        d0 = t
        kernels(4, "nvjet_tst_decode", 90_000, 40_000)
        b.range(range_text(DECODE, bs=1, tokens=1, graph=0), d0, t)
    for width in sweep:
        s0 = t
        kernels(4, "nvjet_tst_verify", 100_000 + 1_000 * width, eager_gap)
        kernels(4, "flash_fwd_kernel", 50_000, eager_gap)
        b.range(range_text(VERIFY, bs=1, tokens=width, graph=0, sweep=1), s0, t)
        t += 50_000
    return b.build()


@pytest.fixture(scope="module")
def loop_breakdown():
    return breakdown(spec_loop_trace()).to_json()


def test_verify_profile_models_the_loop_steps_not_the_sweep(loop_breakdown):
    profile = profile_of(loop_breakdown)
    assert profile.verify.steps == 3 and profile.width == 4
    assert profile.verify.wall_ms == pytest.approx((4 * 140_000 + 4 * 90_000) / 1e6)


def test_draft_accept_and_extend_are_per_cycle_means(loop_breakdown):
    profile = profile_of(loop_breakdown)
    assert profile.draft_ms == pytest.approx(180_000 / 1e6)
    assert profile.accept_ms == pytest.approx(55_000 / 1e6)
    assert profile.draft_extend_ms == pytest.approx(50_000 / 1e6)
    assert profile.cycle_ms == pytest.approx((180_000 + 920_000 + 55_000 + 50_000 + 20_000) / 1e6)


def test_decode_baseline_comes_from_decode_ranges(loop_breakdown):
    assert profile_of(loop_breakdown).decode_ms == pytest.approx(4 * 130_000 / 1e6)


def test_sweep_widths_are_measured_t_of_n(loop_breakdown):
    widths = profile_of(loop_breakdown).width_times
    assert sorted(widths) == [2, 4, 8]
    assert widths[8] == pytest.approx((4 * (140_000 + 8_000) + 4 * 90_000) / 1e6)


def test_whatif_from_a_loop_breakdown_fills_the_cycle_from_the_trace(loop_breakdown, tmp_path):
    path = tmp_path / "b.json"
    import json

    path.write_text(json.dumps(loop_breakdown))
    ranking = whatif(WhatifOptions(source=str(path), accept_len=2.0))
    cur = ranking.current
    assert cur.draft_ms == pytest.approx(0.18)  # the draft steps: scales with the number of drafts
    assert cur.overhead_ms == pytest.approx(
        0.055 + 0.05 + 0.020
    )  # accept + draft_extend + the rest of spec_step
    assert cur.cycle_ms == pytest.approx(1.225)
    assert cur.decode_ms == pytest.approx(0.52)
    assert ranking.scenario.num_draft == 3


def test_cuda_graph_keeps_the_idle_before_the_first_kernel(loop_breakdown):
    profile = profile_of(loop_breakdown)
    ranking = rank_candidates(
        profile,
        Scenario(accept_len=2.0, hardware=load_hardware("h200")),
        only=["cuda_graph_verify"],
    )
    # verify: 8 kernels, each 40 us after its launch call; the first gap (range start -> first
    # kernel) is an edge
    busy = (4 * 100_000 + 4 * 50_000) / 1e6
    edge = 40_000 / 1e6
    added = (8.0 - 5.0 + 8 * 1.0) / 1e3
    assert ranking.candidates[0].cycle.verify_ms == pytest.approx(busy + edge + added)


def test_fewer_draft_tokens_adds_the_width_model_s_change_measured_or_fitted(loop_breakdown):
    profile = profile_of(loop_breakdown)
    ranking = rank_candidates(
        profile, Scenario(accept_len=2.0, draft_ms=0.18, num_draft=3), only=["fewer_draft_tokens"]
    )
    options = {o["width"]: o for o in ranking.candidates[0].details["options"]}
    assert sorted(options) == [2, 3]
    change = (
        profile.width_times[2] - profile.width_times[4]
    )  # width 2 is measured by the sweep, 3 is not
    assert change == pytest.approx(-4 * 2_000 / 1e6)
    assert options[2]["verify_ms"] == pytest.approx(profile.verify.wall_ms + change)
    # width 3 lies between the measured widths 2 and 4: the width model interpolates
    assert options[3]["verify_ms"] == pytest.approx(profile.verify.wall_ms + change / 2)


def test_fewer_draft_tokens_keeps_the_measured_accept_length_and_takes_the_curve_s_change(
    loop_breakdown,
):
    profile = profile_of(loop_breakdown)
    survival = parse_survival("0.8,0.5,0.3")
    ranking = rank_candidates(
        profile,
        Scenario(accept_len=2.5, draft_ms=0.18, num_draft=3, survival=survival),
        only=["fewer_draft_tokens"],
    )
    cand = ranking.candidates[0]
    k2 = cand.details["num_draft"]
    assert cand.cycle.accept_len == pytest.approx(2.5 - sum(survival.s[k2:]))


def test_fewer_draft_tokens_trades_accept_length_for_draft_time(loop_breakdown):
    profile = profile_of(loop_breakdown)
    ranking = rank_candidates(
        profile,
        Scenario(accept_len=2.0, draft_ms=0.18, num_draft=3, use_measured_widths=False),
        only=["fewer_draft_tokens"],
    )
    cand = ranking.candidates[0]
    k2 = cand.details["num_draft"]
    assert cand.cycle.draft_ms == pytest.approx(0.18 * k2 / 3)
    assert cand.cycle.verify_ms == pytest.approx(
        profile.verify.wall_ms
    )  # no model config: width-independent
    assert cand.cycle.accept_len < 2.0


def test_graph_verify_is_not_offered_a_cuda_graph():
    b = TraceBuilder()
    b.range(range_text(VERIFY, bs=1, tokens=4, graph=1), 0, 100_000)
    corr = b.launch(1_000, 5_000, api="cudaGraphLaunch")
    b.kernel("nvjet_tst_x", 10_000, 50_000, corr)
    b.kernel("flash_fwd_kernel", 51_000, 90_000, corr)
    data = breakdown(b.build()).to_json()
    ranking = rank_candidates(profile_of(data), Scenario(accept_len=2.0))
    assert {s["name"]: s["reason"] for s in ranking.skipped}[
        "cuda_graph_verify"
    ] == "verify already runs as a CUDA graph"
