"""Each part of the cycle's GPU time per request of batch, fitted over the captures of one
program (the draft's, the accept's: :func:`verifyprof.model.fixes.batch.at_load_measured`
moves them by it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifyprof.model.cycle.fit_checks import check_finite
from verifyprof.model.cycle.phase_fit import line_fit
from verifyprof.model.fixes.base import Scenario
from verifyprof.model.fixes.launch_growth import LaunchLine, launch_line

PER_ROW_SHARE = 0.5  # of a part's forwards at the largest captured batch: grown with the batch


@dataclass(frozen=True)
class PartSlope:
    """How much one part's GPU time grows per request of batch (ms), fitted over the captures;
    for a part run once per request (a per-row catch-up loop: its forwards per cycle grow with
    the batch), how many forwards it adds per request instead: its whole time, host included,
    follows them."""

    name: str
    per_request_ms: float
    forwards_per_request: float = 0.0
    forwards_at_zero: float = 0.0  # the fit's intercept: forwards = at_zero + per_request x batch
    # an eager part whose launches per forward grow with the batch (a loop over the rows inside
    # its forward): its host time follows them (:mod:`verifyprof.model.fixes.launch_growth`)
    launches: LaunchLine | None = None

    def forwards_at(self, batch: float) -> float:
        """The fitted forwards per cycle at ``batch``, at the captures' draft count."""
        return self.forwards_at_zero + self.forwards_per_request * batch

    @property
    def per_row(self) -> bool:
        return self.forwards_per_request > 0


def slopes_of(captures: list[Any]) -> tuple[PartSlope, ...]:
    """Per-part GPU time per extra request, least squares over the captures (``measured.Capture``,
    the first today's) with today's draft count and context (never negative: a part measured
    cheaper at a larger batch is noise); :class:`UnusableFit` where a part's time is not a
    finite number."""
    ref = captures[0]
    same = [c for c in captures if (c.context, c.num_draft) == (ref.context, ref.num_draft)]
    if len({c.batch for c in same}) < 2:
        return ()
    busy = [(c.batch, _busy(c.scenario)) for c in same]
    for c, (_, parts) in zip(same, busy):
        shown = {f"{name} {{}} ms": ms for name, ms in parts.items()}
        what = f"{c.label} (batch {c.batch})"
        check_finite("slope per request of the cycle's parts", what, "time", shown, c.label)
    names = sorted(set.intersection(*(set(b) for _, b in busy)))
    batches = [b for b, _ in busy]
    out = []
    for name in names:
        slope, _ = line_fit(batches, [parts[name] for _, parts in busy])
        forwards = [_forwards(c.scenario, name) for c in same]
        rows, at0 = line_fit(batches, forwards)
        top = at0 + rows * max(batches)
        per_row = rows > 0 and rows * max(batches) >= PER_ROW_SHARE * top
        line = None if per_row else launch_line(_launches(same, name))
        out.append(
            PartSlope(
                name, max(slope, 0.0), rows if per_row else 0.0, at0 if per_row else 0.0, line
            )
        )
    return tuple(out)


def _launches(captures: list[Any], name: str) -> list[tuple[int, float]]:
    """(batch, kernels per forward) of an eager part in each capture; none where a capture ran
    it otherwise (a graph replay launches its kernels from the GPU)."""
    out = []
    for c in captures:
        parts = [p for p in c.scenario.parts if p.name == name]
        forwards = sum(p.forwards for p in parts)
        if forwards <= 0 or any(p.mode != "eager" for p in parts):
            return []
        out.append((c.batch, sum(p.kernels for p in parts) / forwards))
    return out


def _forwards(s: Scenario, name: str) -> float:
    return sum(part.forwards for part in s.parts if part.name == name)


def _busy(s: Scenario) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in s.parts:
        out[part.name] = out.get(part.name, 0.0) + part.busy_ms
    return out
