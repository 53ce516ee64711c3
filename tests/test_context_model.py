"""What a context costs, from real H200 captures of ``bench/programs/hf_chain.py --preset 7b-mha``
(``bench/results/load_mha_h200_2``: C1 batch 1 and C8 batch 8 at context 512, C8L batch 8 and C1L
batch 1 at context 2048, k = 4, each with its width sweep and ``capture --decode-cmd``'s plain
decoding at its load): a lightly loaded forward reads its KV cache latency-bound, a token's
attention grows with its context, and plain decoding is fitted from its own measured steps."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof.model.cycle.phase_fit import EXTRAPOLATED, INTERPOLATED, MEASURED, PLAIN_RUN_BAND
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.pipeline import open_run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "results" / "load_mha_h200_2"
THIRD = ROOT / "bench" / "results" / "load_mha_h200_3"  # another lease: C1, C8, C64
MODEL = ROOT / "bench" / "models" / "hf-chain-7b-mha.toml"


def measured(*names: str):
    o = WhatifOptions(model=str(MODEL))
    resolved = open_run([str(RUNS / n) for n in names], o, captures=True).joined
    return resolved.prepared.scenario.measured


@pytest.fixture(scope="module")
def rectangle():
    return measured("C1", "C8", "C8L", "C1L")


@pytest.fixture(scope="module")
def loaded_context():
    return measured("C1", "C8", "C8L")


def test_two_contexts_at_two_batches_fit_the_batch_below_which_kv_reads_are_latency_bound(
    rectangle,
):
    f = rectangle.fit
    assert 1 < f.kv_floor_batch < 8
    for c in rectangle.captures:  # the fit still passes through every capture's step
        step = c.profile.verify
        got = f.at(c.batch, c.profile.width, c.context).ms
        assert got == pytest.approx(step.wall_ms, rel=0.03), c.label


def test_without_two_contexts_at_two_batches_there_is_no_latency_floor(loaded_context):
    assert loaded_context.fit.kv_floor_batch == 0.0
    assert measured("C1", "C8", "C1L").fit.kv_floor_batch == 0.0


def test_one_request_at_4x_context_costs_more_than_an_eighth_of_eight(rectangle):
    f = rectangle.fit
    one = f.rest_ms(1, 2048) - f.rest_ms(1, 512)
    eight = f.rest_ms(8, 2048) - f.rest_ms(8, 512)
    assert one > eight / 8 * 1.5  # measured: C1L - C1 against (C8L - C8) / 8


def test_a_tokens_cost_grows_with_its_context_where_the_largest_batch_was_swept_at_two(
    loaded_context,
):
    f = loaded_context.fit
    assert f.per_token_kv_ms > 0
    assert f.token_slope(2048) > f.token_slope(512)


def test_a_light_batchs_sweep_at_another_context_does_not_set_the_tokens_context_cost():
    assert measured("C1", "C8", "C1L").fit.per_token_kv_ms == 0.0


def test_plain_decoding_is_fitted_from_its_own_measured_steps(loaded_context):
    d = loaded_context.decode
    assert d is not None
    assert sorted((b, c) for b, _, c in d.points) == [(1, 512.0), (8, 512.0), (8, 2048.0)]


def test_plain_decodings_own_latency_floor_is_in_the_notes_as_the_verifys_is(rectangle):
    d, notes = rectangle.decode, rectangle.notes()
    assert d is not None and d.kv_floor_batch > min(d.batches)
    floor = f"below batch {d.kv_floor_batch:.1f} a step reads its KV cache latency-bound"
    assert [n for n in notes if n.startswith("plain decoding: " + floor)]
    verify = f"below batch {rectangle.fit.kv_floor_batch:.1f} a forward reads its KV cache"
    assert [n for n in notes if n.startswith(verify)]


@pytest.fixture(scope="module")
def curve_json() -> dict:
    names = [str(RUNS / n) for n in ("C1", "C8", "C8L")]
    proc = verifyprof(
        "whatif", *names, "--model", str(MODEL), "--batch", "1,4,8,64", "--context", "512,2048",
        "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def plain(result: dict, context: float, batch: int) -> dict:
    curve = next(c for c in result["load_curve"]["contexts"] if c["context"] == context)
    row = next(r for r in curve["rows"] if r["batch"] == batch)
    return next(p for p in row["points"] if p["num_draft"] == 0)


def test_plain_decoding_where_a_capture_measured_it_is_that_measured_rate(curve_json):
    p = plain(curve_json, 512.0, 8)
    rate = json.loads((RUNS / "C8" / "manifest.json").read_text())["results"]
    assert p["basis"] == MEASURED
    assert p["tokens_per_s"] == pytest.approx(rate["baseline_tokens_per_s"], rel=1e-6)
    assert p["band"] >= PLAIN_RUN_BAND  # one short unprofiled run: its own spread, not 3.5%


def test_plain_decoding_between_and_past_the_measured_loads_says_so(curve_json):
    assert plain(curve_json, 512.0, 4)["basis"] == INTERPOLATED
    far = plain(curve_json, 512.0, 64)
    assert far["basis"] == EXTRAPOLATED and far["band"] > plain(curve_json, 512.0, 4)["band"]


def test_the_detailed_draft_count_table_says_each_points_basis_and_band():
    names = [str(RUNS / n) for n in ("C1", "C8")]
    proc = verifyprof("whatif", *names, "--model", str(MODEL), "--details", env={"COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Draft count:"))
    rule = next(i for i in range(start, len(lines)) if lines[i].startswith("─"))  # 2-line header
    rows = list(itertools.takewhile(lambda line: line[:1].isdigit(), lines[rule + 1 :]))
    assert len(rows) >= 5
    today = next(r for r in rows if r.rstrip().endswith("today"))
    assert "measured +/-" in today
    words = r"(measured|interp|extrap|roofline)"  # as the load tables word them
    assert all(re.search(words + r" \+/-\d+%", r) for r in rows)


def test_between_two_captured_contexts_a_batch_is_interpolated_only_where_both_measured_it(
    loaded_context,
):
    f = loaded_context.fit  # batch 1 and 8 at context 512, batch 8 alone at 2048
    assert f.at(4, 5, 1024).basis == EXTRAPOLATED  # 1024: as far from 512 as from 2048
    assert f.at(8, 1, 1024).basis == INTERPOLATED


def test_one_batchs_decodes_make_no_decode_fit_and_plain_decoding_still_slows_with_batch():
    m = measured("C1", "C1L")
    assert m.decode is None
    names = [str(RUNS / n) for n in ("C1", "C1L")]
    args = ("--model", str(MODEL), "--batch", "1,64", "--context", "512", "--json")
    proc = verifyprof("whatif", *names, *args)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert plain(result, 512.0, 64)["tokens_per_s"] < 0.9 * plain(result, 512.0, 1)["tokens_per_s"]


def test_plain_decoding_at_a_captures_load_is_its_rate_where_the_fit_misses_it():
    names = [str(RUNS / n) for n in ("C1", "C8", "C8L", "C1L")] + [str(THIRD / "C64")]
    args = ("--model", str(MODEL), "--batch", "1,8", "--context", "512", "--json")
    proc = verifyprof("whatif", *names, *args)
    assert proc.returncode == 0, proc.stderr
    p = plain(json.loads(proc.stdout), 512.0, 8)
    rate = json.loads((RUNS / "C8" / "manifest.json").read_text())["results"]
    assert p["basis"] == MEASURED
    assert p["tokens_per_s"] == pytest.approx(rate["baseline_tokens_per_s"], rel=1e-6)


def test_one_captures_own_context_is_what_its_program_ran_at_not_the_first_asked():
    args = ("--model", str(MODEL), "--batch", "1", "--context", "8192,512", "--json")
    proc = verifyprof("whatif", str(RUNS / "C1"), *args)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert plain(result, 512.0, 1)["basis"] == MEASURED
    assert plain(result, 8192.0, 1)["basis"] != MEASURED


def test_captures_taken_apart_say_so_and_one_sessions_do_not():
    apart = measured_notes("C1", "C8", str(THIRD / "C64"))
    assert any("min apart" in n and "C64" in n for n in apart)
    assert not any("min apart" in n for n in measured_notes("C1", "C8", "C8L"))


def measured_notes(*names: str) -> list[str]:
    o = WhatifOptions(model=str(MODEL))
    resolved = open_run([str(RUNS / n) for n in names], o, captures=True).joined
    return resolved.prepared.scenario.notes
