"""The verify's (and a decode step's) cost fitted over what drives it, from every measured forward
of several captures of one program (issue 32): a capture at batch 8 says how the step grows with
its requests and their KV cache, one at 4x the context which of the two it is, one at k = 1 or
a width sweep how it grows with the tokens of a forward.

The step's GPU work is split by what drives it:

* **tokens per forward** (batch x width): GEMMs and the work on each token. Its cost per token
  comes from what varies the tokens alone: width sweeps and captures at one batch and context
  that differ in width (a shared slope, each population its own intercept), never negative.
  Each token also attends to its request's whole context, so where the populations span two
  contexts the slope is ``g + h context`` (at one context, ``h`` is 0).
* **KV tokens** (batch x context: attention and cache reads and writes) and **requests** (batch:
  per-request work, such as a static cache rewritten for every row): the rest, least squares
  ``a + r batch + c batch x context`` over the captures (the tokens' share taken out first).
  Where every capture has one context the two cannot be told apart: the growth goes to the KV
  term, and the notes say a capture at another context would settle it.
* **the batch that fills the GPU** (``kv_floor_batch``, B*): a forward of few requests reads
  its KV cache with too few thread blocks to fill the GPU (latency-bound), a loaded one at the
  memory's bandwidth. So the KV term is ``c max(batch, B*) x context``: below B* a forward's
  context costs what B* requests' would. B* is fitted (least squares over a grid, the smallest
  where several fit alike) where captures at two contexts were each taken at two batches: four
  such captures solve it exactly (no residual is left to judge it by; the bands' distance terms
  carry the doubt). Without such a rectangle B* is 0 (no floor), and the context's slope comes
  from the batch that measured it (bench/README, "Predictions against it").
* **fixed**: graph gaps, launches, host time: the mean over the captures.

At a measured configuration the value is ``measured``; inside the measured batches, contexts
and tokens ``interpolated``; outside them ``extrapolated``; and ``roofline`` past the last
measured tokens, where the model file's GEMM floor carries the tokens' part (anchored there).
Every value carries a relative band: the fit's residual (at least :data:`MIN_BAND`) plus
:data:`BAND_PER_DOUBLING` per doubling of the distance to the nearest measured point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from verifyprof.contracts import phases
from verifyprof.model.cycle.fit_checks import (
    STEP_FIT,
    UnusableFit,  # noqa: F401 - re-exported
    check_finite,
)

FIXED_PHASES = (*phases.IDLE, *phases.OTHER)
MEASURED, INTERPOLATED, EXTRAPOLATED, ROOFLINE = (
    "measured",
    "interpolated",
    "extrapolated",
    "roofline",
)
# a load row that rests on a fact no capture states (their context, issue 41): the least confident
ASSUMED = "assumed"
BASES = (MEASURED, INTERPOLATED, EXTRAPOLATED, ROOFLINE, ASSUMED)  # in order of confidence
# a capture's cycle against unprofiled processes of its own configuration: -2.0% (first H200
# campaign), -3.2% and -2.4% (second; bench/README, "Predictions against it")
MIN_BAND = 0.035
BAND_PER_DOUBLING = 0.06  # the distance term, checked out of sample on the H200 (bench/README)
# inside the measured loads, per doubling to the nearest (plain decoding between batch 1 and 8
# of the second campaign: +3.8% at 2, +4.7% at 4, where the line through them had no residual)
BAND_BETWEEN_PER_DOUBLING = 0.03
# plain decoding measured by one short unprofiled run (capture --decode-cmd, or a rate given)
# against other processes of the same configuration: +2.3% at batch 8 and +7.2% at batch
# 64 (bench/README, the third H200 campaign)
PLAIN_RUN_BAND = 0.075
# past a load no capture varied (one batch, one context): the growth is the roofline's guess
BAND_PER_DOUBLING_UNMEASURED = 0.15


def worst(*bases: str) -> str:
    """The least confident of several bases."""
    return max(bases, key=BASES.index) if bases else MEASURED


@dataclass(frozen=True)
class Point:
    """One measured forward: ``batch`` requests of ``width`` tokens over ``context`` KV tokens
    each, its mean phases (ms)."""

    batch: int
    width: int
    context: float
    phases_ms: dict[str, float]
    label: str

    @property
    def tokens(self) -> float:
        return float(self.batch * self.width)

    @property
    def busy_ms(self) -> float:
        return sum(t for p, t in self.phases_ms.items() if p not in FIXED_PHASES)

    @property
    def fixed_ms(self) -> float:
        return sum(t for p, t in self.phases_ms.items() if p in FIXED_PHASES)


@dataclass(frozen=True)
class Value:
    """A fitted time, how it was had, and its relative band."""

    ms: float
    basis: str
    band: float


@dataclass(frozen=True)
class StepFit:
    """A step's time over batch, width and context, from measured points."""

    per_token_ms: float  # the tokens' slope (g: at context 0)
    base_ms: float  # a
    per_request_ms: float  # r
    per_kv_token_ms: float  # c
    fixed_ms: float
    residual: float  # rms relative residual of the captures' steps against the fit
    tokens: tuple[float, ...]  # measured tokens per forward, ascending
    batches: tuple[int, ...]
    contexts: tuple[float, ...]
    points: tuple[tuple[int, int, float], ...]  # measured (batch, width, context)
    kv_or_requests: bool = False  # one context only: requests and KV tokens not told apart
    kv_floor_batch: float = 0.0  # B*: below it a forward reads its KV cache latency-bound
    per_token_kv_ms: float = 0.0  # h: a token's attention over each KV token of its context

    def token_slope(self, context: float) -> float:
        return self.per_token_ms + self.per_token_kv_ms * context

    def tokens_ms(
        self, batch: int, width: int, growth=None, context: float = 0.0
    ) -> tuple[float, str]:
        """The tokens' part at ``batch`` x ``width`` tokens over ``context``, and whether it is past
        the measured tokens by the roofline (``growth(x0, x1)``: the model file's GEMM floor
        change; the attention's share stays linear)."""
        t = float(batch * width)
        top = self.tokens[-1] if self.tokens else t
        attend = self.per_token_kv_ms * context * t
        if t > top and growth is not None:  # past the measured tokens: the roofline, anchored
            return self.per_token_ms * top + attend + max(growth(top, t), 0.0), ROOFLINE
        return self.per_token_ms * t + attend, INTERPOLATED

    def rest_ms(self, batch: int, context: float) -> float:
        return (
            self.base_ms
            + self.per_request_ms * batch
            + self.per_kv_token_ms * max(batch, self.kv_floor_batch) * context
        )

    def busy(self, batch: int, width: int, context: float, growth=None) -> tuple[float, str]:
        """The step's GPU work at a shape, and how its tokens' part was had."""
        tok, how = self.tokens_ms(batch, width, growth, context)
        return max(tok + self.rest_ms(batch, context), 1e-6), how

    def at(
        self,
        batch: int,
        width: int,
        context: float,
        growth: Callable[[float, float], float] | None = None,
    ) -> Value:
        """The step at a shape (GPU work + fixed), its basis and band."""
        busy, how = self.busy(batch, width, context, growth)
        ms = busy + self.fixed_ms
        band = max(self.residual, MIN_BAND)
        if (batch, width, float(context)) in self.points:
            return Value(ms, MEASURED, band)
        load = _log2_out(float(batch), self.batches_near(context)) + _log2_out(
            float(context), self.contexts
        )
        tokens = _log2_out(float(batch * width), self.tokens)
        per_load = BAND_PER_DOUBLING if self.load_varied else BAND_PER_DOUBLING_UNMEASURED
        # between measured loads: a line through few points knows nothing of the curve between
        near = _log2_in(float(batch), self.batches_near(context)) + _log2_in(
            float(context), self.contexts
        )
        band += BAND_BETWEEN_PER_DOUBLING * near
        if how == ROOFLINE or (load and not self.load_varied):
            basis = ROOFLINE
        else:
            basis = INTERPOLATED if load + tokens == 0 else EXTRAPOLATED
        return Value(ms, basis, band + per_load * load + BAND_PER_DOUBLING * tokens)

    def batches_near(self, context: float) -> tuple[float, ...]:
        """The batches captured at ``context``; between two captured contexts, those captured at
        both; past them, at the nearest (a batch is between measured points only where a context
        measured both sides of it)."""
        cs = self.contexts
        if cs[0] < context < cs[-1] and float(context) not in cs:
            lo = max(c for c in cs if c < context)
            hi = min(c for c in cs if c > context)
            both = self._batches_at(lo) & self._batches_at(hi)
            if both:
                return tuple(sorted(both))
        near = min(cs, key=lambda c: abs(math.log(max(context, 1) / max(c, 1))))
        return tuple(sorted(self._batches_at(near)))

    def _batches_at(self, context: float) -> set[float]:
        return {float(b) for b, _, c in self.points if c == context}

    @property
    def load_varied(self) -> bool:
        """Whether the captures varied the load (batch or context): else its growth is the
        roofline's."""
        return len(self.batches) > 1 or len(self.contexts) > 1


