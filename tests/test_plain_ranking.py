"""Plain numbers ranked like a trace (issue 27 item 5): with --model, --hardware, --link, --tp
and --num-draft, whatif ranks what numbers can give, says what was given and assumed, refuses
what it cannot use in one line, and every ratio says what it is over."""

from __future__ import annotations

import pytest
from test_whatif_cli import ROOT, assert_bad_input, run, run_json

ISSUE_27 = ["--verify-ms", "30", "--accept-len", "2"]
GIVEN = ["--hardware", "h200", "--link", "pcie_gen4", "--model", "kimi-k2", "--tp", "8"]


def test_plain_numbers_use_the_model_hardware_link_tp_and_draft_count():
    """The issue's command ranks the candidates numbers can give: the verify split by the
    roofline and the link model (the allreduces at the PCIe Gen4 model's time), the draft count
    by the width model, and says what it was given and what it assumed."""
    from verifyprof.pipeline.data_files import load_hardware, load_model_config

    bare = run_json("whatif", *ISSUE_27)
    out = run_json("whatif", *ISSUE_27, *GIVEN, "--num-draft", "3")
    assert not bare["candidates"] and out["candidates"]  # one schema: empty where not ranked
    ranking = out
    phases = ranking["current"]["verify_phases_ms"]
    assert sum(phases.values()) == pytest.approx(30.0)
    model, hw = load_model_config("kimi-k2"), load_hardware("h200", "pcie_gen4")
    per_call = hw.allreduce_us(4 * model.activation_bytes_per_token(), 8, "nccl").us
    assert phases["allreduce"] == pytest.approx(model.allreduces_per_forward * per_call / 1e3)
    names = {c["name"] for c in ranking["candidates"]}
    assert {"custom_allreduce", "more_draft_tokens", "fewer_draft_tokens"} <= names
    custom = next(c for c in ranking["candidates"] if c["name"] == "custom_allreduce")
    assert "PCIe Gen4" in " ".join(custom["assumptions"])
    assert not any("per call measured" in a for a in custom["assumptions"])  # no trace did
    skipped = {s["name"] for s in ranking["skipped"]}
    assert {"cuda_graph_verify", "host_overhead", "allreduce_fusion"} <= skipped
    points = ranking["draft_curve"]["points"]
    today = next(p for p in points if p["verify_source"] == "today")
    assert today["verify_ms"] == 30.0 and today["num_draft"] == 3
    roofline = [p for p in points if p["verify_source"] == "roofline"]
    assert len(roofline) >= 4
    widths = [p for p in points if p["num_draft"] > 0]
    verify = [p["verify_ms"] for p in sorted(widths, key=lambda p: p["width"])]
    assert verify == sorted(verify)  # the verify grows with its width
    given, assumed = " ".join(out["basis"]["given"]), " ".join(out["basis"]["assumed"])
    assert "--tp 8" in given and "PCIe Gen4" in given and "Kimi-K2" in given
    assert "roofline" in assumed and "allreduces per verify" in assumed
    assert out["verdict_parts"]["group"] == "plain numbers (no trace)"


