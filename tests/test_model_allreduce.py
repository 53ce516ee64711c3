"""Allreduce cost models (REFERENCE 6.7): NCCL tuning latencies, alpha-beta, measured tables."""

import pytest

from verifyprof.model.inputs.allreduce import (
    MeasuredTable,
    allreduce_bytes,
    nccl_allreduce_us,
    nccl_latency_us,
    ring_alpha_beta_us,
)
from verifyprof.pipeline.data_files import load_hardware


@pytest.mark.parametrize(
    "link,expected", [("pcie", ["8.6", "12.6", "20.6"]), ("nvlink", ["7.8", "10.2", "15.0"])]
)
def test_nccl_ring_ll_small_message_latency_for_2_4_8_ranks(link, expected):
    assert [f"{nccl_latency_us('ring', 'LL', link, n):.1f}" for n in (2, 4, 8)] == expected


def test_nccl_model_picks_ll_for_small_messages():
    choice = nccl_allreduce_us(1024, 8, "pcie", busbw_gbps=40.0)
    assert (choice.algo, choice.proto) == ("ring", "LL")
    assert choice.us == pytest.approx(20.6, abs=0.5)


def test_nccl_model_moves_to_simple_for_large_messages():
    assert nccl_allreduce_us(64 << 20, 8, "nvlink", busbw_gbps=420.0).proto == "Simple"


def test_verify_message_of_4_tokens_of_7168_is_56_kb():
    assert allreduce_bytes(4, 7168) == 56 * 1024 * 2 // 2 == 57344


def test_ring_alpha_beta_is_latency_times_hops_plus_bandwidth_term():
    assert ring_alpha_beta_us(1e6, 4, alpha_us=2.0, bw_gbps=50.0) == pytest.approx(
        6 * 2.0 + 1.5 * 1e6 / 5e4
    )


def test_single_rank_allreduce_costs_nothing():
    assert ring_alpha_beta_us(1e6, 1, 2.0, 50.0) == 0.0


def test_measured_table_reproduces_its_points_and_interpolates_between():
    rtx = load_hardware("rtx-pro-6000")
    nccl8 = rtx.table("nccl", 8)
    assert [nccl8.at(s) for s in nccl8.sizes] == list(nccl8.us)
    assert 24.1 <= rtx.allreduce_us(57344, 8, "nccl").us <= 24.5  # between 32 KB and 64 KB


def test_custom_one_shot_beats_nccl_up_to_32_kb_and_loses_from_64_kb_on_8_pcie_gpus():
    rtx = load_hardware("rtx-pro-6000")
    assert rtx.allreduce_us(32768, 8, "custom").us < rtx.allreduce_us(32768, 8, "nccl").us
    assert rtx.allreduce_us(65536, 8, "custom").us > rtx.allreduce_us(65536, 8, "nccl").us


def test_table_extrapolates_linearly_in_size_past_the_last_point():
    table = MeasuredTable("custom", 4, (1000, 2000), (10.0, 20.0))
    assert table.at(3000) == pytest.approx(30.0)
    assert table.at(10) == 10.0


def test_without_a_table_the_nccl_model_is_used_and_named():
    est = load_hardware("b200").allreduce_us(57344, 8, "nccl")
    assert "NCCL tuning model" in est.method and 15.0 < est.us < 20.0


def test_one_shot_model_fits_the_measured_8_pcie_table_at_small_sizes():
    # links.toml's pcie_gen5 barrier/peer-read terms are fitted to this table: check the fit holds.
    rtx = load_hardware("rtx-pro-6000")
    h100_pcie = load_hardware("h100-pcie")  # same link, no table: uses the one-shot model
    for size in (1024, 8192, 32768):
        assert h100_pcie.allreduce_us(size, 8, "custom").us == pytest.approx(
            rtx.allreduce_us(size, 8, "custom").us, rel=0.15
        )
