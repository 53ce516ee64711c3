"""Today's answer to "speculate or not, and with which k", read off today's draft-count curve
(issue 42): the verdict's first line. Plain decoding is the curve's k = 0; a k that beats it by
more than the band (the model cannot tell apart what lies within it) is the one to speculate
with, whatever today's k makes; today's k losing to plain decoding is said beside it. What the
plan's fixes would change is a line of its own, after."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ONE_TOKEN = 1.0 + 1e-9  # an accept length at or below this yields one token a cycle


@dataclass(frozen=True)
class Today:
    """Speculate today or not, the k to speculate with, and the words of the first line."""

    speculate: bool
    k: int | None  # the k to speculate with (None: plain decoding, or no curve)
    words: str
    clear: bool = False  # some k beats plain decoding by more than the band


def cannot_pay(accept_len: float) -> bool:
    """An accept length of 1 makes one token a cycle, as a plain decode step does, and spends
    the draft on top: no cycle pays."""
    return accept_len <= ONE_TOKEN


def may_pay(point: dict[str, Any]) -> bool:
    """Whether a curve's point can be the best: plain decoding, or a k whose accept length is
    above 1 (at 1 a cycle makes the plain step's one token: a rate above plain decoding's there
    is the model's error, not a gain)."""
    return not point["num_draft"] or point.get("accept_len", 2.0) > ONE_TOKEN


def payable(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points that may be the best (all of them where none may)."""
    return [p for p in points if may_pay(p)] or points


def clear_best(curve: Any) -> dict[str, Any] | None:
    """The curve's best point where it beats plain decoding (k = 0) by more than the band of
    either; None where plain decoding is within it, or the curve has no k = 0."""
    if curve is None:
        return None
    plain = next((p for p in curve.points if p["num_draft"] == 0), None)
    best = curve.best
    if plain is None or not best["num_draft"] or 0 in curve.best_set:
        return None
    return best


def today_answer(plain: Any, curve: Any) -> Today:
    """Today's answer from plain decoding (today's k against k = 0) and the draft-count curve."""
    spec = plain.spec
    k_now = curve.current_k if curve is not None else None
    if cannot_pay(spec.accept_len):
        return Today(
            False,
            None,
            f"Turn speculation off today: at accept length {spec.accept_len:.2f} speculation"
            " cannot pay (one token a cycle, as a plain decode step makes, with drafts on top)",
        )
    best = clear_best(curve)
    if best is not None:
        k, ks = best["num_draft"], curve.best_set
        if k_now in ks:  # today's k cannot be told from the best: keep it
            also = f" (k={ks[0]}-{ks[-1]} within the band)" if len(ks) > 1 else ""
            return Today(True, k_now, f"Speculate today, with today's k={k_now}{also}", clear=True)
        line = f"Speculate today, with k={k} ({best['tokens_per_s']:.1f} tok/s)"
        if plain.speculation_loses:
            line += (
                f": today's k={k_now} loses to plain decoding ({spec.tokens_per_s:.1f} against"
                f" {plain.tokens_per_s:.1f} tok/s)"
            )
        elif k_now is not None:
            line += f", not today's k={k_now} ({spec.tokens_per_s:.1f} tok/s)"
        return Today(True, k, line, clear=True)
    if plain.speculation_loses or spec.tokens_per_s <= plain.tokens_per_s:
        line = "Turn speculation off today"
        top = curve.best if curve is not None else None
        if top is not None and top["num_draft"]:
            band = max(top.get("band") or 0.0, _plain_band(curve))
            line += (
                f": no draft count beats plain decoding by more than the band (best k="
                f"{top['num_draft']}, {top['tokens_per_s']:.1f} against"
                f" {plain.tokens_per_s:.1f} tok/s, +/-{band:.0%})"
            )
        return Today(False, None, line)
    if curve is not None and 0 in curve.best_set and curve.best["num_draft"]:
        band = max(curve.best.get("band") or 0.0, _plain_band(curve))
        return Today(
            True,
            k_now,
            f"Speculation pays today (k={k_now}), by less than the band (+/-{band:.0%}): measure"
            " both before relying on it",
        )
    return Today(True, k_now, "Speculation pays today" if k_now else "Speculation pays")


def _plain_band(curve: Any) -> float:
    plain = next((p for p in curve.points if p["num_draft"] == 0), None)
    return float((plain or {}).get("band") or 0.0)


def after_plan_words(today: Today, plain: Any) -> str | None:
    """What the plan's fixes change, as its own sentence: only where the answer flips."""
    if not plain.along_plan or plain.spec_after_plan is None:
        return None
    after_wins = plain.spec_after_plan > plain.along_plan[-1] and not cannot_pay(
        plain.spec.accept_len
    )
    if after_wins == today.speculate:
        return None
    if after_wins:
        return "With the plan's fixes, speculation wins"
    return "With the plan's fixes, plain decoding wins: the plan ends by turning speculation off"
