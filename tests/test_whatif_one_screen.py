"""whatif's default console is the decision on one screen (issue 33): at most 40 lines at 80
columns, the verdict, today against plain decoding, the plan, the best k and the load answer,
each with its basis; server commands whole on their own lines; no line padded; the rest behind
--details, which still holds every table."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import verifyprof
from conftest import OWN_TRACES

TRACES = ["workload-dense-eager", "workload-dense-compile", "capture-hf-assisted"]
CAPTURES = sorted(  # every bundled capture that holds a trace
    p.name
    for p in OWN_TRACES.iterdir()
    if (p / "manifest.json").is_file() and any(p.glob("*.sqlite*")) | any(p.glob("*.nsys-rep"))
)
COMMANDS = ("      --", "      no --", "    verifyprof capture ")  # a command prints whole, to copy


@pytest.mark.parametrize("trace", TRACES)
def test_default_whatif_is_the_decision_in_40_lines_of_80_columns(trace):
    shown = verifyprof("whatif", str(OWN_TRACES / trace), env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) <= 40
    assert all(len(line) <= 80 for line in lines if not line.startswith(COMMANDS))
    assert not [line for line in lines if line != line.rstrip()]
    data = json.loads(verifyprof("whatif", str(OWN_TRACES / trace), "--json").stdout)
    text = shown.stdout
    assert lines[0].startswith("Verdict: ")
    assert f"speculating {data['current']['tokens_per_s']:.1f} tok/s (measured" in text
    assert f"plain decoding {data['plain_decoding']['tokens_per_s']:.1f} tok/s (" in text
    assert all(f"{step['tokens_per_s']:.1f}" in text for step in data["plan"][:2])
    best = data["draft_curve"]["best_num_draft"]
    assert re.search(rf"^Best draft count( today)?: k={best},", text, re.M)
    assert "--details" in lines[-2] + lines[-1]


@pytest.mark.parametrize("trace", CAPTURES)
def test_every_bundled_capture_fits_one_screen_unpadded(trace):
    lines = verifyprof("whatif", str(OWN_TRACES / trace), env={"COLUMNS": "80"}).stdout
    lines = lines.splitlines()
    assert 5 <= len(lines) <= 40
    assert all(len(line) <= 80 for line in lines if not line.startswith(COMMANDS))
    assert not [line for line in lines if line != line.rstrip()]


def test_the_load_answer_gives_each_range_and_its_command_whole():
    path = str(OWN_TRACES / "workload-dense-eager")
    lines = verifyprof("whatif", path, env={"COLUMNS": "80"}).stdout.splitlines()
    load = json.loads(verifyprof("whatif", path, "--json").stdout)["load_curve"]
    today = load["server_settings"]["per_context"][0]
    commands = [line.strip() for line in lines if line.startswith(COMMANDS)]
    for r in today["sglang"]:  # flags, or where the band is too wide the capture measuring it
        assert (r["flags"] or r["measure_command"]) in commands
    if today["vllm_speculative_config"]:
        assert f"--speculative-config '{today['vllm_speculative_config']}'" in commands
    for a, b, k in load["contexts"][0]["ranges"]:
        words = (f"batch {a}-{b} " if b != a else f"batch {a} ") + (
            "plain decoding" if k == 0 else f"k={k}"
        )
        assert words in " ".join(" ".join(lines).split())  # as wrapped


def test_details_restores_every_table_unpadded():
    path = str(OWN_TRACES / "workload-dense-eager")
    shown = verifyprof("whatif", path, "--details", env={"COLUMNS": "80"}).stdout
    for title in ("Plan: fixes stacked", "Draft count:", "Each candidate alone", "Load curve"):
        assert title in shown
    assert not [line for line in shown.splitlines() if line != line.rstrip()]


GIVEN = (
    "--verify-ms", "7.776", "--draft-ms", "2.993", "--accept-len", "1.89", "--num-draft", "2",
    "--baseline-tps", "128.6", "--batch", "1,8,32", "--model", "llama-3-8b",
    "--hardware", "h100-sxm",
)  # fmt: skip


def test_given_numbers_are_called_given_and_no_band_reads_zero():
    shown = verifyprof("whatif", *GIVEN, env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())  # wrapped lines joined
    best = next(line for line in shown.stdout.splitlines() if line.startswith("Best draft"))
    assert "(given" in best and "measured" not in best
    assert "+/-0%" not in text
    assert "extrapolated (the roofline, no band: unmeasured)" in text
    data = json.loads(verifyprof("whatif", *GIVEN, "--json").stdout)
    today = next(p for p in data["draft_curve"]["points"] if p["num_draft"] == 2)
    assert today["basis"] == "given"
    words = [c["basis_words"] for c in data["load_curve"]["contexts"] if c["basis_words"]]
    assert words and all("no band: nothing measured it" in w for w in words)


def test_a_plan_line_whose_cycle_is_shorter_than_its_verify_says_why():
    shown = verifyprof(
        "whatif", str(OWN_TRACES / "capture-hf-assisted"), "--candidate", "cuda_graph_verify",
        "--details", env={"COLUMNS": "100"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    data = json.loads(
        verifyprof(
            "whatif", str(OWN_TRACES / "capture-hf-assisted"), "--candidate",
            "cuda_graph_verify", "--json",
        ).stdout
    )  # fmt: skip
    short = [
        i
        for i, line in enumerate(data["plan"], start=1)
        if line["cycle_ms"] < line["verify_ms"] - 5e-4
    ]
    assert short  # the state this test is about: the race hides part of a verify
    text = " ".join(shown.stdout.split())
    assert f"cycle below its verify on line {short[0]} (" in text
    assert "the host/GPU race hides that much of the verify" in text


@pytest.mark.parametrize("phase", ["verify", "decode"])
def test_step_phase_header_is_words_not_the_regex(phase):
    shown = verifyprof("breakdown", str(OWN_TRACES / "workload-dense-eager"), "--step", phase)
    assert shown.returncode == 0, shown.stderr
    header = next(line for line in shown.stdout.splitlines() if line.startswith("steps:"))
    assert "(?:" not in header and f"every spelling of {phase}" in header


@pytest.mark.parametrize("sweep", ["external_h100_b5", "external_h100_b6"])
def test_a_strangers_batches_folder_fits_40_rows_of_80_columns_commands_included(sweep):
    """gpt-fast's batched fork captured with --batches on an H100 (B5, B6): its capture command
    is ten rows at 80 columns; the measuring captures print as ``capture --again``, one line
    each, so the screen, every line counted by the rows it wraps to, fits 40."""
    root = OWN_TRACES.parent
    folder = root / "bench/results" / sweep / "captures-b"
    model = str(root / "bench/models/gptfast-7b.toml")
    shown = verifyprof("whatif", str(folder), "--model", model, env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    rows = sum(max(1, -(-len(line) // 80)) for line in shown.stdout.splitlines())
    assert rows <= 40
    assert "capture --again" in shown.stdout
