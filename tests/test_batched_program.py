"""A batched program as it runs, on the H100 captures of phillip-kravtsov/gpt-fast (6f68835) at
batch 1, 8 and 32 (``bench/results/external_h100_b2``, issue 41): it prints its rate for the
whole batch ("Average tokens/sec") and per request ("User tok/sec"), and catches each fully
accepted row up with one drafter call of its own (``draft_extend``, bs=1)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof.contracts.manifest import read_manifest
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.pipeline import open_run

ROOT = Path(__file__).resolve().parents[1]
B = ROOT / "bench/results/external_h100_b2/captures-b"
MODEL = ROOT / "bench/models/gptfast-7b.toml"
SWEPT = ("--context", "56", "--batch")  # the sweeps' context: 18 + 32 new + k + 1, rounded up


def whatif_json(*args: str) -> dict:
    proc = verifyprof("whatif", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_batched_programs_aggregate_rate_is_anchored_per_request():
    # the baseline run's 124.69 tok/s is the batch's; a request makes 124.69 x 11.24 / 89.95
    m = read_manifest(B / "batch-8/manifest.json")
    assert m.unprofiled_tps == pytest.approx(124.69 * 11.24 / 89.95)
    assert m.dilation == pytest.approx(124.69 / 89.95)


def test_todays_cycle_of_a_batched_capture_reproduces_its_per_request_rate():
    current = whatif_json(str(B / "batch-8"), "--capture-context", "71")["current"]
    assert current["tokens_per_s"] == pytest.approx(15.58, abs=0.01)  # User tok/sec, unprofiled
    assert current["cycle_ms"] == pytest.approx(3.1486 / 15.58 * 1e3, rel=1e-3)


def test_a_batch_1_capture_keeps_its_rate_as_reported():
    m = read_manifest(B / "batch-1/manifest.json")
    assert m.rate_scale == 1.0 and m.unprofiled_tps == pytest.approx(24.62)


@pytest.fixture(scope="module")
def measured():
    o = WhatifOptions(model=str(MODEL), capture_contexts=((None, 71.0),))
    return open_run([str(B)], o, captures=True).joined.prepared.scenario.measured


def test_a_part_run_once_per_row_is_told_apart_by_its_forwards_growing_with_the_batch(measured):
    slopes = {sl.name: sl for sl in measured.slopes}
    # 16 catch-ups in 43 cycles at batch 1, 98 in 36 at 8, 360 in 32 at 32: ~0.35 a request
    assert slopes["draft_extend"].per_row
    assert slopes["draft_extend"].forwards_per_request == pytest.approx(0.35, abs=0.03)
    assert not slopes["draft"].per_row  # k forwards a cycle at any batch


def test_the_load_curve_moves_a_per_row_part_with_its_forwards_not_its_gpu_time():
    j = whatif_json(str(B), "--model", str(MODEL), "--capture-context", "71", *SWEPT, "1,64")
    notes = " ".join(j["load_curve"]["notes"])
    assert "draft_extend 0.3" in notes and "forwards per extra request" in notes
    row = next(r for c in j["load_curve"]["contexts"] for r in c["rows"] if r["batch"] == 64)
    at4 = next(p for p in row["points"] if p["num_draft"] == 4)
    # measured unprofiled at batch 64, k = 4: 4.28 and 4.26 tok/s per request; moving only the
    # catch-up's GPU time predicted 18.9
    assert at4["tokens_per_s"] == pytest.approx(4.27, rel=0.15)


def test_fewer_drafts_mean_more_rows_to_catch_up_in_the_draft_count_curve():
    j = whatif_json(str(B), "--model", str(MODEL), "--capture-context", "71", *SWEPT, "1,32")
    row = next(r for c in j["load_curve"]["contexts"] for r in c["rows"] if r["batch"] == 32)
    rate = {p["num_draft"]: p["tokens_per_s"] for p in row["points"]}
    # measured at batch 32: k = 1 3.47 / 3.41, k = 4 7.35 / 7.27 tok/s per request; with the
    # catch-ups kept at k = 4's share, k = 1 was predicted at 5.7
    assert rate[1] == pytest.approx(3.44, rel=0.15)
    assert rate[1] < rate[4] / 1.8


MOE8 = ROOT / "bench/results/moe_spec_h100_2/captures/batch-8/manifest.json"


def test_the_programs_own_unprofiled_calls_are_a_requests_rate_too():
    # moe_spec reports its batch's rates (tokens_per_s, unprofiled_tokens_per_s) beside a
    # request's: its own calls agree with the baseline runs once both are a request's
    from verifyprof.model.inputs.anchor_rates import robust_rates

    m = read_manifest(MOE8)
    results = m.raw["results"]
    share = results["tokens_per_s_per_request"] / results["tokens_per_s"]
    rates = robust_rates(m)
    own = next(s for s in rates.sources if "own" in s.source)
    assert own.median == pytest.approx(results["unprofiled_tokens_per_s"] * share)
    assert rates.warning is None


def test_a_requests_rate_rounded_against_the_total_is_no_batch(tmp_path):
    manifest = json.loads((B / "batch-1/manifest.json").read_text())
    manifest["results"]["tokens_per_s_per_request"] = 19.92  # the total: 19.93
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    m = read_manifest(tmp_path / "manifest.json")
    assert m.rate_scale == 1.0 and m.unprofiled_tps == pytest.approx(24.62)


def _part(forwards: float):
    from verifyprof.model.cycle.parts import Part

    return Part("draft_extend", 1.0 * forwards, 0.0, 20.0 * forwards, 0, 0, 0, 0, forwards)


def test_a_part_every_row_runs_every_cycle_is_no_catch_up():
    from verifyprof.model.fixes.catch_up import caught_up
    from verifyprof.model.fixes.part_slopes import PartSlope
    from verifyprof.model.inputs.acceptance import Survival

    alpha = Survival.from_alpha(0.7, 4)  # L(4) - L(3) = 0.7**4 = 0.24 a request
    catch_up = (PartSlope("draft_extend", 0.001, 0.7**4, 0.0),)
    every_row = (PartSlope("draft_extend", 0.001, 1.0, 0.0),)
    parts = (_part(8 * 0.7**4),)
    (moved,), _ = caught_up(parts, catch_up, lambda: alpha, 4, 1)
    assert moved.forwards == pytest.approx(8 * 0.7)  # L(1) - L(0): 0.7 a request
    kept, notes = caught_up((_part(8.0),), every_row, lambda: alpha, 4, 1)
    assert kept[0].forwards == 8.0 and not notes


def test_rows_added_at_another_draft_count_catch_up_at_its_share():
    from verifyprof.model.fixes.batch import _moved
    from verifyprof.model.fixes.part_slopes import PartSlope

    slope = PartSlope("draft_extend", 0.001, 0.35, 0.0)  # fitted at the captures' k
    at_k1 = _part(8 * 0.77)  # batch 8 at k = 1: 0.77 a request, 2.2x the captures' share
    moved = _moved(at_k1, (slope,), 56, 8)  # to batch 64
    assert moved.forwards == pytest.approx(64 * 0.77)


def test_a_batched_capture_reporting_no_per_request_rate_is_cautioned(tmp_path):
    folder = tmp_path / "batch-8"
    shutil.copytree(B / "batch-8", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["results"]["tokens_per_s_per_request"]  # "Average tokens/sec" alone
    (folder / "manifest.json").write_text(json.dumps(manifest))
    cautions = whatif_json(str(folder), "--capture-context", "71")["verdict_parts"]["cautions"]
    assert any("ran at batch 8 and reported tokens_per_s with no" in c for c in cautions)
    told = whatif_json(str(B / "batch-8"), "--capture-context", "71")["verdict_parts"]["cautions"]
    assert not any("tokens_per_s_per_request" in c for c in told)


def test_plain_decoding_from_the_verify_carries_the_share_the_dilation_took_out_of_it():
    # batch 32: the verify is 72.37 ms traced and 54.45 ms once the program's 1.44x dilation is
    # spread over the cycle by host time; plain decoding rests on that verify alone, and its
    # width-1 twin measured 67.6 ms in the sweep: the band holds the 33% taken out
    plain = plain_at_today(B / "batch-32")
    assert plain["basis"] == "extrapolated"
    assert plain["band"] == pytest.approx(math.hypot(0.2, 72.367 / 54.453 - 1), abs=0.01)


def plain_at_today(folder: Path) -> dict:
    """Plain decoding's point at the capture's own batch (32) and context (71)."""
    at = ("--context", "71", "--batch", "1,32")
    j = whatif_json(str(folder), "--capture-context", "71", "--model", str(MODEL), *at)
    row = next(r for r in j["load_curve"]["contexts"][0]["rows"] if r["batch"] == 32)
    return next(p for p in row["points"] if not p["num_draft"])


def test_plain_decoding_with_no_dilation_keeps_the_plain_from_verify_band(tmp_path):
    folder = tmp_path / "batch-32"  # the same capture, its baseline run as fast as the profiled
    shutil.copytree(B / "batch-32", folder)
    doc = json.loads((folder / "manifest.json").read_text())
    d = doc["dilation"]
    d["factor"], d["unprofiled_tokens_per_s"] = 1.0, d["profiled_tokens_per_s"]
    (folder / "manifest.json").write_text(json.dumps(doc))
    assert plain_at_today(folder)["band"] == pytest.approx(0.2, abs=0.005)


def test_launches_per_forward_that_grow_with_the_batch_are_fitted_for_the_verify_and_draft(
    measured,
):
    # the fork's verify launches 1804, 2220 and 3756 kernels at batch 1, 8 and 32 (a row-by-row
    # KV-cache update in every layer: 63 more per row), its drafter 1246, 1862, 3974 a forward
    assert measured.launches.per_request == pytest.approx(63, rel=0.05)
    draft = next(sl for sl in measured.slopes if sl.name == "draft")
    assert draft.launches.per_request == pytest.approx(88, rel=0.05)
    catch_up = next(sl for sl in measured.slopes if sl.name == "draft_extend")
    assert catch_up.launches is None  # bs=1 calls: its forwards carry its growth instead


def test_past_the_last_capture_an_eager_verify_pays_for_its_extra_launches():
    j = whatif_json(str(B), "--model", str(MODEL), "--capture-context", "71", *SWEPT, "1,64")
    row = next(r for c in j["load_curve"]["contexts"] for r in c["rows"] if r["batch"] == 64)
    rate = {p["num_draft"]: p["tokens_per_s"] for p in row["points"]}
    # measured unprofiled at batch 64 (B2's sweeps): plain 9.43 / 9.33, k = 6 4.62 / 4.56 tok/s
    # per request; with the verify's and the drafter's launch gaps held at batch 32's, 16.5 and
    # 5.9 were predicted
    assert rate[0] == pytest.approx(9.38, rel=0.4)
    assert rate[6] == pytest.approx(4.59, rel=0.1)


def test_launches_that_barely_grow_make_no_line():
    from verifyprof.model.fixes.launch_growth import launch_line

    assert launch_line([(1, 1000.0), (8, 1020.0)]) is None  # 2%: the same kernels at any batch
    assert launch_line([(8, 1000.0)]) is None  # one batch
    # B2's verify at batch 1 and 32, drawn to 64: B4's batch-64 capture launched 5773
    assert launch_line([(1, 1804.0), (32, 3756.0)]).at(64) == pytest.approx(5773, rel=1e-3)
