"""Per-iteration accounting: tokens/s = tau / (draft + verify + overhead) (REFERENCE 6.1, section
1)."""

import pytest

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.cycle.throughput import Cycle, decode_ms_from, implied_cycle_cost

BASELINE_82 = decode_ms_from(baseline_tps=82)


def test_15_ms_verify_at_tau_2_caps_at_133_tok_s():
    assert Cycle(verify_ms=15, accept_len=2.0).tokens_per_s == pytest.approx(133.33, abs=0.01)


def test_30_ms_verify_at_tau_2_caps_at_67_tok_s_below_the_82_baseline():
    cycle = Cycle(verify_ms=30, accept_len=2.0, decode_ms=BASELINE_82)
    assert round(cycle.tokens_per_s) == 67 and cycle.speedup < 1


def test_133_tok_s_against_82_is_1_63x_a_62_percent_gain():
    speedup = Cycle(verify_ms=15, accept_len=2.0, decode_ms=BASELINE_82).speedup
    assert f"{speedup:.2f}" == "1.63"
    assert int(100 * (speedup - 1)) == 62  # +62.6%


def test_30_ms_verify_costs_2_5_decode_steps():
    assert Cycle(
        verify_ms=30, accept_len=2.0, decode_ms=BASELINE_82
    ).cycle_cost_decode_steps == pytest.approx(2.46, abs=0.01)


def test_break_even_verify_time_gives_speedup_one():
    cycle = Cycle(
        verify_ms=15, accept_len=2.0, draft_ms=1.0, overhead_ms=0.5, decode_ms=BASELINE_82
    )
    even = cycle.with_(verify_ms=cycle.break_even_verify_ms)
    assert even.speedup == pytest.approx(1.0)


def test_break_even_accept_length_gives_speedup_one():
    cycle = Cycle(verify_ms=30, accept_len=2.0, decode_ms=BASELINE_82)
    assert cycle.with_(accept_len=cycle.break_even_accept_len).speedup == pytest.approx(1.0)


def test_batch_multiplies_throughput_not_per_request_rate():
    cycle = Cycle(verify_ms=20, accept_len=2.5, batch=8)
    assert cycle.batch_tokens_per_s == pytest.approx(8 * cycle.tokens_per_s)


def test_case_d_cycle_is_22_8_ms_at_tau_2_6_for_114_tok_s():
    # Kimi-K2.6 vLLM 8x RTX PRO 6000: 114.1 tok/s at tau 2.6 -> cycle 22.8 ms, ~2.0 decode steps of
    # 11.3 ms
    cycle = Cycle(verify_ms=22.79, accept_len=2.6, decode_ms=1e3 / 88.5)
    assert cycle.tokens_per_s == pytest.approx(114.1, abs=0.1)
    assert cycle.cycle_cost_decode_steps == pytest.approx(2.0, abs=0.02)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("verify_ms", 0.0, "verify time .* must be positive"),
        ("verify_ms", -3.0, "verify time .* must be positive"),
        ("accept_len", 0.9, "accept length must be >= 1"),
        ("draft_ms", -1.0, "draft time .* must not be negative"),
        ("decode_ms", 0.0, "decode step time .* must be positive"),
    ],
)
def test_bad_cycle_inputs_are_rejected(field, value, message):
    kwargs = {"verify_ms": 10.0, "accept_len": 2.0} | {field: value}
    with pytest.raises(VerifyprofError, match=message):
        Cycle(**kwargs)


def test_baseline_given_twice_must_agree():
    with pytest.raises(VerifyprofError, match="give one of them"):
        decode_ms_from(baseline_tps=82, decode_ms=20)


# ---- REFERENCE 7: published (tau, speedup) pairs on the cycle-cost scale --------------------


def test_case_b_deepseek_mtp_cycle_costs_1_03_to_1_06_decode_steps():
    assert (round(implied_cycle_cost(1.85, 1.8), 2), round(implied_cycle_cost(1.90, 1.8), 2)) == (
        1.03,
        1.06,
    )


def test_case_c_eagle3_llama_8b_cycle_is_2_6_decode_steps_16_4_ms():
    cost = implied_cycle_cost(6.1, 373.25 / 158.34)
    assert round(cost, 1) == 2.6
    assert cost * 1e3 / 158.34 == pytest.approx(16.4, abs=0.1)


def test_case_e_qwen_mtp2_survival_speedup_implies_1_66_decode_steps():
    assert implied_cycle_cost(1 + 0.85 + 0.67, 130.0 / 85.8) == pytest.approx(1.66, abs=0.01)


def test_case_h_better_drafter_at_eagle2_cycle_cost_predicts_eagle3_within_6_percent():
    cost = implied_cycle_cost(4.83, 4.26)  # EAGLE-2, Vicuna-13B: 1.13 decode steps per cycle
    predicted = 6.65 / cost  # EAGLE-3's tau at the same cycle
    assert round(cost, 2) == 1.13
    assert predicted / 5.58 - 1 == pytest.approx(
        0.047, abs=0.005
    )  # the residual: 5.87x predicted, 5.58x measured
