"""One batch's row of the load curve: its draft-count points at that batch and context, the
best k and the set the band cannot tell from it, what its answer rests on."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from verifyprof.model.cycle.phase_fit import ASSUMED, worst
from verifyprof.model.decision.today import payable


@dataclass
class Row:
    """One batch at one context: every k's rate, the best k and plain decoding."""

    batch: int
    points: list[dict[str, Any]]
    assumes: str | None = None  # what the row rests on that no capture states ("context")

    @property
    def best(self) -> dict[str, Any]:
        return max(payable(self.points), key=lambda p: p["tokens_per_s"])

    @cached_property
    def rates(self) -> dict[int, float]:
        """k -> tokens/s (the first point of each k, as a search of the points finds it)."""
        out: dict[int, float] = {}
        for p in self.points:
            out.setdefault(p["num_draft"], p["tokens_per_s"])
        return out

    @property
    def plain(self) -> dict[str, Any] | None:
        return next((p for p in self.points if p["num_draft"] == 0), None)

    @property
    def best_set(self) -> list[int]:
        """Every k whose rate is within the band of the best's (the best k is a set where the
        model cannot tell them apart)."""
        best = self.best
        top = best["tokens_per_s"]
        return sorted(
            p["num_draft"]
            for p in payable(self.points)
            if p["tokens_per_s"] >= top * (1 - max(best.get("band", 0.0), p.get("band", 0.0)))
        )

    @property
    def basis(self) -> str:
        """The least confident basis of the best point and plain decoding (what the row's
        answer rests on)."""
        found = [p.get("basis", "measured") for p in (self.best, self.plain) if p is not None]
        return worst(*found, *([ASSUMED] if self.assumes else []))

    def to_json(self) -> dict[str, Any]:
        best, plain = self.best, self.plain
        out = {"batch": self.batch, "basis": self.basis, "band": best.get("band")}
        if "rate_band" in best:  # the best rate's own band (its capture's anchor error in it)
            out["rate_band"] = best["rate_band"]
        return (
            out
            | {
                "best_num_draft_set": self.best_set,
                "best_num_draft": best["num_draft"],
                "best_tokens_per_s": best["tokens_per_s"],
                "best_tokens_per_s_per_gpu": best["tokens_per_s_per_gpu"],
                "plain_tokens_per_s": plain["tokens_per_s"] if plain else None,
                "plain_tokens_per_s_per_gpu": plain["tokens_per_s_per_gpu"] if plain else None,
                "speculation_pays": best["num_draft"] > 0 if plain else None,
                "points": self.points,
            }
            | ({"assumes": self.assumes} if self.assumes else {})
        )