def _log2_in(x: float, measured: tuple[float, ...]) -> float:
    """How many doublings ``x`` lies from the nearest measured value, inside the measured range
    (0 outside it: :func:`_log2_out` counts that)."""
    if not measured or not measured[0] <= x <= measured[-1]:
        return 0.0
    return min(abs(math.log2(max(x, 1e-9) / max(m, 1e-9))) for m in measured)


def _log2_out(x: float, measured: tuple[float, ...]) -> float:
    """How many doublings ``x`` lies outside the measured range (0 inside it)."""
    if not measured or measured[0] <= x <= measured[-1]:
        return 0.0
    edge = measured[0] if x < measured[0] else measured[-1]
    return abs(math.log2(max(x, 1e-9) / max(edge, 1e-9)))


def _token_slope(
    populations: list[tuple[int, float, list[tuple[float, float]]]],
) -> tuple[float, float] | None:
    """One slope over tokens shared by the populations (``(batch, context, [(tokens, ms)])``, each
    its own intercept): the width sweeps and the captures that differ in width alone. ``g + h
    context`` where the largest batch captured was swept at two contexts (a lighter batch's
    extra query tokens are latency-bound, and would not carry to load), else one slope. None:
    nothing varies the tokens."""
    varied = [(b, c, pop) for b, c, pop in populations if len({x for x, _ in pop}) > 1]
    if not varied:
        return None
    top = max(b for b, _, _ in populations)
    at_top = [(c, pop) for b, c, pop in varied if b == top]
    if len({c for c, _ in at_top}) > 1:
        x, c, y = _centred(at_top)
        (g, h), *_ = np.linalg.lstsq(np.column_stack([x, x * c]), y, rcond=None)
        if g >= 0 and h >= 0:
            return float(g), float(h)
        if g < 0 < h:  # the tokens cost nothing of their own: all is attention
            return 0.0, max(float((x * c * y).sum() / ((x * c) ** 2).sum()), 0.0)
    x, _, y = _centred([(c, pop) for _, c, pop in varied])
    return max(float((x * y).sum() / (x * x).sum()), 0.0), 0.0


