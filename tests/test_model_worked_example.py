"""REFERENCE 6.11: Kimi-K2 family, TP8, 8x RTX PRO 6000 PCIe, batch 1, EAGLE-3 chain of 3 (verify
width 4)."""

import pytest

from verifyprof.model.inputs.allreduce import allreduce_bytes
from verifyprof.pipeline.data_files import load_hardware, load_model_config


@pytest.fixture(scope="module")
def kimi():
    return load_model_config("kimi-k2")


@pytest.fixture(scope="module")
def rtx():
    return load_hardware("rtx-pro-6000")


def test_mla_is_101m_params_per_layer(kimi):
    assert kimi.attention_params_per_layer / 1e6 == pytest.approx(101, abs=0.5)


def test_an_expert_is_44m_params_and_22_mb_in_int4(kimi):
    assert kimi.expert_params / 1e6 == pytest.approx(44.0, abs=0.1)
    assert kimi.expert_params * 0.5 / 1e6 == pytest.approx(22.0, abs=0.1)


def test_allreduce_costs_about_2_9_ms_per_forward(kimi, rtx):
    per_call = rtx.allreduce_us(allreduce_bytes(4, kimi.hidden), 8, "nccl").us
    assert per_call == pytest.approx(24, abs=0.6)
    # 122 layer allreduces in REFERENCE; the model also counts the embedding's (123)
    assert kimi.allreduces_per_forward * per_call / 1e3 == pytest.approx(2.9, abs=0.1)


def test_decode_reads_1_3_gb_of_routed_experts_per_gpu(kimi):
    assert kimi.routed_bytes(1, tp=8) / 1e9 == pytest.approx(1.3, abs=0.05)


def test_verify_4_reads_5_1_gb_of_routed_experts_per_gpu(kimi):
    assert kimi.routed_bytes(4, tp=8) / 1e9 == pytest.approx(5.1, abs=0.05)


def test_expert_union_adds_2_1_ms_at_1_79_tb_s(kimi, rtx):
    extra = kimi.routed_bytes(4, 8) - kimi.routed_bytes(1, 8)
    assert extra / (rtx.bandwidth_tbps * 1e12) * 1e3 == pytest.approx(2.1, abs=0.05)


def test_non_routed_weights_are_10_4b_params_2_6_gb_per_gpu(kimi):
    assert kimi.non_routed_params / 1e9 == pytest.approx(10.4, abs=0.05)
    assert kimi.dense_bytes(tp=8) / 1e9 == pytest.approx(2.6, abs=0.05)


def test_bandwidth_ideal_decode_is_2_2_ms(kimi, rtx):
    ideal = (kimi.routed_bytes(1, 8) + kimi.dense_bytes(8)) / (rtx.bandwidth_tbps * 1e12) * 1e3
    assert ideal == pytest.approx(2.2, abs=0.05)


def test_ngram_12_tokens_read_12_8_gb_more_per_gpu_about_7_ms(kimi, rtx):
    extra = kimi.routed_bytes(12, 8) - kimi.routed_bytes(1, 8)
    assert extra / 1e9 == pytest.approx(12.8, abs=0.1)
    assert extra / (rtx.bandwidth_tbps * 1e12) * 1e3 == pytest.approx(7.0, abs=0.2)


def test_ngram_allreduce_messages_are_168_kb_and_still_25_to_28_us(kimi, rtx):
    nbytes = allreduce_bytes(12, kimi.hidden)
    assert nbytes / 1024 == 168
    assert 24.0 <= rtx.allreduce_us(nbytes, 8, "nccl").us <= 28.0
