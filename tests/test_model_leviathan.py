"""Leviathan, Kalman, Matias 2023 (arXiv:2211.17192): the published tables, to printed precision."""

import pytest

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.inputs.leviathan import (
    expected_tokens,
    implied_cost_ratio,
    operations_factor,
    optimal_gamma,
    walltime_improvement,
)

# Table 1 (c = c-hat = 0): alpha, gamma, operations, speed.
TABLE_1 = [
    (0.6, 2, "1.53", "1.96"),
    (0.7, 3, "1.58", "2.53"),
    (0.8, 2, "1.23", "2.44"),
    (0.8, 5, "1.63", "3.69"),
    (0.9, 2, "1.11", "2.71"),
    (0.9, 10, "1.60", "6.86"),
]

# Table 2, E column (Eq. 1): task/draft/T, gamma, alpha, E.
TABLE_2_E = [
    (7, 0.75, "3.60"),
    (7, 0.80, "4.16"),
    (7, 0.82, "4.42"),
    (7, 0.62, "2.57"),
    (5, 0.68, "2.82"),
    (3, 0.71, "2.57"),
    (5, 0.65, "2.64"),
    (5, 0.73, "3.14"),
    (3, 0.74, "2.69"),
    (5, 0.53, "2.08"),
    (3, 0.55, "2.02"),
    (3, 0.56, "2.05"),
]

# Optimal gamma from Thm 3.8 (REFERENCE 6.2): rows c, columns alpha -> (gamma*, speedup).
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
OPTIMAL_GRID = {
    0.01: [(5, "1.88"), (7, "2.30"), (9, "2.97"), (14, "4.23"), (24, "7.49"), (40, "12.54")],
    0.02: [(4, "1.79"), (6, "2.17"), (8, "2.76"), (11, "3.82"), (19, "6.37"), (31, "9.95")],
    0.05: [(3, "1.63"), (4, "1.92"), (6, "2.35"), (8, "3.09"), (13, "4.67"), (21, "6.60")],
    0.10: [(2, "1.46"), (3, "1.67"), (4, "1.98"), (6, "2.47"), (10, "3.43"), (15, "4.48")],
    0.20: [(1, "1.25"), (2, "1.40"), (3, "1.58"), (4, "1.87"), (7, "2.37"), (10, "2.87")],
}


@pytest.mark.parametrize("alpha,gamma,operations,speed", TABLE_1)
def test_table_1_speed_is_eq_1_over_one_target_step(alpha, gamma, operations, speed):
    assert f"{walltime_improvement(alpha, gamma, 0.0):.2f}" == speed


@pytest.mark.parametrize("alpha,gamma,operations,speed", TABLE_1)
def test_table_1_operations_is_thm_3_11_at_zero_draft_cost(alpha, gamma, operations, speed):
    assert f"{operations_factor(alpha, gamma, 0.0):.2f}" == operations


@pytest.mark.parametrize("gamma,alpha,expected", TABLE_2_E)
def test_table_2_expected_tokens_column(gamma, alpha, expected):
    assert f"{expected_tokens(alpha, gamma):.2f}" == expected


def test_table_4_t5_small_ende_theory_is_3_157():
    assert f"{walltime_improvement(0.75, 7, 0.02):.3f}" == "3.157"


def test_table_2_implied_cost_ratio_of_t5_small_ende_is_0_008():
    assert f"{implied_cost_ratio(0.75, 7, 3.4):.3f}" == "0.008"


@pytest.mark.parametrize("c", sorted(OPTIMAL_GRID))
def test_optimal_gamma_grid_row(c):
    got = [optimal_gamma(alpha, c) for alpha in ALPHAS]
    assert [(g, f"{s:.2f}") for g, s in got] == OPTIMAL_GRID[c]


def test_expected_tokens_is_one_when_nothing_is_accepted():
    assert expected_tokens(0.0, 5) == 1.0


@pytest.mark.parametrize("alpha", [-0.1, 1.0, 1.5])
def test_alpha_outside_zero_one_is_rejected(alpha):
    with pytest.raises(VerifyprofError, match=r"alpha .* must be in \[0, 1\)"):
        expected_tokens(alpha, 3)
