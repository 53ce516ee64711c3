"""The load curve (issue 28): the draft count per batch size and context length, where
speculation stops paying, the ridge point, the server settings, plain numbers at load, and
vLLM PR #16035's published EAGLE curve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof import pipeline
from verifyprof.model.cycle.batch_cost import Shape, compute_bound, ridge_tokens
from verifyprof.model.decision.speculate import draft_curve
from verifyprof.model.decision.whatif import WhatifOptions, load_of
from verifyprof.model.fixes.base import current_cycle
from verifyprof.pipeline import prepared_of
from verifyprof.pipeline.data_files import load_hardware, load_model_config

ROOT = Path(__file__).resolve().parents[1]
GRAPH = ROOT / "traces" / "workload-dense-graph"
ARGS = Path(__file__).parent / "data" / "server_args"


def run_json(*args: str) -> dict:
    proc = verifyprof(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def graph():
    frame = pipeline.breakdown_frame(str(GRAPH / "trace.sqlite.gz"))
    o = WhatifOptions(manifest=GRAPH / "manifest.json", batches=(1, 4, 16, 64, 256))
    prepared = prepared_of(frame, o)
    load, why = load_of(prepared.profile, prepared.scenario, o, prepared.manifest)
    assert load is not None, why
    return prepared, load


# ---- vLLM PR #16035: Llama-3-8B, one request, EAGLE ------------------------------------------


def test_vllm_pr_16035_k4_slower_than_k2_from_plain_decoding_and_the_k2_point():
    """Given: plain decoding 128.6 tok/s (a 7.776 ms step); k = 2 at 175.5 tok/s with accept
    length 1.89, i.e. a 10.769 ms cycle, split as the verify over 3 tokens costing one decode
    step (bandwidth-bound on an H100: Llama-3-8B's 3 tokens are far below the ridge) and the
    rest, 2.993 ms, the draft's. Predicted: k = 4 (published 165.7 tok/s at 2.08) slower than
    k = 2; acceptance at k = 4 from the i.i.d. curve fitted to 1.89 at 2."""
    decode_ms = 1e3 / 128.6
    cycle_ms = 1.89 / 175.5 * 1e3
    out = run_json(
        "whatif",
        "--verify-ms", f"{decode_ms:.4f}",
        "--draft-ms", f"{cycle_ms - decode_ms:.4f}",
        "--accept-len", "1.89",
        "--num-draft", "2",
        "--baseline-tps", "128.6",
        "--batch", "1,8",
        "--model", "llama-3-8b",
        "--hardware", "h100-sxm",
    )  # fmt: skip
    (row, _) = out["load_curve"]["contexts"][0]["rows"]
    by_k = {p["num_draft"]: p for p in row["points"]}
    assert by_k[0]["tokens_per_s"] == pytest.approx(128.6, rel=1e-3)
    assert by_k[2]["tokens_per_s"] == pytest.approx(175.5, rel=1e-3)
    assert by_k[4]["tokens_per_s"] < by_k[2]["tokens_per_s"]
    assert by_k[4]["tokens_per_s"] == pytest.approx(165.7, rel=0.10)  # published, within 10%
    assert row["best_num_draft"] == 2


# ---- one trace: today's batch is the draft-count curve ----------------------------------------


def test_at_todays_batch_and_context_every_k_is_the_draft_curves(graph):
    prepared, load = graph
    p, s = prepared.profile, prepared.scenario
    curve = draft_curve(p, s, current_cycle(p, s), None)
    (today,) = [c for c in load.curves if c.context == load.today_context]
    (row,) = [r for r in today.rows if r.batch == load.today_batch]
    mine = {q["num_draft"]: q["tokens_per_s"] for q in row.points if q["num_draft"]}
    theirs = {q["num_draft"]: q["tokens_per_s"] for q in curve.points}
    assert mine == pytest.approx(theirs, rel=1e-9)


def test_per_request_rate_never_rises_with_the_batch(graph):
    _, load = graph
    for curve in load.curves:
        for i in range(len(curve.rows[0].points)):
            rates = [row.points[i]["tokens_per_s"] for row in curve.rows]
            assert all(b <= a * (1 + 1e-9) for a, b in zip(rates, rates[1:])), rates


def test_a_longer_context_keeps_speculation_ahead_of_plain_decoding_at_the_largest_batch(graph):
    _, load = graph
    short, long = load.curves  # today's context and 4x
    assert long.context == 4 * short.context > 0
    gain = [c.rows[-1].best["tokens_per_s"] / c.rows[-1].plain["tokens_per_s"] for c in load.curves]
    assert gain[1] > gain[0]


def test_the_verify_turns_compute_bound_at_the_ridge_point():
    model, hw = load_model_config("workload"), load_hardware("h200")
    t = ridge_tokens(model, hw)
    assert t is not None
    assert not compute_bound(model, hw, Shape(t - 1, 1, 0.0))
    assert compute_bound(model, hw, Shape(t, 1, 0.0))
    # bf16: 2 FLOPs per weight byte per token, so about peak / bandwidth tokens
    assert t == pytest.approx(hw.bf16_tflops / hw.bandwidth_tbps, rel=0.05)


def test_the_ridge_batch_falls_with_the_verify_width(graph):
    _, load = graph
    bound = load.curves[0].ridge_batch
    firsts = [bound[k] for k in sorted(bound) if bound[k] is not None]
    assert firsts == sorted(firsts, reverse=True)
    assert load.acceptance["kind"] == "chain"


# ---- the server settings, against the sources named ------------------------------------------


@pytest.fixture
def every_flag(graph, monkeypatch):
    """The graph's settings with flags at every band (the format is what these tests check)."""
    from verifyprof.model.decision import server_flags

    monkeypatch.setattr(server_flags, "MAX_FLAG_BAND", float("inf"))
    _, load = graph
    load.server = server_flags.settings(load, False)
    return load


def test_sglang_flags_are_the_fields_of_sglang_0_5_23(every_flag):
    load = every_flag
    source = (ARGS / "sglang-0.5.23.txt").read_text()
    fields = set(re.findall(r"^\S+:\d+:\s+(\w+): A\[", source, re.M))
    assert fields == {
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "cuda_graph_max_bs_decode",
    }
    known = {"--" + f.replace("_", "-") for f in fields}
    for ctx in load.server["per_context"]:
        for r in ctx["sglang"]:
            flags = dict(re.findall(r"(--[\w-]+) (\d+)", r["flags"]))
            assert set(flags) <= known and flags
            assert int(flags["--cuda-graph-max-bs-decode"]) == r["batches"][1]
            if r["num_draft"]:  # a chain: num-draft-tokens = num-steps + 1 when top-k is 1
                assert flags["--speculative-eagle-topk"] == "1"
                assert int(flags["--speculative-num-draft-tokens"]) == r["num_draft"] + 1


def vllm_schedule_ok(cfg: dict) -> bool:
    """The rules of tests/data/server_args/vllm-a6f6bb1d.txt."""
    table = cfg["num_speculative_tokens_per_batch_size"]
    if not table or any(len(e) != 3 for e in table) or cfg["num_speculative_tokens"] <= 0:
        return False
    previous = 0
    for start, end, k in sorted(table):
        if start <= 0 or end <= 0 or start > end or k < 0 or start <= previous:
            return False
        previous = end
    return sorted(table)[0][0] == 1 and max(k for *_, k in table) <= cfg["num_speculative_tokens"]


def test_vllm_schedule_keeps_the_rules_of_its_source(every_flag):
    load = every_flag
    rules = (ARGS / "vllm-a6f6bb1d.txt").read_text()
    assert "num_speculative_tokens_per_batch_size: list[tuple[int, int, int]]" in rules
    for ctx in load.server["per_context"]:
        cfg = ctx["vllm"]
        assert cfg is not None and vllm_schedule_ok(cfg)
        assert json.loads(ctx["vllm_speculative_config"]) == cfg
        # every listed batch gets a k from its best set (the k the band cannot tell from the
        # best: a setting switches k only where the rates differ by more than their bands)
        curve = next(c for c in load.curves if c.context == ctx["context"])
        for row in curve.rows:
            (k,) = [
                k for a, b, k in cfg["num_speculative_tokens_per_batch_size"] if a <= row.batch <= b
            ]
            assert k in row.best_set
    assert not vllm_schedule_ok(
        {"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[2, 8, 2]]}
    )


# ---- the CLI -------------------------------------------------------------------------------


def test_whatif_batch_list_gives_those_batches_and_contexts_in_the_json():
    out = run_json(
        "whatif", str(GRAPH / "trace.sqlite.gz"), "--manifest", str(GRAPH / "manifest.json"),
        "--batch", "1,8,32", "--context", "256,4096",
    )  # fmt: skip
    curves = out["load_curve"]["contexts"]
    assert [c["context"] for c in curves] == [256.0, 4096.0]
    assert [r["batch"] for r in curves[0]["rows"]] == [1, 8, 32]
    assert out["current"]["batch"] == 1  # today's batch: the trace's


def test_plain_numbers_without_a_model_say_why_there_is_no_load_curve():
    out = run_json("whatif", "--verify-ms", "15", "--accept-len", "2", "--num-draft", "3",
                   "--batch", "1,8")  # fmt: skip
    assert out["load_curve"] is None and "--model" in out["load_curve_skipped"]


def test_a_bad_batch_list_is_one_line_and_exit_2():
    proc = verifyprof("whatif", "--verify-ms", "15", "--accept-len", "2", "--batch", "1,eight")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "verifyprof: error: invalid value for '--batch': a number or a comma-separated list of"
        " ints, got '1,eight'"
    ]


MHA3 = ROOT / "bench" / "results" / "load_mha_h200_3"  # captures at batch 1, 8 and 64


def test_today_and_after_the_plan_both_rest_on_every_capture_given():
    """--accept-len 1.2: plain decoding wins today, speculating after the plan's fixes."""
    from verifyprof.pipeline import open_run

    options = WhatifOptions(
        source=str(MHA3 / "C1"),
        accept_len=1.2,
        model=str(ROOT / "bench/models/hf-chain-7b-mha.toml"),
    )
    run = open_run([str(MHA3 / c) for c in ("C1", "C8", "C64")], options, captures=True)
    ranking = run.ranking
    data = ranking.to_json()
    today, after = data["load_curve"], data["load_curve_after_plan"]
    assert any(n.startswith("one model from 3 capture(s)") for n in today["notes"])
    assert not any("after the plan's fixes" in n for n in today["notes"])
    assert any("from 3 captures with those fixes applied" in n for n in after["notes"])
    assert any(n.startswith("one model from 3 capture(s)") for n in after["notes"])
    assert today["contexts"][0]["rows"][0]["best_num_draft"] == 0  # plain decoding today
    shown = verifyprof(
        "whatif",
        *(str(MHA3 / c) for c in ("C1", "C8", "C64")),
        "--accept-len",
        "1.2",
        "--model",
        str(ROOT / "bench/models/hf-chain-7b-mha.toml"),
        env={"COLUMNS": "80"},
    ).stdout
    assert "Load today, context 512: batch 1-64 plain decoding" in " ".join(shown.split())
    assert shown.count("Load after the plan, context 512:") == 1


def test_a_load_range_whose_band_exceeds_25_percent_prints_no_flags_but_its_capture():
    """workload-dense-eager: one capture at batch 1, the roofline to batch 256 (+/-128%)."""
    data = json.loads(
        verifyprof("whatif", str(ROOT / "traces/workload-dense-eager"), "--json").stdout
    )
    for ctx in data["load_curve"]["server_settings"]["per_context"]:
        wide = [r for r in ctx["sglang"] if r["band"] > 0.25]
        assert wide and all(r["flags"] is None for r in wide)
        assert all(r["measure_command"].startswith("verifyprof capture --batches") for r in wide)
        assert ctx["vllm_speculative_config"] is None and "over 25%" in ctx["vllm_withheld"]
    shown = verifyprof("whatif", str(ROOT / "traces/workload-dense-eager")).stdout
    assert "--speculative-num-steps" not in shown and "--speculative-config" not in shown
    assert "batch 1-256: no flags (+/-128% band); measure it:" in shown
    assert "    verifyprof capture --batches 1,256 --out DIR -- " in shown


def test_a_load_range_within_25_percent_keeps_its_copy_ready_flags():
    captures = [str(MHA3 / c) for c in ("C1", "C8", "C64")]
    model = str(ROOT / "bench/models/hf-chain-7b-mha.toml")
    data = json.loads(verifyprof("whatif", *captures, "--model", model, "--json").stdout)
    ctx = data["load_curve"]["server_settings"]["per_context"][0]
    assert all(r["band"] <= 0.25 and r["flags"].startswith("--speculative") for r in ctx["sglang"])
    assert ctx["vllm_speculative_config"] and ctx["vllm_withheld"] is None
