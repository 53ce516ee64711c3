"""Leviathan, Kalman, Matias 2023 (arXiv:2211.17192): i.i.d. acceptance rate alpha, gamma drafts.

These closed forms assume every draft token is accepted independently with probability alpha and
that a verify costs one target decode step (Thm 3.8). The measured cycle replaces that second
assumption in :mod:`verifyprof.model.cycle.throughput`; here they stay exact so the published tables
can be reproduced to their printed precision.
"""

from __future__ import annotations

from verifyprof.contracts.bounds import check_alpha, check_count, check_nonnegative


def expected_tokens(alpha: float, gamma: int) -> float:
    """Eq. (1): expected tokens per iteration, bonus token included, in [1, gamma + 1]."""
    check_alpha(alpha)
    check_count("number of draft tokens", gamma, minimum=0)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def walltime_improvement(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Thm 3.8: expected walltime improvement when one draft step costs ``cost_ratio`` target
    steps."""
    check_nonnegative("draft cost ratio", cost_ratio)
    return expected_tokens(alpha, gamma) / (gamma * cost_ratio + 1.0)


def operations_factor(alpha: float, gamma: int, cost_ratio: float = 0.0) -> float:
    """Thm 3.11: expected increase in arithmetic operations (c-hat = draft/target ops per token)."""
    check_nonnegative("draft cost ratio", cost_ratio)
    return (gamma * cost_ratio + gamma + 1.0) / expected_tokens(alpha, gamma)


def optimal_gamma(alpha: float, cost_ratio: float, max_gamma: int = 512) -> tuple[int, float]:
    """The integer gamma >= 1 maximising Thm 3.8 and the improvement it gives (Fig. 3)."""
    check_alpha(alpha)
    check_nonnegative("draft cost ratio", cost_ratio)
    best = max(range(1, max_gamma + 1), key=lambda g: walltime_improvement(alpha, g, cost_ratio))
    return best, walltime_improvement(alpha, best, cost_ratio)


def implied_cost_ratio(alpha: float, gamma: int, speed: float) -> float:
    """The c that makes Thm 3.8 equal a measured speed: (E / speed - 1) / gamma (negative: beats
    theory)."""
    check_count("number of draft tokens", gamma, minimum=1)
    return (expected_tokens(alpha, gamma) / speed - 1.0) / gamma
