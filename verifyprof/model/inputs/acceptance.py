"""Position-dependent acceptance: survival curves and the accept length they give.

``s[i-1]`` is the probability that the first ``i`` drafts are all accepted, so the mean accepted
length with ``k`` drafts, bonus token included, is ``1 + s_1 + ... + s_k`` (REFERENCE 6.4);
Leviathan's Eq. (1) is the special case ``s_i = alpha**i``. Truncating the curve is exact;
extending it past the measured positions is a guess and is labelled as one.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifyprof.contracts.bounds import check_alpha, check_count
from verifyprof.contracts.errors import VerifyprofError


@dataclass(frozen=True)
class Survival:
    """A survival curve over draft positions 1..len(s)."""

    s: tuple[float, ...]
    source: str = "given"  # "given" | "alpha" | where it came from (manifest path)
    alpha: float | None = None  # set when the curve is alpha**i: extension is then exact

    def __post_init__(self) -> None:
        if not self.s:
            raise VerifyprofError("survival curve is empty: give at least s1")
        previous = 1.0
        for i, value in enumerate(self.s, start=1):
            if not 0.0 <= value <= 1.0:
                raise VerifyprofError(
                    f"survival s{i} must be a probability in [0, 1], got {value:g}"
                )
            if value > previous + 1e-12:
                raise VerifyprofError(
                    f"survival must not increase with position (s{i}={value:g} >"
                    f" s{i - 1}={previous:g}): s_i is the probability that the first i drafts are"
                    " all accepted"
                )
            previous = value

    @classmethod
    def from_alpha(cls, alpha: float, num_draft: int) -> Survival:
        check_alpha(alpha)
        check_count("number of draft tokens", num_draft, minimum=1)
        return cls(tuple(alpha**i for i in range(1, num_draft + 1)), source="alpha", alpha=alpha)

    @property
    def depth(self) -> int:
        return len(self.s)

    def accept_len(self, num_draft: int | None = None) -> float:
        """Mean accepted tokens per cycle with ``num_draft`` drafts (default: all measured)."""
        k = (
            self.depth
            if num_draft is None
            else check_count("number of draft tokens", num_draft, minimum=0)
        )
        return 1.0 + sum(self.extended(k).s[:k]) if k else 1.0

    def extended(self, num_draft: int) -> Survival:
        """The curve out to ``num_draft`` positions; past the data, continue geometrically."""
        if num_draft <= self.depth:
            return self
        if self.alpha is not None:
            return Survival.from_alpha(self.alpha, num_draft)
        ratio = self.tail_ratio
        values = list(self.s)
        while len(values) < num_draft:
            values.append(values[-1] * ratio)
        return Survival(
            tuple(values), source=f"{self.source}, extended geometrically x{ratio:.3f}", alpha=None
        )

    @property
    def tail_ratio(self) -> float:
        """s_k / s_(k-1) of the last two measured positions (s_1 / 1 for a single one)."""
        if self.depth == 1:
            return self.s[0]
        return self.s[-1] / self.s[-2] if self.s[-2] > 0 else 0.0

    def is_extrapolated(self, num_draft: int) -> bool:
        return num_draft > self.depth and self.alpha is None


def parse_survival(text: str) -> Survival:
    """``"0.85,0.67,0.51"`` -> Survival; one line naming the bad item otherwise."""
    items = [item.strip() for item in text.replace(";", ",").split(",") if item.strip()]
    values = []
    for item in items:
        try:
            values.append(float(item))
        except ValueError:
            raise VerifyprofError(
                f"survival: {item!r} is not a number (expected e.g. 0.85,0.67,0.51)"
            ) from None
    return Survival(tuple(values))


def accept_lengths(survival: Survival, max_draft: int | None = None) -> list[float]:
    """tau(k) for k = 1..max_draft (default: the measured depth)."""
    depth = survival.depth if max_draft is None else max_draft
    return [survival.accept_len(k) for k in range(1, depth + 1)]
