"""bench/moe_alpha.py: the simulated acceptance rate for issue 42's MoE proof is chosen from
measured cycle times so that, where some candidate does, k = 1 or 2 beats plain decoding and k = 4
loses at every batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import moe_alpha  # noqa: E402


def steep_sweep(path: Path) -> Path:
    """Cycle times of a verify whose expert reads grow with the distinct experts touched (64
    experts, top-6, 0.12 ms each), a 3 ms fixed step and 0.6 ms a draft: alphas 0.40 and 0.45
    make k = 1 win and k = 4 lose at batch 1 and 8, higher ones let k >= 2 win at batch 8."""
    runs = []
    for batch in (1, 8):
        for k in range(7):
            union = 64 * (1 - (1 - 6 / 64) ** (batch * (k + 1)))
            ms = 3.0 + 0.12 * union + 0.6 * k
            runs.append({"batch": batch, "num_draft": k, "cycle_ms": ms})
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_the_chosen_alpha_makes_small_k_win_and_k4_lose_at_every_batch(tmp_path):
    sweep = steep_sweep(tmp_path / "preflight.json")
    cycle = moe_alpha.cycle_ms(sweep)
    text, alpha = moe_alpha.report(sweep)
    for batch in (1, 8):
        plain = cycle[(batch, 0)]
        speedup = {k: moe_alpha.tau(alpha, k) * plain / cycle[(batch, k)] for k in range(7)}
        assert max(speedup[1], speedup[2]) >= 1.03 and speedup[4] < 1.0, (batch, alpha, speedup)
    assert f"chosen alpha: {alpha:.2f}" in text
