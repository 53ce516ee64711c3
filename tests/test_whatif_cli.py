"""`verifyprof whatif` end to end: the real entry (`cli.main`, in-process), real breakdowns, exit
codes and one-line errors. The console script as a real process: tests/test_cli_smoke.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import Ran, verifyprof
from conftest import PUBLIC  # tests/data/public: copies of the shared public traces

ROOT = Path(__file__).resolve().parents[1]

B200 = PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"
needs_b200 = pytest.mark.public_traces


def run(*args: str, env: dict | None = None) -> Ran:
    return verifyprof(*args, env=env)


def run_json(*args: str, env: dict | None = None) -> dict:
    proc = run(*args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_bad_input(proc: Ran, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verifyprof: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]


# ---- plain numbers ------------------------------------------------------------------------


def test_15_ms_verify_at_accept_2_against_82_tok_s():
    out = run_json("whatif", "--verify-ms", "15", "--accept-len", "2.0", "--baseline-tps", "82")
    assert out["current"]["cycle_ms"] == 15.0 and out["current"]["accept_len"] == 2.0
    assert round(out["current"]["tokens_per_s"], 1) == 133.3
    assert round(out["current"]["speedup"], 2) == 1.63
    assert round(out["current"]["cycle_cost_decode_steps"], 2) == 1.23
    assert round(out["current"]["break_even_verify_ms"], 2) == 24.39
    assert round(out["current"]["break_even_accept_len"], 2) == 1.23


def test_plain_numbers_print_a_readable_table():
    proc = run("whatif", "--verify-ms", "15", "--accept-len", "2.0", "--baseline-tps", "82")
    assert proc.returncode == 0
    assert (
        "133.3" in proc.stdout and "1.626x (+62.6%)" in proc.stdout and "24.390 ms" in proc.stdout
    )


def test_decode_ms_is_the_same_baseline_as_tokens_per_second():
    a = run_json(
        "whatif", "--verify-ms", "15", "--accept-len", "2.0", "--decode-ms", str(1000 / 82)
    )
    assert a["current"]["speedup"] == pytest.approx(1.626, abs=1e-3)


def test_draft_overhead_and_batch_enter_the_cycle():
    out = run_json(
        "whatif",
        "--verify-ms",
        "15",
        "--accept-len",
        "2.0",
        "--draft-ms",
        "3",
        "--overhead-ms",
        "2",
        "--batch",
        "4",
    )
    assert out["current"]["cycle_ms"] == 20.0
    assert out["current"]["tokens_per_s"] == pytest.approx(100.0)
    assert out["current"]["batch_tokens_per_s"] == pytest.approx(400.0)


def test_alpha_and_num_draft_give_eq_1_accept_length():
    out = run_json("whatif", "--verify-ms", "10", "--alpha", "0.8", "--num-draft", "5")
    assert round(out["current"]["accept_len"], 2) == 3.69
    assert out["leviathan"]["expected_tokens"] == out["current"]["accept_len"]


def test_draft_cost_ratio_gives_thm_3_8_and_the_optimal_k():
    out = run_json("whatif", "--alpha", "0.75", "--num-draft", "7", "--draft-cost-ratio", "0.02")
    lev = out["leviathan"]
    assert f"{lev['walltime_improvement']:.3f}" == "3.157"
    assert lev["optimal_num_draft"] == 8 or lev["optimal_num_draft"] == 9
    assert lev["optimal_walltime_improvement"] >= lev["walltime_improvement"]


def test_optimal_k_matches_the_reference_grid_cell():
    lev = run_json("whatif", "--alpha", "0.8", "--num-draft", "4", "--draft-cost-ratio", "0.05")[
        "leviathan"
    ]
    assert (lev["optimal_num_draft"], f"{lev['optimal_walltime_improvement']:.2f}") == (8, "3.09")


def test_survival_curve_gives_accept_length_at_every_depth():
    out = run_json("whatif", "--verify-ms", "10", "--survival", "0.85,0.67,0.51,0.36,0.31")
    assert [round(x, 2) for x in out["survival"]["accept_len_by_num_draft"]] == [
        1.85,
        2.52,
        3.03,
        3.39,
        3.70,
    ]
    assert round(out["current"]["accept_len"], 2) == 3.70


def test_survival_truncated_by_num_draft():
    out = run_json(
        "whatif", "--verify-ms", "10", "--survival", "0.85,0.67,0.51,0.36,0.31", "--num-draft", "2"
    )
    assert round(out["current"]["accept_len"], 2) == 2.52


# ---- bad input: one line, exit code 2 -----------------------------------------------------


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--verify-ms", "0", "--accept-len", "2"], "--verify-ms must be positive"),
        (["--verify-ms", "-15", "--accept-len", "2"], "--verify-ms must be positive"),
        (["--verify-ms", "15", "--accept-len", "0.5"], "--accept-len must be >= 1"),
        (
            ["--verify-ms", "15", "--alpha", "1.0", "--num-draft", "3"],
            "alpha (acceptance rate) must be in [0, 1)",
        ),
        (
            ["--verify-ms", "15", "--alpha", "-0.2", "--num-draft", "3"],
            "alpha (acceptance rate) must be in [0, 1)",
        ),
        (
            ["--verify-ms", "15", "--accept-len", "2", "--draft-ms", "-1"],
            "--draft-ms must not be negative",
        ),
        (
            ["--verify-ms", "15", "--accept-len", "2", "--overhead-ms", "-0.5"],
            "--overhead-ms must not be negative",
        ),
        (
            ["--verify-ms", "15", "--accept-len", "2", "--decode-ms", "0"],
            "--decode-ms must be positive",
        ),
        (
            ["--verify-ms", "15", "--accept-len", "2", "--baseline-tps", "-82"],
            "--baseline-tps must be positive",
        ),
        (["--verify-ms", "15", "--accept-len", "2", "--batch", "0"], "--batch must be >= 1"),
        (["--verify-ms", "15", "--alpha", "0.7"], "--alpha needs --num-draft"),
        (
            ["--verify-ms", "15", "--accept-len", "2", "--alpha", "0.7", "--num-draft", "3"],
            "give one of",
        ),
        (["--verify-ms", "15", "--survival", "0.5,0.7"], "must not increase"),
        (["--verify-ms", "15"], "accept length unknown"),
        (["--accept-len", "2"], "give --verify-ms"),
        (
            ["--draft-cost-ratio", "0.1", "--verify-ms", "15", "--accept-len", "2"],
            "--draft-cost-ratio needs --alpha",
        ),
    ],
)
def test_bad_numbers_are_one_line_and_exit_2(args, fragment):
    assert_bad_input(run("whatif", *args), fragment)


# ---- from a breakdown ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def b200_json(tmp_path_factory, b200_whole_breakdown_json) -> Path:
    path = tmp_path_factory.mktemp("b200") / "breakdown.json"
    path.write_text(b200_whole_breakdown_json)
    return path


MODEL_ARGS = (
    "--accept-len",
    "2.5",
    "--num-draft",
    "3",
    "--width",
    "888",
    "--tp",
    "8",
    "--model",
    "gpt-oss-120b",
)


@needs_b200
def test_from_breakdown_json_ranks_candidates_best_first(b200_json):
    out = run_json("whatif", "--from", str(b200_json), *MODEL_ARGS)
    assert set(out) >= {"current", "candidates", "skipped"}
    cands = out["candidates"]
    assert len(cands) >= 6
    for cand in cands:
        assert {"name", "verify_ms", "tokens_per_s", "gain", "assumptions"} <= set(cand)
        assert cand["assumptions"]
    rates = [c["tokens_per_s"] for c in cands]
    assert rates == sorted(rates, reverse=True)
    assert [c["name"] for c in cands[:2]] == ["graph_fusion_verify", "cuda_graph_verify"]
    assert out["current"]["tokens_per_s"] == pytest.approx(2.5 / out["current"]["cycle_ms"] * 1e3)


@needs_b200
def test_from_a_trace_breaks_it_down_itself_with_the_same_result(b200_json):
    from_json = run_json("whatif", "--from", str(b200_json), *MODEL_ARGS)
    from_trace = run_json("whatif", "--from", str(B200), "--whole-trace", *MODEL_ARGS)
    assert from_trace["candidates"] == from_json["candidates"]


@needs_b200
def test_from_breakdown_prints_table_and_assumptions(b200_json):
    proc = run("whatif", "--from", str(b200_json), *MODEL_ARGS, "--details")
    assert proc.returncode == 0, proc.stderr
    assert (
        "cuda_graph_verify" in proc.stdout
        and "Assumptions" in proc.stdout
        and "not applicable" in proc.stdout
    )


@needs_b200
def test_accept_length_from_a_capture_manifest(b200_json, tmp_path):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "schema": "verifyprof.capture/1",
                "options": {"accept_len": 9.9},
                "results": {"accept_len": 2.4, "tokens_per_s": 50.0},
            }
        )
    )
    out = run_json("whatif", "--from", str(b200_json), "--manifest", str(manifest))
    assert out["current"]["accept_len"] == 2.4
    assert any("manifest.json" in note for note in out["current"]["notes"])


@needs_b200
def test_accept_length_and_baseline_from_a_workload_summary(b200_json, tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(
        json.dumps(
            {
                "schema": "verifyprof.workload/1",
                "config": {
                    "run": {"num_draft": 3},
                    "simulated_acceptance": {"survival": [0.8, 0.6, 0.4]},
                },
                "runs": [
                    {
                        "kind": "spec",
                        "mode": "eager",
                        "accept_len": 2.8,
                        "tokens_per_s_per_request": 30.0,
                    },
                    {
                        "kind": "decode",
                        "mode": "eager",
                        "decode_ms": {"n": 40, "mean": 50.0, "median": 49.0},
                    },
                ],
            }
        )
    )
    out = run_json("whatif", "--from", str(b200_json), "--manifest", str(summary))
    assert out["current"]["accept_len"] == pytest.approx(2.8)  # 1 + 0.8 + 0.6 + 0.4
    assert out["current"]["decode_ms"] == 50.0 and out["current"]["speedup"] is not None


@needs_b200
def test_breakdown_with_no_steps_is_one_line_exit_2(b200_json, tmp_path):
    data = json.loads(b200_json.read_text())
    data["steps"] = []
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(data))
    assert_bad_input(
        run("whatif", "--from", str(empty), "--accept-len", "2"),
        "breakdown has no steps",
        str(empty),
    )


@needs_b200
def test_breakdown_without_verify_steps_names_the_steps_it_has(b200_json):
    assert_bad_input(
        run("whatif", "--from", str(b200_json), "--accept-len", "2", "--step", "verifyprof.verify"),
        "no steps named 'verifyprof.verify'",
        "whole_trace",
    )


@needs_b200
def test_trace_without_matching_ranges_is_one_line_exit_2():
    assert_bad_input(run("whatif", "--from", str(B200), "--accept-len", "2"), "no range is a step")


@needs_b200
def test_from_breakdown_needs_an_accept_length(b200_json):
    assert_bad_input(run("whatif", "--from", str(b200_json)), "accept length unknown")


def test_from_a_file_that_is_not_a_trace_or_breakdown(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello")
    assert_bad_input(run("whatif", "--from", str(junk), "--accept-len", "2"), str(junk))


def test_from_a_missing_file():
    assert_bad_input(
        run("whatif", "--from", "/nonexistent/breakdown.json", "--accept-len", "2"), "no such file"
    )


def test_breakdown_json_of_another_schema(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something/1", "steps": [{"name": "x"}]}))
    assert_bad_input(
        run("whatif", "--from", str(other), "--accept-len", "2"), "not a verifyprof breakdown"
    )


def test_manifest_that_is_not_json(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text("{not json")
    assert_bad_input(
        run("whatif", "--verify-ms", "15", "--manifest", str(bad)),
        "manifest is not valid JSON",
        str(bad),
    )


# ---- data files: built-in, given, user dir --------------------------------------------------


def test_unknown_hardware_lists_the_known_ones(tmp_path):
    b = tmp_path / "b.json"
    b.write_text("{}")
    proc = run("whatif", "--from", str(b), "--accept-len", "2", "--hardware", "tpu-v9")
    assert_bad_input(proc)  # the breakdown is checked first: bad file beats bad name


@needs_b200
def test_hardware_by_name_and_unknown_name(b200_json):
    assert_bad_input(
        run("whatif", "--from", str(b200_json), "--accept-len", "2", "--hardware", "tpu-v9"),
        "unknown hardware 'tpu-v9'",
        "h200",
    )


@needs_b200
def test_user_hardware_file_given_by_path(b200_json, tmp_path):
    mine = tmp_path / "mybox.toml"
    mine.write_text(
        (ROOT / "verifyprof/data/hardware/b200.toml")
        .read_text()
        .replace('name = "B200"', 'name = "My B200"')
        .replace("graph_node_us = 1.0", "graph_node_us = 0.0")
    )
    out = run_json(
        "whatif",
        "--from",
        str(b200_json),
        "--accept-len",
        "2",
        "--hardware",
        str(mine),
        "--candidate",
        "cuda_graph_verify",
    )
    cand = out["candidates"][0]
    assert "My B200" in " ".join(cand["assumptions"])
    v = out["current"]
    idle = v["verify_phases_ms"]["launch_gap"] + v["verify_phases_ms"].get("host_wait", 0.0)
    assert cand["verify_ms"] == pytest.approx(
        v["verify_ms"] - idle + 0.003
    )  # graph launch 8 us replaces a 5 us launch


@needs_b200
def test_user_data_dir_adds_a_model_by_name(b200_json, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny-moe.toml").write_text(
        'name = "tiny-moe"\nlayers = 36\nhidden = 2880\nvocab = 1000\n'
        '[attention]\nkind = "gqa"\nheads = 64\nkv_heads = 8\nhead_dim = 64\n'
        "[moe]\nexperts = 128\ntop_k = 4\nintermediate = 2880\n"
    )
    out = run_json(
        "whatif",
        "--from",
        str(b200_json),
        "--accept-len",
        "2",
        "--width",
        "888",
        "--tp",
        "8",
        "--model",
        "tiny-moe",
        "--candidate",
        "custom_allreduce",
        env={"VERIFYPROF_DATA_DIR": str(tmp_path)},
    )
    # the user's model gives the message size (its hidden 2880); the trace gives the call count
    assert "888 tokens x 2880 x 2 B" in out["candidates"][0]["assumptions"][0]
    assert "tiny-moe" in json.dumps(out)


def test_broken_model_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("layers = [")
    proc = run(
        "whatif", "--from", str(B200), "--whole-trace", "--accept-len", "2", "--model", str(bad)
    )
    assert_bad_input(proc, str(bad), "not valid TOML")


def test_model_file_missing_a_field_names_it(tmp_path):
    bad = tmp_path / "short.toml"
    bad.write_text('name = "short"\nlayers = 2\n')
    proc = run(
        "whatif", "--from", str(B200), "--whole-trace", "--accept-len", "2", "--model", str(bad)
    )
    assert_bad_input(proc, str(bad), "missing field")


WORKLOAD = ROOT / "traces" / "workload-dense-eager"


def test_whatif_on_the_h200_eager_workload_trace_ranks_graphs_first():
    out = run_json(
        "whatif",
        "--from",
        str(WORKLOAD / "trace.sqlite.gz"),
        "--manifest",
        str(WORKLOAD / "manifest.json"),
        "--model",
        "workload",
        "--context",
        "704",
    )
    cur = out["current"]
    assert (cur["mode"], cur["width"], cur["hardware"], cur["model"]) == (
        "eager",
        4,
        "H200 SXM",
        "verifyprof-workload",
    )
    assert cur["accept_len"] == pytest.approx(2.025)  # measured by the workload, from the manifest
    assert cur["speedup"] is not None  # baseline from the trace's decode ranges
    names = [c["name"] for c in out["candidates"]]
    assert names[0] == "torch_compile"  # every forward graphed and fused: verify and draft
    assert names.index("graph_fusion_verify") < names.index("cuda_graph_verify")
    assert {s["name"] for s in out["skipped"]} >= {
        "custom_allreduce",
        "allreduce_fusion",
    }  # one GPU: no allreduce


def test_a_billion_drafts_is_one_line_not_an_out_of_memory():
    done = run("whatif", "--alpha", "0.7", "--num-draft", "1000000000", "--verify-ms", "10")
    assert (
        done.returncode == 2
        and done.stderr.strip() == "verifyprof: error: --num-draft must be <= 256, got 1000000000"
    )


def test_accept_length_above_drafts_plus_one_is_refused():
    done = run("whatif", "--accept-len", "9", "--num-draft", "3", "--verify-ms", "10")
    assert done.returncode == 2 and "cannot exceed --num-draft + 1 = 4" in done.stderr


def test_an_accept_length_given_over_a_manifest_says_what_the_manifest_measured():
    capture = ROOT / "traces" / "capture-workload-hooks"
    ran = verifyprof(
        "whatif",
        "--from",
        str(capture / "capture.sqlite.gz"),
        "--manifest",
        str(capture / "manifest.json"),
        "--accept-len",
        "1.5",
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    notes = json.loads(ran.stdout)["current"]["notes"]
    assert any(
        "from --accept-len (over 1.93333 measured in" in n and "manifest.json" in n for n in notes
    )


def test_a_width_only_the_sweep_measured_models_the_sweeps_steps_of_that_width():
    """The bundled eager trace's loop verifies 4 tokens; its width sweep also ran 16: --width 16
    models those 8 sweep steps (it used to be an error listing width 4 alone)."""
    ran = verifyprof(
        "whatif",
        "--from",
        str(ROOT / "traces" / "workload-dense-eager" / "trace.sqlite.gz"),
        "--accept-len",
        "2",
        "--width",
        "16",
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    current = json.loads(ran.stdout)["current"]
    assert current["width"] == 16 and current["verify_steps"] == 8
    assert any(
        n.startswith("width 16: only the width sweep's verify steps") for n in current["notes"]
    )


def test_a_draft_cost_ratio_without_draft_ms_costs_the_drafts_as_thm_3_8_does():
    """--draft-cost-ratio c prices each draft at c verify steps: the cycle's tokens/s over one
    token per verify is Leviathan's walltime improvement (it used to be printed beside a free
    draft).
    """
    ran = verifyprof(
        "whatif",
        "--verify-ms",
        "15",
        "--alpha",
        "0.7",
        "--num-draft",
        "4",
        "--draft-cost-ratio",
        "0.1",
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert data["current"]["draft_ms"] == pytest.approx(4 * 0.1 * 15)
    assert data["current"]["tokens_per_s"] * 15 / 1000 == pytest.approx(
        data["leviathan"]["walltime_improvement"]
    )


def test_whatif_takes_its_source_as_an_argument_like_the_other_commands():
    folder = ROOT / "traces/workload-dense-eager"
    assert run_json("whatif", str(folder)) == run_json("whatif", "--from", str(folder))


def test_whatif_refuses_two_different_sources():
    eager, graph = ROOT / "traces/workload-dense-eager", ROOT / "traces/workload-dense-graph"
    assert_bad_input(
        run("whatif", str(eager), "--from", str(graph)), "two inputs", "captures as arguments"
    )


def test_whatif_refuses_captures_of_one_program_in_two_execution_modes():
    eager, graph = ROOT / "traces/workload-dense-eager", ROOT / "traces/workload-dense-graph"
    assert_bad_input(run("whatif", str(eager), str(graph)), "execution mode", "eager")
