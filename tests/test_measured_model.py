"""Several captures of one program make one model (issue 32), on real H200 captures of
``bench/programs/hf_chain.py --preset 7b`` in CUDA-graph mode (``bench/results/load_h200``: C2 at
batch 1, C3 at batch 8, both k = 4, context 256, each with its width sweep): every point of the
load and draft-count curves says what it rests on, and the summaries agree with their rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import verifyprof

from verifyprof.model.cycle.phase_fit import (
    BASES,
    EXTRAPOLATED,
    INTERPOLATED,
    MEASURED,
    Point,
    UnusableFit,
    step_fit,
)

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "results" / "load_h200"
C2, C3 = RUNS / "C2", RUNS / "C3"
MODEL = ROOT / "bench" / "models" / "hf-chain-7b.toml"
# hf_chain.py ran at its default context, 256, which these older captures do not record: stated
# for each capture (--capture-context), and the load curve's context (--context)
LOAD = (
    "--model", str(MODEL), "--batch", "1,4,8,16,64", "--context", "256",
    "--capture-context", "256",
)  # fmt: skip


def whatif_json(*args: str) -> dict:
    proc = verifyprof("whatif", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def both() -> dict:
    return whatif_json(str(C2), str(C3), *LOAD)


@pytest.fixture(scope="module")
def one() -> dict:
    return whatif_json(str(C2), *LOAD)


def curve(result: dict, context: float = 256.0) -> dict:
    return next(c for c in result["load_curve"]["contexts"] if c["context"] == context)


def point(result: dict, batch: int, k: int) -> dict:
    row = next(r for r in curve(result)["rows"] if r["batch"] == batch)
    return next(p for p in row["points"] if p["num_draft"] == k)


def test_a_configuration_a_capture_measured_is_that_captures_own_cycle(both):
    p = point(both, 8, 4)
    assert p["basis"] == MEASURED and p["from_capture"] == "C3"
    c3 = whatif_json(str(C3), "--model", str(MODEL))
    assert p["tokens_per_s"] == pytest.approx(c3["current"]["tokens_per_s"], rel=1e-9)


def test_every_point_carries_a_basis_and_a_band(both):
    for c in both["load_curve"]["contexts"]:
        for row in c["rows"]:
            assert row["basis"] in BASES
            for p in row["points"]:
                assert p["basis"] in BASES
                assert 0 < p["band"] < 5


def test_a_batch_between_two_captures_is_interpolated_not_extrapolated(both):
    assert point(both, 4, 4)["basis"] == INTERPOLATED


def test_from_one_capture_every_point_past_it_is_marked_extrapolated(one):
    for c in one["load_curve"]["contexts"]:
        for row in c["rows"]:
            for p in row["points"]:
                taken = (row["batch"], c["context"], p["num_draft"]) == (1, 256.0, 4)
                assert (p["basis"] == MEASURED) == taken, (row["batch"], p)
                if (row["batch"], c["context"]) != (1, 256.0):  # past the captured load
                    assert p["basis"] not in (MEASURED, INTERPOLATED), (row["batch"], p)


def test_the_band_grows_with_the_distance_from_the_captures(one):
    bands = [point(one, b, 4)["band"] for b in (1, 4, 16, 64)]
    assert bands == sorted(bands) and bands[-1] > 2 * bands[1]


def test_a_second_capture_narrows_the_band_where_it_measured(one, both):
    assert point(both, 16, 4)["band"] < point(one, 16, 4)["band"]


def test_the_extrapolated_rows_name_the_capture_that_measures_them(both):
    c = curve(both)
    assert c["extrapolated_from_batch"] == 16  # past C3's batch 8
    assert "--batches 64" in c["measure_command"]
    proc = verifyprof("whatif", str(C2), str(C3), *LOAD)
    lines = proc.stdout.splitlines()
    assert any(line.strip() == c["measure_command"] for line in lines)  # whole, copyable


def test_the_best_k_is_a_set_when_other_k_lie_inside_the_band(both):
    for row in curve(both)["rows"]:
        best = row["best_tokens_per_s"]
        inside = [
            p["num_draft"]
            for p in row["points"]
            if p["tokens_per_s"] >= best * (1 - max(row["band"], p["band"]))
        ]
        assert row["best_num_draft"] in row["best_num_draft_set"]
        assert row["best_num_draft_set"] == sorted(inside)


def test_the_draft_count_curve_says_what_each_point_rests_on(one):
    points = one["draft_curve"]["points"]
    for p in points:
        want = MEASURED if p["num_draft"] == 4 else None
        assert p["basis"] in BASES and (want is None or p["basis"] == want)
    far = next(p for p in points if p["num_draft"] == 8)
    near = next(p for p in points if p["num_draft"] == 6)  # widths 7 and 9: both swept
    assert far["basis"] != MEASURED and far["band"] > near["band"]


def test_captures_of_another_program_are_refused_naming_what_differs():
    other = ROOT / "traces" / "workload-dense-graph"
    proc = verifyprof("whatif", str(C2), str(other), *LOAD)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "not a capture of the same program as C2" in line and "workload-dense-graph" in line


def test_two_captures_of_one_configuration_are_refused(tmp_path):
    twin = tmp_path / "C2-again"
    shutil.copytree(C2, twin)
    proc = verifyprof("whatif", str(C2), str(twin), *LOAD)
    assert proc.returncode == 2
    assert "same batch, context and draft count" in proc.stderr


def test_speculation_pays_at_every_batch_is_said_only_when_every_row_pays():
    result = whatif_json(
        "--verify-ms", "30", "--accept-len", "2.0", "--num-draft", "3", "--draft-ms", "3",
        "--decode-ms", "12.2", "--batch", "1,8,64", "--model", "deepseek-v3",
        "--hardware", "h200", "--tp", "8", "--link", "pcie_gen5",
    )  # fmt: skip
    for c in result["load_curve"]["contexts"]:
        paying = [r["best_num_draft"] > 0 for r in c["rows"]]
        assert ("every batch listed" in c["summary"]) == (all(paying) or not any(paying))
        if not all(paying):
            assert "speculation pays at every batch" not in c["summary"]


def test_growth_with_batch_is_told_apart_from_kv_only_with_another_context():
    small = Point(1, 5, 512.0, {"gemm_dense": 4.0, "attention": 1.0}, "a")
    big = Point(8, 5, 512.0, {"gemm_dense": 4.0, "attention": 3.0}, "b")
    long = Point(1, 5, 2048.0, {"gemm_dense": 4.0, "attention": 1.3}, "c")
    one_context = step_fit([small, big], [])
    assert one_context.kv_or_requests
    fit = step_fit([small, big, long], [])
    assert not fit.kv_or_requests
    # 4x the context at batch 1 adds 0.3 ms of KV reads; batch 8 adds 2 ms: mostly per request
    assert fit.per_request_ms * 7 > fit.per_kv_token_ms * 7 * 512
    for p in (small, big, long):
        assert fit.at(p.batch, p.width, p.context).ms == pytest.approx(
            p.busy_ms + p.fixed_ms, rel=1e-6
        )
    assert fit.at(4, 5, 512.0).basis == INTERPOLATED
    # at 1024, between 512 and 2048, batch 4 is bracketed only where both measured 1 and 8
    assert fit.at(4, 5, 1024.0).basis == EXTRAPOLATED
    assert fit.at(64, 5, 512.0).basis == EXTRAPOLATED


def test_a_width_sweep_sets_the_cost_of_a_token():
    ref = Point(1, 5, 256.0, {"gemm_dense": 5.0}, "a")
    fit = step_fit([ref], [(ref, {1: 4.6, 3: 4.8, 5: 5.0, 9: 5.4})])
    assert fit.per_token_ms == pytest.approx(0.1, rel=1e-6)


def test_a_step_whose_time_is_not_a_number_makes_no_fit_rather_than_a_nan_one():
    small = Point(1, 5, 512.0, {"gemm_dense": 4.0, "attention": 1.0}, "a")
    broken = Point(8, 5, 512.0, {"gemm_dense": 4.0, "attention": float("nan")}, "b")
    with pytest.raises(UnusableFit, match="batch 8, context 512"):
        step_fit([small, broken], [])


def test_a_step_whose_idle_phase_is_not_a_number_makes_no_fit_rather_than_a_nan_one():
    """The host's and the graphs' idle phases are the fit's fixed part, outside the rest it
    solves: a NaN there made every value of the fit NaN, basis 'interpolated'."""
    small = Point(1, 5, 512.0, {"gemm_dense": 4.0, "launch_gap": 1.0}, "a")
    broken = Point(8, 5, 512.0, {"gemm_dense": 4.0, "launch_gap": float("nan")}, "b")
    with pytest.raises(UnusableFit, match=r"batch 8, context 512 \(b\).*launch_gap nan ms"):
        step_fit([small, broken], [])


def test_an_infinite_width_sweep_time_is_refused_naming_the_sweep():
    """An infinite sweep time passed the sweeps' ``t > 0`` filter into the token slope; it is
    refused with the sweep's own words, not blamed on a step's time."""
    small = Point(1, 5, 512.0, {"gemm_dense": 4.0, "attention": 1.0}, "a")
    large = Point(8, 5, 512.0, {"gemm_dense": 5.0, "attention": 1.5}, "b")
    with pytest.raises(UnusableFit, match=r"width sweep at batch 1 \(a\).*width 4: inf ms"):
        step_fit([small, large], [(small, {2: 3.0, 4: float("inf")})])


def test_a_trace_driven_at_several_loads_is_one_measured_point_per_batch(tmp_path):
    """A server capture at ``--concurrency 1,8`` holds steps tagged bs=1 and bs=8 in one trace:
    its manifest's ``loads`` make whatif model each batch as its own measured point (here the
    two H200 captures' steps in one breakdown, the later one's clock shifted past the first)."""
    a = json.loads((C2 / "breakdown.json").read_text())
    b = json.loads((C3 / "breakdown.json").read_text())
    shift = (
        max(s["end_ns"] for s in a["steps"])
        + 1_000_000_000
        - min(s["start_ns"] for s in b["steps"])
    )
    for s in b["steps"]:
        s["start_ns"] += shift
        s["end_ns"] += shift
    a["steps"] += b["steps"]
    folder = tmp_path / "loads"
    folder.mkdir()
    (folder / "breakdown.json").write_text(json.dumps(a))
    manifest = json.loads((C2 / "manifest.json").read_text())
    manifest["loads"] = [{"concurrency": 1}, {"concurrency": 8}]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    result = whatif_json(str(folder), *LOAD)
    assert "bs=1" in " ".join(result["load_curve"]["notes"])
    p = point(result, 8, 4)
    assert p["basis"] == MEASURED and p["from_capture"].endswith("bs=8")
    assert p["tokens_per_s"] == pytest.approx(point(both_captures(), 8, 4)["tokens_per_s"], 0.02)


def both_captures() -> dict:
    return whatif_json(str(C2), str(C3), *LOAD)
