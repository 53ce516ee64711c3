"""The verify's (and a decode step's) cost fitted over what drives it, from every measured forward
of several captures of one program (issue 32): a capture at batch 8 says how the step grows with
its requests and their KV cache, one at 4x the context which of the two it is, one at k = 1 or
a width sweep how it grows with the tokens of a forward.

The step's GPU work is split by what drives it:

* **tokens per forward** (batch x width): GEMMs and the work on each token. Its cost per token
  comes from what varies the tokens alone: width sweeps and captures at one batch and context
  that differ in width (a shared slope, each population its own intercept), never negative.
* **KV tokens** (batch x context: attention and cache reads and writes) and **requests** (batch:
  per-request work, such as a static cache rewritten for every row): the rest, least squares
  ``a + r batch + c batch x context`` over the captures (the tokens' share taken out first).
  Where every capture has one context the two cannot be told apart: the growth goes to the KV
  term, and the notes say a capture at another context would settle it.
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

FIXED_PHASES = (*phases.IDLE, *phases.OTHER)
MEASURED, INTERPOLATED, EXTRAPOLATED, ROOFLINE = (
    "measured",
    "interpolated",
    "extrapolated",
    "roofline",
)
BASES = (MEASURED, INTERPOLATED, EXTRAPOLATED, ROOFLINE)  # in order of confidence
MIN_BAND = 0.02  # two processes of one configuration differ by about this much (bench/README)
BAND_PER_DOUBLING = 0.06  # the distance term, checked out of sample on the H200 (bench/README)
# past a load no capture varied (one batch, one context): the growth is the roofline's guess
BAND_PER_DOUBLING_UNMEASURED = 0.15
SAME = 0.01  # a driver within 1% of a measured one is that point


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

    per_token_ms: float  # the tokens' slope
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

    def tokens_ms(self, batch: int, width: int, growth=None) -> tuple[float, str]:
        """The tokens' part at ``batch`` x ``width`` tokens, and whether it is past the measured
        tokens by the roofline (``growth(x0, x1)``: the model file's GEMM floor change)."""
        t = float(batch * width)
        top = self.tokens[-1] if self.tokens else t
        if t > top and growth is not None:  # past the measured tokens: the roofline, anchored
            return self.per_token_ms * top + max(growth(top, t), 0.0), ROOFLINE
        return self.per_token_ms * t, INTERPOLATED

    def rest_ms(self, batch: int, context: float) -> float:
        return self.base_ms + self.per_request_ms * batch + self.per_kv_token_ms * batch * context

    def busy(self, batch: int, width: int, context: float, growth=None) -> tuple[float, str]:
        """The step's GPU work at a shape, and how its tokens' part was had."""
        tok, how = self.tokens_ms(batch, width, growth)
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
        if how == ROOFLINE or (load and not self.load_varied):
            basis = ROOFLINE
        else:
            basis = INTERPOLATED if load + tokens == 0 else EXTRAPOLATED
        return Value(ms, basis, band + per_load * load + BAND_PER_DOUBLING * tokens)

    def batches_near(self, context: float) -> tuple[float, ...]:
        """The batches captured at the captured context nearest to ``context`` (a batch is
        between measured points only where a context measured both sides of it)."""
        near = min(self.contexts, key=lambda c: abs(math.log(max(context, 1) / max(c, 1))))
        return tuple(sorted({float(b) for b, _, c in self.points if c == near}))

    @property
    def load_varied(self) -> bool:
        """Whether the captures varied the load (batch or context): else its growth is the
        roofline's."""
        return len(self.batches) > 1 or len(self.contexts) > 1


def _log2_out(x: float, measured: tuple[float, ...]) -> float:
    """How many doublings ``x`` lies outside the measured range (0 inside it)."""
    if not measured or measured[0] <= x <= measured[-1]:
        return 0.0
    edge = measured[0] if x < measured[0] else measured[-1]
    return abs(math.log2(max(x, 1e-9) / max(edge, 1e-9)))


def _token_slope(populations: list[list[tuple[float, float]]]) -> float | None:
    """One slope over tokens shared by every population (its own intercept each): the width
    sweeps and the captures that differ in width alone. None: nothing varies the tokens."""
    xs, ys = [], []
    for pop in populations:
        if len({x for x, _ in pop}) < 2:
            continue
        mx = sum(x for x, _ in pop) / len(pop)
        my = sum(y for _, y in pop) / len(pop)
        xs += [x - mx for x, _ in pop]
        ys += [y - my for _, y in pop]
    if not xs:
        return None
    sxx = sum(x * x for x in xs)
    return max(sum(x * y for x, y in zip(xs, ys)) / sxx, 0.0) if sxx > 0 else None


def step_fit(points: list[Point], sweeps: list[tuple[Point, dict[int, float]]]) -> StepFit:
    """The fit from the captures' steps and their width sweeps (``(the capture's step, {width:
    mean total ms})``)."""
    pops = [
        [(float(ref.batch * w), t) for w, t in widths.items() if w > 0 and t > 0]
        for ref, widths in sweeps
    ]
    by_load: dict[tuple[int, float], list[tuple[float, float]]] = {}
    for p in points:
        by_load.setdefault((p.batch, p.context), []).append((p.tokens, p.busy_ms))
    slope = _token_slope(pops + list(by_load.values()))
    slope = slope if slope is not None else 0.0
    rest = [(p.batch, p.context, p.busy_ms - slope * p.tokens) for p in points]
    base, per_req, per_kv, blended = _rest_fit(rest)
    fixed = sum(p.fixed_ms for p in points) / len(points)
    tokens = {p.tokens for p in points} | {x for pop in pops for x, _ in pop}
    fit = StepFit(
        slope,
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
    )
    errs = [
        fit.at(p.batch, p.width, p.context).ms / (p.busy_ms + p.fixed_ms) - 1
        for p in points
        if p.busy_ms + p.fixed_ms > 0
    ]
    resid = math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else 0.0
    return StepFit(**{**fit.__dict__, "residual": resid})


def _rest_fit(rest: list[tuple[int, float, float]]) -> tuple[float, float, float, bool]:
    """``a + r batch + c batch x context`` by least squares (r, c >= 0): as many terms as the
    captures can tell apart. Returns (a, r, c, requests and KV not told apart)."""
    b = np.array([r[0] for r in rest], dtype=float)
    kv = np.array([r[0] * r[1] for r in rest], dtype=float)
    y = np.array([r[2] for r in rest], dtype=float)
    if len(set(zip(b, kv))) == 1:
        return float(y.mean()), 0.0, 0.0, False
    contexts = {r[1] for r in rest}
    if len(contexts) == 1:  # batch and batch x context move together: one term (KV)
        c, a = line_fit(kv, y, nonneg=True)
        return a, 0.0, c, True
    if len(set(b)) == 1:  # only the context moves
        c, a = line_fit(kv, y, nonneg=True)
        return a, 0.0, c, False
    design = np.column_stack([np.ones_like(b), b, kv])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    a, r, c = map(float, coef)
    if r < 0:
        c, a = line_fit(kv, y, nonneg=True)
        r = 0.0
    elif c < 0:
        r, a = line_fit(b, y, nonneg=True)
        c = 0.0
    return a, r, c, False


def line_fit(x, y, nonneg: bool = False) -> tuple[float, float]:
    """Slope (``nonneg``: at least 0) and intercept of ``y = a + b x`` by least squares; a flat
    line where ``x`` does not vary."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    mx, my = x.mean(), y.mean()
    sxx = float(((x - mx) ** 2).sum())
    slope = float(((x - mx) * (y - my)).sum()) / sxx if sxx > 0 else 0.0
    slope = max(slope, 0.0) if nonneg else slope
    return slope, float(my - slope * mx)
