"""Per-iteration accounting: tokens/s = accept_len / (T_draft + T_verify + T_overhead).

REFERENCE 6.1. The speedup against plain decoding is ``accept_len * T_decode / T_iter``; the
cycle cost in decode steps, ``T_iter / T_decode``, puts published (tau, speedup) pairs and
measured traces on one scale. Times are milliseconds here because that is what users type and
read; the breakdown's integer nanoseconds are converted once, in
:mod:`verifyprof.model.inputs.profile`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifyprof.contracts.bounds import (
    check_accept_len,
    check_count,
    check_nonnegative,
    check_positive,
)
from verifyprof.contracts.errors import VerifyprofError


@dataclass(frozen=True)
class Cycle:
    """One speculative iteration of one request (``batch`` requests run it together)."""

    verify_ms: float
    accept_len: float
    draft_ms: float = 0.0
    overhead_ms: float = 0.0
    batch: int = 1
    decode_ms: float | None = None  # one plain decode step at the same batch: the baseline
    # phase time the host/GPU race hides behind other phases' work (model.cycle.overlap): the
    # cycle is the phases' sum less this
    overlap_ms: float = 0.0

    def __post_init__(self) -> None:
        check_positive("verify time (ms)", self.verify_ms)
        check_accept_len(self.accept_len)
        check_nonnegative("draft time (ms)", self.draft_ms)
        check_nonnegative("overhead time (ms)", self.overhead_ms)
        check_count("batch", self.batch, minimum=1)
        check_nonnegative("overlap time (ms)", self.overlap_ms)
        if self.decode_ms is not None:
            check_positive("decode step time (ms)", self.decode_ms)

    @property
    def cycle_ms(self) -> float:
        return self.draft_ms + self.verify_ms + self.overhead_ms - self.overlap_ms

    @property
    def tokens_per_s(self) -> float:
        """Per request."""
        return self.accept_len / self.cycle_ms * 1e3

    @property
    def batch_tokens_per_s(self) -> float:
        return self.batch * self.tokens_per_s

    @property
    def baseline_tokens_per_s(self) -> float | None:
        return None if self.decode_ms is None else 1e3 / self.decode_ms

    @property
    def speedup(self) -> float | None:
        return None if self.decode_ms is None else self.accept_len * self.decode_ms / self.cycle_ms

    @property
    def cycle_cost_decode_steps(self) -> float | None:
        """T_iter / T_decode: how many plain decode steps one speculative cycle costs."""
        return None if self.decode_ms is None else self.cycle_ms / self.decode_ms

    @property
    def break_even_verify_ms(self) -> float | None:
        """The verify time at which speculation stops paying (speedup = 1); None where it cannot
        be reached (draft and overhead alone take longer: no verify is fast enough) or without a
        decode step. Never negative."""
        if self.decode_ms is None:
            return None
        budget = self.accept_len * self.decode_ms - self.draft_ms - self.overhead_ms
        return budget if budget > 0 else None

    @property
    def break_even_unreachable(self) -> bool:
        """Even a free verify would not pay: the draft and overhead exceed the tokens' worth."""
        return self.decode_ms is not None and self.break_even_verify_ms is None

    @property
    def break_even_accept_len(self) -> float | None:
        """The accept length needed for speedup = 1 at this cycle time (< 1: any acceptance
        pays)."""
        return self.cycle_cost_decode_steps

    def with_(self, **changes: Any) -> Cycle:
        fields = {
            "verify_ms": self.verify_ms,
            "accept_len": self.accept_len,
            "draft_ms": self.draft_ms,
            "overhead_ms": self.overhead_ms,
            "batch": self.batch,
            "decode_ms": self.decode_ms,
            "overlap_ms": self.overlap_ms,
        }
        fields.update(changes)
        return Cycle(**fields)

    def words(self) -> str:
        """The cycle and its rate in one sentence (the verdict's step, where numbers give it)."""
        return (
            f"cycle {self.cycle_ms:.3f} ms (verify {self.verify_ms:.3f} + draft"
            f" {self.draft_ms:.3f} + overhead {self.overhead_ms:.3f}) at accept length"
            f" {self.accept_len:.2f}: {self.tokens_per_s:.1f} tok/s per request."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "accept_len": self.accept_len,
            "verify_ms": self.verify_ms,
            "draft_ms": self.draft_ms,
            "overhead_ms": self.overhead_ms,
            "cycle_ms": self.cycle_ms,
            **({"overlap_ms": self.overlap_ms} if self.overlap_ms else {}),
            "batch": self.batch,
            "tokens_per_s": self.tokens_per_s,
            "batch_tokens_per_s": self.batch_tokens_per_s,
            "decode_ms": self.decode_ms,
            "baseline_tokens_per_s": self.baseline_tokens_per_s,
            "speedup": self.speedup,
            "cycle_cost_decode_steps": self.cycle_cost_decode_steps,
            "break_even_verify_ms": self.break_even_verify_ms,
            **({"break_even_unreachable": True} if self.break_even_unreachable else {}),
            "break_even_accept_len": self.break_even_accept_len,
        }


def decode_ms_from(
    baseline_tps: float | None = None, decode_ms: float | None = None
) -> float | None:
    """The baseline step time from either form; both given must agree within 1%."""
    if baseline_tps is not None:
        check_positive("baseline tokens/s", baseline_tps)
    if decode_ms is not None:
        check_positive("decode step time (ms)", decode_ms)
    if baseline_tps is not None and decode_ms is not None:
        implied = 1e3 / baseline_tps
        if abs(implied - decode_ms) > 0.01 * decode_ms:
            raise VerifyprofError(
                f"baseline {baseline_tps:g} tok/s means a {implied:.3f} ms decode step, not"
                f" {decode_ms:g} ms: give one of them"
            )
        return decode_ms
    if baseline_tps is not None:
        return 1e3 / baseline_tps
    return decode_ms


def implied_cycle_cost(accept_len: float, speedup: float) -> float:
    """T_iter / T_decode implied by a published (accept length, speedup) pair: tau / S (REFERENCE
    6.1)."""
    check_accept_len(accept_len)
    check_positive("speedup", speedup)
    return accept_len / speedup
