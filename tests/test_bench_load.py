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