def test_plain_numbers_rank_in_the_console_as_in_the_json():
    args = ("whatif", *ISSUE_27, *GIVEN, "--num-draft", "3", "--baseline-tps", "40")
    data, shown = run_json(*args), run(*args, "--details", env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    for heading in ("Given", "Assumed", "Plan:", "Draft count:", "Each candidate alone"):
        assert heading in shown.stdout
    for cand in data["candidates"]:
        assert f"{cand['tokens_per_s']:.1f}" in shown.stdout and cand["name"] in shown.stdout
    assert f"over {data['relative_to']['speedup']}" in shown.stdout


def test_the_link_changes_the_allreduce_the_plain_numbers_rank():
    nvlink = run_json("whatif", *ISSUE_27, *GIVEN[:2], *GIVEN[4:], "--num-draft", "3")
    pcie = run_json("whatif", *ISSUE_27, *GIVEN, "--num-draft", "3")
    assert "NVLink" in " ".join(nvlink["basis"]["given"])
    a, b = (d["current"]["verify_phases_ms"]["allreduce"] for d in (nvlink, pcie))
    assert a < b  # the same 123 allreduces cost more over PCIe Gen4


def test_plain_numbers_without_a_model_rank_the_draft_count_alone():
    out = run_json("whatif", *ISSUE_27, "--num-draft", "3", "--draft-ms", "3")
    ranking = out
    assert {c["name"] for c in ranking["candidates"]} <= {
        "more_draft_tokens",
        "fewer_draft_tokens",
    }
    assert all(p["num_draft"] > 0 for p in ranking["draft_curve"]["points"])  # no plain rate
    assert ranking["plain_decoding"] is None
    assert any("--baseline-tps" in r for r in out["verdict_parts"]["reasons"])
    assert any("same at any width" in a for a in out["basis"]["assumed"])


@pytest.mark.parametrize(
    "extra,fragment",
    [
        (["--link", "pcie_gen4"], "--link pcie_gen4 needs --hardware"),
        (["--hardware", "h200"], "--hardware needs --model"),
        (["--model", "kimi-k2"], "--model needs --hardware"),
        (["--tp", "8"], "--tp needs --model and --hardware"),
        (["--model", "kimi-k2", "--hardware", "h200"], "--model needs --num-draft"),
        (["--num-draft", "3", "--candidate", "cuda_graph_verify"], "needs a trace"),
    ],
)
def test_plain_numbers_refuse_an_option_they_cannot_use(extra, fragment):
    assert_bad_input(run("whatif", *ISSUE_27, *extra), fragment)


def test_a_verify_below_the_roofline_is_refused():
    args = ["--verify-ms", "1", "--accept-len", "2", *GIVEN, "--num-draft", "3"]
    assert_bad_input(run("whatif", *args), "--verify-ms 1 is below what Kimi-K2 needs")


def test_every_ratio_of_plain_numbers_says_what_it_is_over():
    """The issue: "walltime improvement 1.674x" above "speedup 0.680x", with nothing to say
    what each is relative to."""
    args = ("whatif", "--verify-ms", "30", "--alpha", "0.7", "--num-draft", "3")
    args += ("--draft-cost-ratio", "0.05", "--baseline-tps", "82")
    data, shown = run_json(*args), run(*args, "--details", env={"COLUMNS": "250"})
    over = data["relative_to"]
    assert "82.0 tok/s" in over["speedup"] and "--baseline-tps" in over["speedup"]
    assert "today's cycle" in over["gain"]
    assert "Thm 3.8" in data["leviathan"]["relative_to"]
    assert f"{data['current']['speedup']:.3f}x" in shown.stdout
    speedup_row = next(line for line in shown.stdout.splitlines() if "speedup" in line)
    assert "over plain decoding at 82.0 tok/s" in speedup_row
    walltime_row = next(line for line in shown.stdout.splitlines() if "walltime" in line)
    assert "over plain decoding in Thm 3.8's cost model" in walltime_row


def test_the_plain_draft_curve_agrees_with_leviathans_optimal_k():
    """Without a model the verify costs the same at any width, Thm 3.8's cost model: the
    draft-count curve's tokens/s at each k is the theorem's walltime improvement over one
    verify per token, so its best k is the theorem's optimal one."""
    args = ("whatif", "--verify-ms", "30", "--alpha", "0.7", "--num-draft", "3")
    data = run_json(*args, "--draft-cost-ratio", "0.05")
    lev, curve = data["leviathan"], data["draft_curve"]
    best = max(curve["points"], key=lambda p: p["tokens_per_s"])
    assert best["num_draft"] == lev["optimal_num_draft"]
    assert best["tokens_per_s"] * 30 / 1000 == pytest.approx(lev["optimal_walltime_improvement"])
    assert {p["verify_source"] for p in curve["points"]} == {"today", "as today"}


@pytest.mark.parametrize(
    "extra,fragment",
    [
        (["--width", "4"], "--width is about a trace's steps"),
        (["--whole-trace"], "--whole-trace is about a trace's steps"),
        (["--context", "4096"], "--context needs --num-draft"),
        (["--num-draft", "3", "--context", "4096"], "--context needs --model and --hardware"),
        (["--drafter-gain", "0.5"], "--drafter-gain needs --num-draft"),
    ],
)
def test_plain_numbers_refuse_a_trace_option_or_one_without_its_ranking(extra, fragment):
    assert_bad_input(run("whatif", *ISSUE_27, *extra), fragment)


def test_a_trace_ranking_says_what_its_speedup_and_gains_are_over():
    data = run_json("whatif", str(ROOT / "traces/workload-dense-eager"))
    over, cur = data["relative_to"], data["current"]
    assert f"{cur['decode_ms']:.3f} ms per step" in over["speedup"]
    assert data["plain_decoding"]["source"] in over["speedup"]
    assert f"{cur['tokens_per_s']:.1f} tok/s" in over["gain"]
    shown = run(
        "whatif", str(ROOT / "traces/workload-dense-eager"), "--details", env={"COLUMNS": "250"}
    )
    assert f"speedup {cur['speedup']:.2f}x over plain decoding at" in shown.stdout
    assert "gain over today" in shown.stdout
