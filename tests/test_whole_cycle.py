"""Whole-cycle predictions (issue 20) on real H200 traces: the host/GPU race, plain decoding on
every ranking, the draft-count curve, graphs that cannot be captured, and compare checking the
change it sees.

``traces/workload-dense-compile`` holds 30 speculative iterations each in eager, CUDA-graph and
torch.compile mode from one process, one after the other: predictions made from the eager
iterations alone are checked against the other modes' iterations of the same run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from verifyprof import pipeline
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.cycle.timing import measured_parts, timed
from verifyprof.model.decision.whatif import WhatifOptions, plain_numbers
from verifyprof.model.fixes.base import cycle_of, state_parts
from verifyprof.model.fixes.registry import builders as fix_builders
from verifyprof.pipeline import prepared_of

ROOT = Path(__file__).resolve().parents[1]
COMPILE = ROOT / "traces/workload-dense-compile/trace.sqlite.gz"
EAGER = ROOT / "traces/workload-dense-eager"
HF = ROOT / "traces/capture-hf-assisted"
ACCEPT = 1.9333  # the run's measured accept length (summary.json)


@pytest.fixture(scope="module")
def compile_frame() -> BreakdownFrame:
    return pipeline.breakdown_frame(str(COMPILE))


def mode_of(frame: BreakdownFrame, variant: dict[str, str]) -> BreakdownFrame:
    """The steps of one mode's iterations: everything inside that mode's spec_step windows
    (the modes ran one after the other)."""
    steps = frame.steps
    spec = steps[steps["name"] == "verifyprof.spec_step"]
    mine = spec[
        [
            all(a.get(k) == v for k, v in variant.items()) and len(a) == len(variant) + 2
            for a in spec["attrs"]
        ]
    ]
    lo, hi = int(mine["start_ns"].min()), int(mine["end_ns"].max())
    keep = (steps["start_ns"] >= lo) & (steps["start_ns"] < hi)
    return BreakdownFrame(steps[keep].reset_index(drop=True), frame.trace, frame.options)


def spec_cost_ms(frame: BreakdownFrame) -> float:
    spec = frame.steps[frame.steps["name"] == "verifyprof.spec_step"]
    return float(spec["wall_ns"].mean()) / 1e6


def applied(prep, *names: str):
    builders = dict(fix_builders())
    profile, s = prep.profile, prep.scenario
    for name in names:
        cand = builders[name](profile, s, cycle_of(profile, s))
        profile, s = cand.profile, cand.scenario
    return cycle_of(profile, s)


def test_the_race_times_an_all_eager_cycle_as_the_sum_of_its_parts(compile_frame):
    prep = prepared_of(mode_of(compile_frame, {"graph": "0"}), WhatifOptions(accept_len=ACCEPT))
    parts = state_parts(prep.profile, prep.scenario)
    assert [p.name for p in parts] == ["draft", "verify", "accept", "draft_extend", "rest"]
    assert timed(parts, prep.scenario.costs) == pytest.approx(sum(p.cost_ms for p in parts))


def test_graphing_every_eager_phase_predicts_the_graph_iterations_of_the_same_run(compile_frame):
    """From the eager iterations, with the node gap and replay cost of the trace's own graph
    steps (calibrated: what a trace with graph steps gives)."""
    graph = mode_of(compile_frame, {"graph": "1"})
    prep = prepared_of(
        compile_frame, WhatifOptions(accept_len=ACCEPT, hardware="h200", mode="eager")
    )
    assert prep.profile.verify.mode == "eager" and "graph steps" in prep.scenario.costs.source
    predicted = applied(prep, "cuda_graph_verify", "cuda_graph_draft").cycle_ms
    measured = spec_cost_ms(graph)  # 3.73 ms: 34.36 ms eager
    assert predicted == pytest.approx(measured, rel=0.10)


def test_compiling_the_verify_predicts_the_compiled_iterations_of_the_same_run(compile_frame):
    compiled = mode_of(compile_frame, {"compile": "1", "graph": "0"})
    prep = prepared_of(
        compile_frame, WhatifOptions(accept_len=ACCEPT, hardware="h200", mode="eager")
    )
    cycle = applied(prep, "graph_fusion_verify")
    assert cycle.cycle_ms == pytest.approx(spec_cost_ms(compiled), rel=0.10)  # 14.16 ms
    verify = compiled.steps[compiled.steps["name"] == "verifyprof.verify"]
    assert cycle.verify_ms == pytest.approx(verify["cost_ns"].mean() / 1e6, rel=0.10)  # 1.96


def test_the_accept_range_of_each_iteration_holds_its_one_host_sync(compile_frame):
    steps = compile_frame.steps
    accept = steps[steps["name"] == "verifyprof.accept"]
    verify = steps[steps["name"] == "verifyprof.verify"]
    assert set(accept["host_syncs"]) == {1}  # the accepted tokens read by the host
    assert set(verify["host_syncs"]) == {0}
    assert (accept["post_sync_ns"] > 0).all()


def test_the_cycle_parts_take_the_profiled_host_time_out_with_the_manifests_dilation():
    frame = pipeline.breakdown_frame(str(ROOT / "traces/capture-workload-compile-userhooks"))
    prep = prepared_of(
        frame,
        WhatifOptions(manifest=ROOT / "traces/capture-workload-compile-userhooks/manifest.json"),
    )
    assert prep.dilation == pytest.approx(2.37, abs=0.01)
    profiled = sum(p.cost_ms for p in measured_parts(prep.profile, 3))
    assert cycle_of(prep.profile, prep.scenario).cycle_ms < profiled


def test_plain_numbers_lead_with_turning_speculation_off_when_it_loses():
    out = plain_numbers(WhatifOptions(verify_ms=30, accept_len=2.0, baseline_tps=82))
    assert out["verdict_parts"]["decision"].startswith("Turn speculation off")
    assert "82.0 tok/s" in out["verdict"] and "accept length 2.46" in out["verdict"]


def test_plain_numbers_say_speculation_pays_when_it_does():
    out = plain_numbers(WhatifOptions(verify_ms=15, accept_len=2.0, baseline_tps=82))
    assert out["verdict"].count("Speculation pays. Today: speculating 133.3 tok/s") == 1


def test_every_ranking_has_plain_decoding_from_the_traces_decode_steps(shared_run):
    ranking = shared_run(EAGER).ranking
    plain = next(c for c in ranking.candidates if c.name == "no_speculation")
    assert "decode steps" in plain.details["decode_source"]
    assert plain.cycle.accept_len == 1.0
    assert ranking.plain.tokens_per_s == pytest.approx(plain.cycle.tokens_per_s)


def test_a_given_baseline_rate_beats_the_traces_decode_steps_everywhere(shared_run):
    """One plain-decoding rate per story: the user's --baseline-tps is the speedup's baseline,
    plain decoding's candidate and the verdict's (the trace's decode steps give its shape)."""
    ranking = shared_run(EAGER, baseline_tps=300.0).ranking
    plain = next(c for c in ranking.candidates if c.name == "no_speculation")
    assert plain.cycle.tokens_per_s == pytest.approx(300.0, rel=1e-6)
    assert ranking.plain.tokens_per_s == pytest.approx(300.0, rel=1e-6)
    assert ranking.current.speedup == pytest.approx(ranking.current.tokens_per_s / 300.0)
    assert "plain decode step (given)" in plain.details["decode_source"]
    assert "decode steps" in plain.details["decode_source"]  # the shape it was given


def test_the_report_races_the_given_baseline_rate_too(shared_run):
    data = pipeline.report(str(EAGER), baseline_tps=300.0)
    assert data.ranking.plain.tokens_per_s == pytest.approx(300.0, rel=1e-6)
    assert data.ranking.verdict.text().startswith(
        shared_run(EAGER, baseline_tps=300.0).ranking.verdict.text()[:60]
    )


def test_the_draft_curve_starts_at_plain_decoding_and_names_the_best_k(shared_run):
    curve = shared_run(EAGER).ranking.curve
    ks = [p["num_draft"] for p in curve.points]
    assert ks == list(range(0, 9))
    assert curve.points[0]["accept_len"] == 1.0
    assert curve.best == max(curve.points, key=lambda p: p["tokens_per_s"])
    assert [p["measured"] for p in curve.points[1:]].count(True) == 1  # today's k=3


def test_graph_fixes_of_a_draft_that_syncs_are_not_stacked_and_say_what_must_change(shared_run):
    ranking = shared_run(HF).ranking
    blocked = {c.name: c.blocked for c in ranking.candidates if c.blocked}
    assert "torch_compile" in blocked and "host syncs per draft step" in blocked["torch_compile"][0]
    assert not {s.candidate.name for s in ranking.plan} & set(blocked)
    free = [c.blocked == [] for c in ranking.candidates]
    assert free == sorted(free, reverse=True)  # every blocked fix after every free one


def test_assume_capturable_lets_the_graph_fixes_into_the_plan(shared_run):
    ranking = shared_run(HF, assume_capturable=True).ranking
    compile_ = next(c for c in ranking.candidates if c.name == "torch_compile")
    assert not compile_.blocked
    # speculation's own plan stacks it (plain decoding with the verify graphed still wins, so
    # the plan the verdict gives turns speculation off: issue 33's one decision)
    assert ranking.plain.spec_after_plan >= compile_.cycle.tokens_per_s


def test_a_prediction_above_five_times_names_the_assumption_carrying_it(shared_run):
    ranking = shared_run(HF, assume_capturable=True).ranking
    compile_ = next(c for c in ranking.candidates if c.name == "torch_compile")
    assert compile_.cycle.tokens_per_s > 5 * ranking.current.tokens_per_s
    assert compile_.warnings and "carries most of it" in compile_.warnings[0]


def test_sglang_words_are_kept_for_sglang_traces(shared_run):
    ranking = shared_run(EAGER).ranking
    words = " ".join(a for c in ranking.candidates for a in c.assumptions)
    assert "SGLang" not in words.replace("SGLang #29960", "")


def compared(before: BreakdownFrame, after: BreakdownFrame, accept_len: float):
    """``compare`` of two frames: BEFORE's run, under the accept length, beside AFTER's."""
    given = WhatifOptions(accept_len=accept_len)
    return pipeline.Run.of_frame(before, given).compare(pipeline.Run.of_frame(after))


def test_compare_checks_graphs_when_graph_launches_appear(compile_frame):
    eager, graphed = (mode_of(compile_frame, {"graph": g}) for g in ("0", "1"))
    (check,) = compared(eager, graphed, ACCEPT).predictions
    assert check["candidate"] == "cuda_graph_verify+cuda_graph_draft"
    assert abs(check["cycle_error_pct"]) < 10


def test_compare_checks_compile_when_the_kernels_fuse(compile_frame):
    before = mode_of(compile_frame, {"graph": "0"})
    after = mode_of(compile_frame, {"compile": "1", "graph": "0"})
    (check,) = compared(before, after, ACCEPT).predictions
    assert check["candidate"] == "graph_fusion_verify"
    assert abs(check["cycle_error_pct"]) < 10


def test_compare_checks_plain_decoding_when_speculation_is_off():
    frame = pipeline.breakdown_frame(str(EAGER))
    steps = frame.steps
    decode = steps["name"] == "verifyprof.decode"
    before, after = (
        BreakdownFrame(steps[r].reset_index(drop=True), frame.trace) for r in (~decode, decode)
    )
    (check,) = compared(before, after, 2.025).predictions
    assert check["candidate"] == "no_speculation"
    assert check["measured_tokens_per_s"] == pytest.approx(
        1e3 / (steps[decode]["cost_ns"].mean() / 1e6), rel=0.01
    )


def test_compare_says_so_when_no_candidate_models_the_change(compile_frame):
    eager = mode_of(compile_frame, {"graph": "0"})
    result = compared(eager, eager, ACCEPT)
    assert result.predictions == []
    assert result.prediction_note.startswith("no what-if candidate models this change")
