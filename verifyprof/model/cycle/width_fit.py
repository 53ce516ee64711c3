"""The verify's cost over width: one monotone, physically bounded curve through every measured
width, so that no prediction takes a noisy measured width as it is (a width-9 verify measured
cheaper than a width-8 one).

Two bounds hold for a forward over more tokens: it costs no less (t non-decreasing in width),
and at most proportionally more (t(w) / w non-increasing: the weights are read once whatever the
width). The fit is the least-squares non-decreasing curve through the measured means (pool
adjacent violators, weighted by steps), then capped from the left by the proportional bound.
Between measured widths it interpolates; past them it extrapolates the last marginal cost per
token, inside the same bounds, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

MEASURED, FITTED, EXTRAPOLATED = "measured", "fitted", "extrapolated"


@dataclass(frozen=True)
class WidthFit:
    """t(width) in ms from the measured widths."""

    widths: tuple[int, ...]  # measured widths, ascending
    measured_ms: tuple[float, ...]
    fitted_ms: tuple[float, ...]

    def at(self, width: int) -> tuple[float, str]:
        """t(width) and how it was had: measured (the fit keeps the measured mean), fitted
        (moved by the bounds, or between measured widths) or extrapolated (outside them)."""
        w, t = self.widths, self.fitted_ms
        if width in w:
            i = w.index(width)
            same = abs(t[i] - self.measured_ms[i]) <= 1e-9 * max(t[i], 1.0)
            return t[i], MEASURED if same else FITTED
        if w[0] < width < w[-1]:
            hi = next(i for i, x in enumerate(w) if x > width)
            lo = hi - 1
            frac = (width - w[lo]) / (w[hi] - w[lo])
            return t[lo] + frac * (t[hi] - t[lo]), FITTED
        if width > w[-1]:
            slope = max((t[-1] - t[-2]) / (w[-1] - w[-2]), 0.0)
            slope = min(slope, t[-1] / w[-1])  # at most proportional
            return t[-1] + slope * (width - w[-1]), EXTRAPOLATED
        slope = max((t[1] - t[0]) / (w[1] - w[0]), 0.0)
        est = t[0] - slope * (w[0] - width)
        return min(max(est, t[0] * width / w[0]), t[0]), EXTRAPOLATED

    def residual(self, width: int) -> float:
        """How far the measured mean at ``width`` sits from the fit (relative); elsewhere the
        distance at the measured widths either side: the width model's own noise there."""
        pairs = list(zip(self.widths, self.measured_ms, self.fitted_ms))
        errs = {w: abs(m - f) / f for w, m, f in pairs if f > 0}
        if width in errs or not errs:
            return errs.get(width, 0.0)
        below = [errs[w] for w in errs if w < width][-1:]
        above = [errs[w] for w in errs if w > width][:1]
        return max(below + above)

    def to_json(self) -> dict[str, list]:
        return {
            "widths": list(self.widths),
            "measured_ms": list(self.measured_ms),
            "fitted_ms": list(self.fitted_ms),
        }


def fit_widths(
    means: dict[int, float], counts: dict[int, float] | None = None, proportional: bool = True
) -> WidthFit | None:
    """The bounded monotone fit of measured mean verify times per width (None with fewer than two
    widths: one width says nothing about the slope). ``proportional`` False drops the bound of at
    most proportional growth, which holds for a whole forward (its weights read once) but not
    for one phase's kernels, whose time can step past proportional where one switches at a
    size."""
    points = sorted((int(w), float(t)) for w, t in means.items() if w and w > 0 and t > 0)
    if len(points) < 2:
        return None
    widths = [w for w, _ in points]
    values = [t for _, t in points]
    weights = [float((counts or {}).get(w, 1.0)) or 1.0 for w in widths]
    fitted = _non_decreasing(values, weights)
    for i in range(1, len(fitted) if proportional else 0):  # t(w) / w non-increasing
        fitted[i] = min(fitted[i], fitted[i - 1] * widths[i] / widths[i - 1])
    return WidthFit(tuple(widths), tuple(values), tuple(fitted))


def _non_decreasing(values: list[float], weights: list[float]) -> list[float]:
    """Weighted least-squares non-decreasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, wt in zip(values, weights):
        blocks.append([v, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, n2 = blocks.pop()
            m1, w1, n1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    out: list[float] = []
    for mean, _, n in blocks:
        out += [mean] * int(n)
    return out
