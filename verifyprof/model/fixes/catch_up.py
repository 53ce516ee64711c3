"""A part the captures show run once per fully accepting request (a batched program catching
each row that accepted every draft up with a drafter call of its own) at another draft count:
its forwards follow the share of requests that accept every draft, which a chain's accept length
gives as L(k) - L(k-1) (the survival at k)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.parts import Part
from verifyprof.model.fixes.part_slopes import PartSlope

CATCH_UP_TOLERANCE = 1.5  # a per-row part's forwards a request within this factor of L(k)-L(k-1)


def caught_up(
    parts: tuple[Part, ...],
    slopes: tuple[PartSlope, ...],
    survival_of: Callable[[], Any],
    k: int,
    k2: int,
) -> tuple[tuple[Part, ...], list[str]]:
    """``parts`` at ``k2`` drafts instead of ``k``: a per-row part (its forwards per cycle grow
    with the batch) whose forwards a request are about the share accepting every draft is a
    catch-up and follows that share; a part every row runs every cycle keeps its forwards."""
    rows = {sl.name: sl for sl in slopes if sl.per_row}
    if not rows or k2 == k or k < 1 or k2 < 1:
        return parts, []
    survival = survival_of()

    def full(n: int) -> float:
        return survival.accept_len(n) - survival.accept_len(n - 1)

    if full(k) <= 0:
        return parts, []
    tol = CATCH_UP_TOLERANCE
    mine = [
        p
        for p in parts
        if p.name in rows
        and p.forwards > 0
        and 1 / tol <= rows[p.name].forwards_per_request / full(k) <= tol
    ]
    if not mine:
        return parts, []
    ratio = max(full(k2), 0.0) / full(k)
    out = tuple(p.with_forwards(p.forwards * ratio) if p in mine else p for p in parts)
    names = ", ".join(sorted({p.name for p in mine}))
    return out, [
        f"{names}: run once per fully accepting request (the captures' forwards per cycle grow"
        " with the batch, about the share accepting every draft):"
        f" x{ratio:.2f} at {counted(k2, 'draft')}, the share of requests accepting every draft"
        f" ({full(k2):.2f} against {full(k):.2f} at {k})"
    ]
