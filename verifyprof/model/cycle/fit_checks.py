"""The one check, and the one wording, of every number a measured fit is made from: the steps,
width sweeps and terms of :mod:`~verifyprof.model.cycle.phase_fit`, and the draft-count line and
per-request slopes of :mod:`~verifyprof.model.fixes.measured`. A number that is not finite makes
no fit (:class:`UnusableFit`), worded for what it is: infinite, or not a number (NaN); never a
NaN passed on and printed as a number."""

from __future__ import annotations

import math
from collections.abc import Iterable

from verifyprof.contracts.errors import VerifyprofError

STEP_FIT = "fit over batch and context"  # what phase_fit's refusals say is missing


class UnusableFit(VerifyprofError):
    """A fit the captures cannot make: a measured time or context that is not a finite number,
    or terms that come out not finite. Refused, never passed on as NaN. ``capture``: the label of
    the capture whose number it is (None where no one capture is to blame: the fitted terms).
    What rests on the fit is left out, saying so; the rest of the answer stands."""

    def __init__(self, problem: str, capture: str | None = None):
        super().__init__(problem)
        self.capture = capture


def not_finite_words(values: Iterable[float]) -> str:
    """What numbers that are not finite are: ``infinite``, ``not a number`` (NaN), or both."""
    values = list(values)
    nan, inf = any(math.isnan(v) for v in values), any(math.isinf(v) for v in values)
    if nan and inf:
        return "infinite or not a number"
    return "not a number" if nan else "infinite"


def check_finite(
    fit: str, subject: str, noun: str, shown: dict[str, float], capture: str | None = None
) -> None:
    """:class:`UnusableFit` where a number of ``shown`` is not finite: ``no FIT: SUBJECT has a
    NOUN that is infinite (attention inf ms)``. Each number is keyed by how it is shown, ``{}``
    standing for the number (``"attention {} ms"``)."""
    bad = [(shape, v) for shape, v in shown.items() if not math.isfinite(v)]
    if not bad:
        return
    has = f"a {noun} that is" if len(bad) == 1 else f"{noun}s that are"
    items = ", ".join(shape.replace("{}", f"{v:g}") for shape, v in bad)
    words = not_finite_words(v for _, v in bad)
    raise UnusableFit(f"no {fit}: {subject} has {has} {words} ({items})", capture)
