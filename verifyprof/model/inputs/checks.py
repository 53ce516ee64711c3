"""Input checks shared by the model: each failure is one line naming the value and the rule."""

from __future__ import annotations

import math

from verifyprof.contracts.bounds import (  # the documented ranges, in one place
    ACCEPT_LEN,
    MAX_DRAFTS,  # noqa: F401 - draft tokens per cycle, imported from here by the model
    check_number,
)
from verifyprof.contracts.errors import VerifyprofError


def _finite(name: str, value: float) -> float:
    if (
        value is None
        or not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
    ):
        raise VerifyprofError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_finite(name: str, value: float) -> float:
    """Any finite number (a percentage gate, say): NaN and infinities always pass or always fail
    a comparison, so they are refused."""
    return _finite(name, value)


def check_positive(name: str, value: float) -> float:
    """Times and rates: strictly positive (a zero verify time means a broken measurement)."""
    value = _finite(name, value)
    if value <= 0:
        raise VerifyprofError(f"{name} must be positive, got {value:g}")
    return value


def check_nonnegative(name: str, value: float) -> float:
    value = _finite(name, value)
    if value < 0:
        raise VerifyprofError(f"{name} must not be negative, got {value:g}")
    return value


def check_alpha(alpha: float) -> float:
    alpha = _finite("alpha (acceptance rate)", alpha)
    if not 0.0 <= alpha < 1.0:
        raise VerifyprofError(f"alpha (acceptance rate) must be in [0, 1), got {alpha:g}")
    return alpha


def check_accept_len(value: float) -> float:
    """Accepted length counts the bonus token, so it is at least 1."""
    value = _finite("accept length", value)
    if value < 1.0:
        raise VerifyprofError(
            f"accept length must be >= 1 (it counts the bonus token), got {value:g}"
        )
    return float(check_number("accept length", value, ACCEPT_LEN))  # and at most 256 drafts + 1


MAX_COUNT = 1 << 20  # batch, widths, tp: bounds that keep every model loop and array small


def check_count(name: str, value: int, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        and not (isinstance(value, float) and value.is_integer())
    ):
        raise VerifyprofError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise VerifyprofError(f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise VerifyprofError(f"{name} must be <= {maximum}, got {value}")
    return value
