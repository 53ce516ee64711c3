"""The load-curve bench (``bench/bench_load.py``): its committed H200 results are golden
(predicting from the committed breakdowns and manifests gives the committed table line for
line), and it predicts from a single batch-1 capture of the project's workload."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "bench/results").glob("load_h200*"))


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench/bench_load.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


@pytest.mark.parametrize("folder", RESULTS, ids=[f.name for f in RESULTS])
def test_the_committed_h200_load_predictions_are_reproduced_from_their_inputs(folder):
    done = bench("--from", str(folder.relative_to(ROOT)))
    assert done.returncode in (0, 1), done.stderr  # 1: a target missed, which the log says
    assert done.stdout == (folder / "load.log").read_text()


def test_one_batch_1_capture_gives_every_batch_and_k_asked():
    done = bench(
        "--from", "traces/workload-dense-graph", "--model", "workload",
        "--batches", "1,4,16,64", "--ks", "0,1,2,4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = re.findall(
        r"^  context (\d+) batch (\d+) k=(\d): ([\d.]+) tok/s per request, (\w+)", done.stdout, re.M
    )
    assert {(int(c), int(b), int(k)) for c, b, k, _, _ in rows} == {
        (c, b, k) for c in (512, 2048) for b in (1, 4, 16, 64) for k in (0, 1, 2, 4)
    }
    for c, b, k, _, basis in rows:  # one capture at batch 1, context 512, k = 3 (and its decode)
        if (c, b) != ("512", "1"):
            assert basis in ("extrapolated", "roofline"), (c, b, k)
    assert ("512", "1", "0") in {(c, b, k) for c, b, k, _, basis in rows if basis == "measured"}
    assert "captures: context 512 batch 1 k 3" in done.stdout


CAMPAIGNS = sorted((ROOT / "bench/results").glob("load_mha_h200*"))


def test_the_three_alike_load_campaigns_keep_one_raw_capture_and_every_other_as_its_breakdown():
    """Issue 43 (the tracked tree <= 60 MB): one trace for the three campaigns of one program,
    the one the example report draws (bench/README.md, bench/summarise_captures.py)."""
    raw, summarised = [], []
    for folder in CAMPAIGNS:
        for capture in sorted(d for d in folder.iterdir() if (d / "manifest.json").is_file()):
            name = str(capture.relative_to(ROOT / "bench/results"))
            traced = (capture / "capture.sqlite.gz").is_file()
            (raw if traced else summarised).append(name)
            assert traced or (capture / "breakdown.json").is_file(), name
    assert raw == ["load_mha_h200_2/C1"]
    assert len(summarised) == 10


def test_the_third_campaigns_predictions_are_reproduced_from_its_breakdowns():
    """C1, C8 and C64 as their breakdowns (their traces gone): the committed log, line for line,
    as the traces gave it."""
    folder = "bench/results/load_mha_h200_3"
    done = bench(
        "--from", folder, "--captures", "C1,C8,C64", "--campaign",
        "--model", "bench/models/hf-chain-7b-mha.toml", "--batches", "1,2,4,8,16,32,64",
        "--ks", "0,1,2,3,4,5,6", "--contexts", "512",
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout == (ROOT / folder / "predictions/from-C1-C8-C64.log").read_text()
