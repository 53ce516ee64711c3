"""An MoE's routing kernels (moe_aux: top-k gating, the sort of token-expert pairs, scans) over
tokens per forward (issue 42, the project's moe_spec on an H100: bench/results/moe_spec_h100).
Their time goes by a step where the sort switches kernel (past 128 pairs: 22 tokens at top-6), so
a verify moved between the captured batches takes the routing measured at its own tokens, not a
line through the captures that spreads the step over every load between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifyprof.model.cycle.width_fit import fit_widths
from verifyprof.model.decision.load_points import state_at
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.model.fixes.batch import at_load_measured
from verifyprof.pipeline import open_run

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "bench/results/moe_spec_h100/captures"
MODEL = str(ROOT / "bench/models/moe-spec-v2lite.toml")


@pytest.fixture(scope="module")
def measured():
    """Both captures (batch 1 and 8, k = 4, context 512) as whatif takes the folder."""
    o = WhatifOptions(model=MODEL, batches=(1, 2, 4, 8), contexts=(512.0,))
    run = open_run([str(CAPTURES)], o, captures=True)  # a --batches folder: its captures
    return run.joined.prepared.scenario.measured


def test_one_phases_curve_may_step_past_proportional_growth_where_a_kernel_switches():
    # the batch-8 sweep's routing at 16 and 24 tokens: the sort's second kernel triples it
    fit = fit_widths({16: 0.545, 24: 1.019}, proportional=False)
    assert fit.at(24)[0] == pytest.approx(1.019)


def test_the_sweep_profile_carries_its_own_moe_routing_per_width(measured):
    by_batch = {c.batch: c.profile.width_routing for c in measured.captures}
    assert sorted(by_batch[8]) == [1, 2, 3, 5, 7]
    # 8 requests x 2 tokens x top-6 = 96 pairs sorted by the small kernel, x 3 = 144 by the large
    assert by_batch[8][3] > 1.6 * by_batch[8][2]


def test_a_verify_moved_between_the_captured_batches_takes_the_routing_of_its_own_tokens(
    measured,
):
    # batch 4 with 2 drafts: 12 tokens, 72 pairs, the small sort the batch-8 sweep measured at 8
    # and 16 tokens; the batch-8 capture it moves from sorts 24 tokens' pairs with the large one
    anchor = next(c for c in measured.captures if c.batch == 8)
    st = state_at(measured, anchor, 2, {})
    moved, *_ = at_load_measured(measured, st.profile, st.s, st.width, 4, 512.0)
    small = anchor.profile.width_routing[2]  # 16 tokens
    assert moved.verify.phases_ms["moe_aux"] == pytest.approx(small, rel=0.1)  # before: ~1 ms
