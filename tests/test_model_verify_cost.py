"""Verify cost vs width: the expert union D(n) (REFERENCE 6.6) and t(n) rescaling."""

import pytest

from verifyprof.model.cycle.verify_cost import width_scaling
from verifyprof.model.inputs.model_config import expert_union
from verifyprof.pipeline.data_files import load_hardware, load_model_config

# D(n) (multiple of one-token expert bytes D(n)/k): n -> Kimi-K2, DeepSeek-V3, Qwen3-235B, Mixtral
D_TABLE = {
    1: ["8.0 (1.00)", "8.0 (1.00)", "8.0 (1.00)", "2.0 (1.00)"],
    2: ["15.8 (1.98)", "15.8 (1.97)", "15.5 (1.94)", "3.5 (1.75)"],
    3: ["23.5 (2.94)", "23.3 (2.91)", "22.5 (2.82)", "4.6 (2.31)"],
    4: ["31.0 (3.88)", "30.5 (3.82)", "29.1 (3.64)", "5.5 (2.73)"],
    5: ["38.4 (4.80)", "37.6 (4.70)", "35.3 (4.41)", "6.1 (3.05)"],
    8: ["59.5 (7.44)", "57.4 (7.18)", "51.6 (6.45)", "7.2 (3.60)"],
    12: ["85.7 (10.72)", "81.1 (10.14)", "69.0 (8.62)", "7.7 (3.87)"],
    16: ["109.8 (13.73)", "102.0 (12.75)", "82.4 (10.30)", "7.9 (3.96)"],
    32: ["188.2 (23.53)", "163.3 (20.41)", "111.8 (13.97)", "8.0 (4.00)"],
    64: ["284.2 (35.52)", "222.4 (27.81)", "125.9 (15.74)", "8.0 (4.00)"],
}
MODELS = [(384, 8), (256, 8), (128, 8), (8, 2)]


@pytest.mark.parametrize("n", sorted(D_TABLE))
def test_expert_union_table_row(n):
    got = [f"{expert_union(n, e, k):.1f} ({expert_union(n, e, k) / k:.2f})" for e, k in MODELS]
    assert got == D_TABLE[n]


def test_dense_verify_is_width_independent_below_the_ridge():
    # A dense model at 2 -> 8 tokens on an H200 stays memory-bound: the GEMM floor barely moves.
    model = load_model_config("workload")
    scaling = width_scaling(2, 8, model, load_hardware("h200"))
    assert abs(scaling.deltas_ms["gemm_dense"]) < 0.001  # of a 0.37 ms floor


def test_dense_verify_turns_compute_bound_past_the_ridge():
    model, h200 = load_model_config("workload"), load_hardware("h200")
    scaling = width_scaling(4, 1024, model, h200)
    flops_ms = model.dense_flops(1024) / (h200.bf16_tflops * 1e12) * 1e3
    bytes_ms = (
        (model.dense_bytes() + 4 * model.activation_bytes_per_token())
        / (h200.bandwidth_tbps * 1e12)
        * 1e3
    )
    assert scaling.deltas_ms["gemm_dense"] == pytest.approx(flops_ms - bytes_ms, rel=1e-3)


def test_moe_verify_grows_by_the_expert_union_s_extra_bytes():
    kimi, rtx = load_model_config("kimi-k2"), load_hardware("rtx-pro-6000")
    scaling = width_scaling(4, 12, kimi, rtx, tp=8)
    extra = (kimi.routed_bytes(12, 8) - kimi.routed_bytes(4, 8)) / (rtx.bandwidth_tbps * 1e12) * 1e3
    assert scaling.deltas_ms["gemm_moe"] == pytest.approx(extra, rel=0.01)
    assert kimi.routed_bytes(12, 8) / kimi.routed_bytes(4, 8) == pytest.approx(
        85.7 / 31.0, rel=0.01
    )


def test_measured_overhead_carries_over_and_only_the_floor_moves():
    kimi, rtx = load_model_config("kimi-k2"), load_hardware("rtx-pro-6000")
    scaling = width_scaling(4, 12, kimi, rtx, tp=8)
    measured = {"gemm_moe": 9.0, "norm": 0.5}
    scaled = scaling.apply(measured)
    assert (
        scaled["gemm_moe"] == pytest.approx(9.0 + scaling.deltas_ms["gemm_moe"])
        and scaled["norm"] == 0.5
    )


def test_without_hardware_gemm_phases_scale_by_bytes():
    kimi = load_model_config("kimi-k2")
    scaling = width_scaling(4, 12, kimi, None, tp=8)
    assert scaling.factors["gemm_moe"] == pytest.approx(
        kimi.routed_bytes(12, 8) / kimi.routed_bytes(4, 8), rel=0.01
    )


def test_without_a_model_every_phase_is_width_independent():
    scaling = width_scaling(4, 2, None, None)
    assert scaling.factors == {} and "width-independent" in scaling.notes[0]
