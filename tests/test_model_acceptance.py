"""Survival curves: tau(k) = 1 + s_1 + ... + s_k (REFERENCE 6.4)."""

import pytest

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.inputs.acceptance import Survival, accept_lengths, parse_survival
from verifyprof.model.inputs.leviathan import expected_tokens

QWEN_MTP5 = "0.85,0.67,0.51,0.36,0.31"  # Qwen3.5 MTP=5 on vLLM, voipmonitor/rtx6kpro [C]


def test_published_survival_gives_tau_1_85_to_3_70():
    taus = accept_lengths(parse_survival(QWEN_MTP5))
    assert [f"{t:.2f}" for t in taus] == ["1.85", "2.52", "3.03", "3.39", "3.70"]


def test_geometric_survival_is_leviathan_eq_1():
    assert Survival.from_alpha(0.8, 5).accept_len() == pytest.approx(
        expected_tokens(0.8, 5), rel=1e-12
    )


def test_alpha_curve_extends_exactly():
    assert Survival.from_alpha(0.7, 2).accept_len(6) == pytest.approx(
        expected_tokens(0.7, 6), rel=1e-12
    )


def test_measured_curve_extends_geometrically_and_says_so():
    curve = parse_survival("0.8,0.4")
    assert curve.accept_len(3) == pytest.approx(1 + 0.8 + 0.4 + 0.2)
    assert curve.is_extrapolated(3) and not curve.is_extrapolated(2)


def test_truncation_drops_the_tail():
    assert parse_survival(QWEN_MTP5).accept_len(2) == pytest.approx(2.52)


def test_increasing_survival_is_rejected():
    with pytest.raises(VerifyprofError, match="must not increase"):
        parse_survival("0.5,0.6")


def test_survival_above_one_is_rejected():
    with pytest.raises(VerifyprofError, match=r"s1 must be a probability"):
        parse_survival("1.2")


def test_non_numeric_survival_names_the_item():
    with pytest.raises(VerifyprofError, match="'x' is not a number"):
        parse_survival("0.8,x")
