"""The seed bench's committed H200 results are golden (issue 26): predicting from the committed
breakdowns and manifests of its captures gives the committed table line for line, so a model
change that moves a checked prediction shows in this diff (regenerate ``seed.log`` on purpose)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench/results/seed_h200"


def test_the_committed_seed_predictions_are_reproduced_from_their_inputs():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/bench_seed.py"), "--from", str(RESULTS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: a target missed, which the table says
    assert done.stdout == (RESULTS / "seed.log").read_text()


def test_the_seed_verdict_turns_speculation_off_as_measured():
    """The seed's own configuration (drafter graphed, verify eager): plain decoding predicted in
    the drafter's mode beats speculating, as the unprofiled processes measured."""
    doc = json.loads((RESULTS / "seed.json").read_text())
    seed = next(v for v in doc["verdicts"] if v["trace"] == "C1")
    assert seed["speculate"] is False and seed["measured_speculate"] is False
    assert "replayed as a CUDA graph" in seed["plain_source"]