def _centred(populations: list[tuple[float, list[tuple[float, float]]]]):
    """Tokens and times about each population's own mean, and each point's context."""
    xs, cs, ys = [], [], []
    for context, pop in populations:
        mx = sum(x for x, _ in pop) / len(pop)
        my = sum(y for _, y in pop) / len(pop)
        xs += [x - mx for x, _ in pop]
        cs += [context] * len(pop)
        ys += [y - my for _, y in pop]
    return np.array(xs), np.array(cs), np.array(ys)


def _check_finite(points: list[Point], sweeps: list[tuple[Point, dict[int, float]]]) -> None:
    """UnusableFit naming the first step (its context, then every phase, the fixed ones too) or
    width-sweep time that is not a finite number: one check, before any term is fitted."""
    for p in points:
        at = f"the step at batch {p.batch}"
        check_finite(STEP_FIT, f"{at} ({p.label})", "context", {"context {}": p.context}, p.label)
        if p.context < 0:  # no KV cache holds fewer than no tokens: refused as NaN is
            raise UnusableFit(
                f"no {STEP_FIT}: {at} ({p.label}) has a context that is negative"
                f" (context {p.context:g})",
                p.label,
            )
        shown = {f"{n} {{}} ms": t for n, t in p.phases_ms.items()}
        check_finite(STEP_FIT, f"{at}, context {p.context:g} ({p.label})", "time", shown, p.label)
    for ref, widths in sweeps:
        shown = {f"width {w}: {{}} ms": t for w, t in widths.items()}
        what = f"the width sweep at batch {ref.batch} ({ref.label})"
        check_finite(STEP_FIT, what, "time", shown, ref.label)


