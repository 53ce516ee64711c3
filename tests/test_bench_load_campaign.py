"""The load campaign's H200 measurements (issue 32, item 6): every configuration asked was
measured in two processes, the README's table is the campaign's own table of the committed
measurements, and the batched program reports what it ran, one batch at a time."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench/results/load_mha_h200"
sys.path.insert(0, str(ROOT / "bench"))

import bench_load_campaign as campaign  # noqa: E402


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def test_every_context_batch_and_k_is_measured_in_two_processes():
    rows = campaign.rows(RESULTS)
    asked = {
        (c, b, k)
        for c in campaign.CONTEXTS
        for b in ints(campaign.BATCHES)
        for k in ints(campaign.KS)
    }
    assert {(r["context"], r["batch"], r["k"]) for r in rows} == asked
    for r in rows:
        assert r["processes"] == [f"M{r['context']}a", f"M{r['context']}b"]
        assert all(len(rounds) == 2 for rounds in r["tok_s_per_request_rounds"].values())


def test_the_readme_table_is_the_campaign_table_of_the_committed_measurements():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/bench_load_campaign.py"), "--table", str(RESULTS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    per_context = done.stdout.split("\n| context |")[0]
    lines = re.findall(r"^\| \d+ \|.*$", per_context, re.M)
    assert len(lines) == 2 * len(ints(campaign.BATCHES))
    readme = (ROOT / "bench/README.md").read_text().splitlines()
    assert [line for line in lines if line not in readme] == []


def test_the_program_measures_each_batch_in_turn_and_reports_its_configuration(tmp_path):
    out = tmp_path / "r.json"
    tiny = ["--device", "cpu", "--layers", "1", "--hidden", "64", "--heads", "2", "--kv-heads"]
    tiny += ["2", "--intermediate", "128", "--vocab", "100", "--draft-hidden", "32"]
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/programs/run_hf_chain.py"),
            *tiny,
            "--mode",
            "graph",
            "--batch",
            "1,3",
            "--num-draft",
            "0,2",
            "--context",
            "24",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--rounds",
            "2",
            "--out",
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert [(r["batch"], r["num_draft"], r["context"]) for r in doc["runs"]] == [
        (1, 0, 24), (1, 2, 24), (3, 0, 24), (3, 2, 24),
    ]  # fmt: skip
    assert all(len(r["round_tokens_per_s"]) == 2 for r in doc["runs"])
    assert (doc["context"], doc["kv_heads"], doc["mode"], doc["batch"]) == (24, 2, "graph", 3)
    events = re.findall(r"hf_chain: (forward \w+ width=\d+|released) batch=(\d+)", done.stderr)
    batches = [batch for _, batch in events]
    released = [batch for event, batch in events if event == "released"]
    assert released == ["1", "3"]  # each batch's caches and graphs freed before the next's made
    assert batches == sorted(batches, key=int) and batches.index("3") > batches.index("1") + 1
    assert events[batches.index("3") - 1] == ("released", "1")
