"""A point's rate band carries its anchor's own uncertainty (issues 41 and 42, B6): a capture's
unprofiled rate is the median of a few samples that spread, and every k at that load moves with
it. The point keeps ``band`` (what comparisons between k use) and gains ``anchor_band`` (the
median's standard error) and ``rate_band`` (the two in quadrature), on B6's real captures."""

from __future__ import annotations

import json
import math
from pathlib import Path

from cli_helpers import verifyprof

from verifyprof.contracts.manifest_dilation import median_error

ROOT = Path(__file__).resolve().parents[1]
B6 = ROOT / "bench" / "results" / "external_h100_b6" / "captures-b"
ARGS = ("--model", str(ROOT / "bench/models/gptfast-7b.toml"), "--capture-context", "56")


def _points() -> dict[tuple[int, int], dict]:
    ran = verifyprof("whatif", str(B6), *ARGS, "--json")
    assert ran.returncode == 0, ran.stderr
    rows = json.loads(ran.stdout)["load_curve"]["contexts"][0]["rows"]
    return {(r["batch"], p["num_draft"]): p for r in rows for p in r["points"]}


def test_the_median_error_is_the_mad_based_standard_error_of_a_median():
    samples = [113.7, 146.5, 99.7, 113.2, 151.6, 154.8]  # B6 batch 16's unprofiled samples
    med = 130.1  # (113.7 + 146.5) / 2
    mad = 19.2  # median of |x - med| (16.4, 16.4, 16.9, 21.5, 24.7, 30.4)
    assert math.isclose(
        median_error(samples), 1.2533 * 1.4826 * mad / med / math.sqrt(6), rel_tol=1e-3
    )


def test_fewer_than_three_rates_give_no_median_error():
    assert median_error([150.0, 100.0]) == 0.0


def test_every_point_resting_on_a_capture_carries_that_captures_anchor_error():
    manifest = json.loads((B6 / "batch-16" / "manifest.json").read_text())
    expected = median_error(manifest["dilation"]["samples"]["unprofiled"])
    points = _points()
    for k in range(7):  # every k at the captured load, plain decoding included
        assert points[(16, k)]["anchor_band"] == round(expected, 4)


def test_the_rate_band_is_the_band_and_the_anchor_error_in_quadrature():
    for p in _points().values():
        assert math.isclose(p["rate_band"], math.hypot(p["band"], p["anchor_band"]), abs_tol=1e-4)


def test_a_measured_point_keeps_its_own_band_for_comparisons_between_k():
    point = _points()[(16, 4)]
    assert point["basis"] == "measured"
    assert point["band"] == 0.035 and point["rate_band"] > 0.1


def test_todays_draft_count_curve_carries_the_same_anchor_error():
    ran = verifyprof("whatif", str(B6), *ARGS, "--json")
    points = json.loads(ran.stdout)["draft_curve"]["points"]
    manifest = json.loads((B6 / "batch-1" / "manifest.json").read_text())
    expected = round(median_error(manifest["dilation"]["samples"]["unprofiled"]), 4)
    assert {p["anchor_band"] for p in points} == {expected}
    assert all(p["rate_band"] >= p["band"] for p in points)


def test_one_baseline_runs_samples_are_shown_as_an_anchoring_rate():
    """B7's batch-4 capture: one baseline run of six samples (aggregate rates, four rows). Its
    anchoring rates were shown nowhere (the sources read only several runs' rates); now the
    samples are, per request, with n, median and spread (issue 42 item 5)."""
    b7 = ROOT / "bench/results/external_h100_b7/captures-b/batch-4"
    ran = verifyprof("whatif", str(b7), "--json")
    assert ran.returncode == 0, ran.stderr
    current = json.loads(ran.stdout)["current"]
    notes = [n for n in current["notes"] if n.startswith("anchoring rate")]
    assert notes == [
        "anchoring rate: speculating, the baseline run's per-sample rates (--baseline-run,"
        " unprofiled): n=6, median 22.7 tok/s, spread 51.6% (13.5, 22.9, 23.7, 25.2, 21.5, 22.5)"
    ]


def test_the_console_shows_the_rate_band_beside_the_best_rate():
    """The best k's line is a rate a user holds against a measurement: its band is the rate's
    (``rate_band``); "within the between-k band" still compares k by ``band``."""
    curve = json.loads(verifyprof("whatif", str(B6), *ARGS, "--json").stdout)["draft_curve"]
    best = next(p for p in curve["points"] if p["num_draft"] == curve["best_num_draft"])
    assert f"{best['rate_band']:.0%}" != f"{best['band']:.0%}"  # the two differ here
    shown = verifyprof("whatif", str(B6), *ARGS, env={"COLUMNS": "200"})
    line = next(x for x in shown.stdout.splitlines() if x.startswith("Best draft count"))
    assert f"+/-{best['rate_band']:.0%}," in line and f"+/-{best['band']:.0%}" not in line


def test_the_load_rows_carry_their_best_rates_band_and_the_console_words_it_so():
    curve = json.loads(verifyprof("whatif", str(B6), *ARGS, "--json").stdout)["load_curve"]
    rows = curve["contexts"][0]["rows"]
    for row in rows:
        best = next(p for p in row["points"] if p["num_draft"] == row["best_num_draft"])
        assert row["rate_band"] == best["rate_band"] and row["band"] == best["band"]
    start = curve["contexts"][0]["extrapolated_from_batch"]
    widest = max(r["rate_band"] for r in rows if r["batch"] >= start)
    shown = verifyprof("whatif", str(B6), *ARGS, env={"COLUMNS": "200"}).stdout
    assert f"batch {start} and up extrapolated (up to +/-{widest:.0%})" in shown