def step_fit(points: list[Point], sweeps: list[tuple[Point, dict[int, float]]]) -> StepFit:
    """The fit from the captures' steps and their width sweeps (``(the capture's step, {width:
    mean total ms})``)."""
    pops = [
        (
            ref.batch,
            ref.context,
            [(float(ref.batch * w), t) for w, t in widths.items() if w > 0 and t > 0],
        )
        for ref, widths in sweeps
    ]
    _check_finite(points, sweeps)
    by_load: dict[tuple[int, float], list[tuple[float, float]]] = {}
    for p in points:
        by_load.setdefault((p.batch, p.context), []).append((p.tokens, p.busy_ms))
    slope = _token_slope(pops + [(b, c, pop) for (b, c), pop in by_load.items()]) or (0.0, 0.0)
    g, h = slope
    rest = [(p.batch, p.context, p.busy_ms - (g + h * p.context) * p.tokens) for p in points]
    base, per_req, per_kv, blended, floor = _rest_fit(rest)
    terms = {
        "{} ms a token": g,
        "{} ms a token per KV token": h,
        "a {} ms": base,
        "{} ms a request": per_req,
        "{} ms a KV token": per_kv,
        "B* {}": floor,
    }
    check_finite(STEP_FIT, "the fitted step", "term", terms)
    fixed = sum(p.fixed_ms for p in points) / len(points)
    tokens = {p.tokens for p in points} | {x for _, _, pop in pops for x, _ in pop}
    fit = StepFit(
        g,
        base,
        per_req,
        per_kv,
        fixed,
        0.0,
        tuple(sorted(tokens)),
        tuple(sorted({p.batch for p in points})),
        tuple(sorted({float(p.context) for p in points})),
        tuple((p.batch, p.width, float(p.context)) for p in points),
        blended,
        floor,
        h,
    )
    errs = [
        fit.at(p.batch, p.width, p.context).ms / (p.busy_ms + p.fixed_ms) - 1
        for p in points
        if p.busy_ms + p.fixed_ms > 0
    ]
    resid = math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else 0.0
    return StepFit(**{**fit.__dict__, "residual": resid})


def _rest_fit(rest: list[tuple[int, float, float]]) -> tuple[float, float, float, bool, float]:
    """``a + r batch + c max(batch, B*) x context`` by least squares (r, c >= 0): as many terms as
    the captures can tell apart. Returns (a, r, c, requests and KV not told apart, B*)."""
    b = np.array([r[0] for r in rest], dtype=float)
    ctx = np.array([r[1] for r in rest], dtype=float)
    y = np.array([r[2] for r in rest], dtype=float)
    kv = b * ctx
    if len(set(zip(b, kv))) == 1:
        return float(y.mean()), 0.0, 0.0, False, 0.0
    if len(set(ctx)) == 1:  # batch and batch x context move together: one term (KV)
        c, a = line_fit(kv, y, nonneg=True)
        return a, 0.0, c, True, 0.0
    if len(set(b)) == 1:  # only the context moves
        c, a = line_fit(kv, y, nonneg=True)
        return a, 0.0, c, False, 0.0
    spans = [x for x in set(b) if len(set(ctx[b == x])) > 1]
    if len(spans) < 2:  # the floor is told apart only by two contexts at two batches
        a, r, c = _three_terms(b, kv, y)
        return a, r, c, False, 0.0
    best: tuple[float, float, tuple[float, float, float]] | None = None
    for floor in _floor_grid(b):
        coef = _three_terms(b, np.maximum(b, floor) * ctx, y)
        fitted = coef[0] + coef[1] * b + coef[2] * np.maximum(b, floor) * ctx
        sse = float(((fitted - y) ** 2).sum())
        if best is None or sse < best[0] * (1 - 1e-6) - 1e-12:  # ties: the smallest floor
            best = (sse, floor, coef)
    sse, floor, (a, r, c) = best
    return a, r, c, False, floor


def _floor_grid(b: np.ndarray) -> np.ndarray:
    """Candidate B*: the captured batches' range on a log grid (the smallest first)."""
    lo, hi = float(b.min()), float(b.max())
    return np.unique(np.concatenate([np.geomspace(lo, hi, 97), np.unique(b)]))


def _three_terms(b: np.ndarray, kv: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """``a + r batch + c batch x context`` (r, c >= 0)."""
    design = np.column_stack([np.ones_like(b), b, kv])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    a, r, c = map(float, coef)
    if r < 0:
        c, a = line_fit(kv, y, nonneg=True)
        r = 0.0
    elif c < 0:
        r, a = line_fit(b, y, nonneg=True)
        c = 0.0
    return a, r, c


def line_fit(x, y, nonneg: bool = False) -> tuple[float, float]:
    """Slope (``nonneg``: at least 0) and intercept of ``y = a + b x`` by least squares; a flat
    line where ``x`` does not vary."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    mx, my = x.mean(), y.mean()
    sxx = float(((x - mx) ** 2).sum())
    slope = float(((x - mx) * (y - my)).sum()) / sxx if sxx > 0 else 0.0
    slope = max(slope, 0.0) if nonneg else slope
    return slope, float(my - slope * mx)
