"""Several captures of one program as one model (issue 32): their verify, draft and decode steps
become measured points, fitted over what drives each phase (:mod:`verifyprof.model.cycle.
phase_fit`), and every other configuration is predicted from the nearest capture, moved along
those fits; the model file's roofline only past the last measured point.

A configuration some capture measured (its batch, context and draft count) is that capture's own
cycle: ``measured``. The others say how far they are from one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from verifyprof.model.cycle.batch_cost import Shape, deltas_ms
from verifyprof.model.cycle.expert_union import UnionFit, fit_union
from verifyprof.model.cycle.fit_checks import check_finite
from verifyprof.model.cycle.moe_split import ROUTING, plain_less_moe, routing_curve, sweep_rest
from verifyprof.model.cycle.phase_fit import (
    FIXED_PHASES,
    INTERPOLATED,
    MEASURED,
    Point,
    StepFit,
    UnusableFit,
    Value,
    line_fit,
    step_fit,
)
from verifyprof.model.cycle.width_fit import WidthFit
from verifyprof.model.fixes.base import Scenario, Skip, cycle_of
from verifyprof.model.fixes.cycle import plain_measured, plain_state
from verifyprof.model.fixes.launch_growth import LaunchLine, launch_gap_delta, verify_line
from verifyprof.model.fixes.part_slopes import PartSlope, slopes_of
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.profile import VerifyProfile

MOE = "gemm_moe"


@dataclass
class Capture:
    """One capture's state as the model starts from it, and where it was taken."""

    label: str
    profile: VerifyProfile
    scenario: Scenario
    batch: int
    context: float
    num_draft: int
    predicted: bool = False  # a state no run measured (today's after the plan's fixes)
    # no capture says its context (issue 41): ``context`` is the assumption its rows rest on
    context_assumed: bool = False

    @property
    def key(self) -> tuple[int, float, int]:
        return (self.batch, self.context, self.num_draft)


@dataclass
class Measured:
    """The captures (the first is today's) and the fits made from all of them."""

    captures: list[Capture]
    fit: StepFit
    slopes: tuple[PartSlope, ...] = ()
    # per (batch, context): [(drafts, draft ms per cycle)] where captures differ in draft count
    drafts: dict[tuple[int, float], list[tuple[int, float]]] = field(default_factory=dict)
    # plain decoding's step over batch and context, where two or more loads measured it
    decode: StepFit | None = None
    # the fit's inputs: each capture's step and its width sweep (refitted without the MoE GEMM
    # where the captures' MoE GEMM times fit the experts touched, :meth:`moe_union`)
    points: tuple[Point, ...] = ()
    sweeps: tuple[tuple[Point, dict[int, float]], ...] = ()
    plain_points: tuple[Point, ...] = ()  # plain decoding's measured steps (``decode``'s)
    launches: LaunchLine | None = None  # the eager verify's launches per forward over batch
    _moe: dict = field(default_factory=dict, repr=False)

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(sorted({c.batch for c in self.captures}))

    @property
    def contexts(self) -> tuple[float, ...]:
        return tuple(sorted({c.context for c in self.captures}))

    def exact(self, batch: int, context: float, k: int) -> Capture | None:
        return next((c for c in self.captures if c.key == (batch, float(context), k)), None)

    def anchor(self, batch: int, context: float, k: int) -> Capture:
        """The capture nearest to a configuration (log distance in batch and context; the same
        draft count first among equals; then the order given)."""

        def distance(c: Capture) -> tuple[float, int]:
            d = abs(math.log(batch / c.batch)) + abs(
                math.log(max(context, 1.0) / max(c.context, 1.0))
            )
            return (round(d, 9), c.num_draft != k)

        return min(self.captures, key=distance)

    def draft_scale(self, batch: int, context: float, k: int, k2: int) -> tuple[float, str] | None:
        """Draft time at ``k2`` drafts over that at ``k`` from the captures at one batch and
        context that measured two or more draft counts (``a + b k``, least squares)."""
        points = self.drafts.get((batch, float(context)))
        if not points or len({n for n, _ in points}) < 2:
            return None
        b, a = line_fit([n for n, _ in points], [ms for _, ms in points])
        at_k, at_k2 = a + b * k, a + b * k2
        if at_k <= 0:
            return None
        ks = sorted({n for n, _ in points})
        basis = MEASURED if k2 in ks else INTERPOLATED if ks[0] < k2 < ks[-1] else "extrapolated"
        return max(at_k2, 0.0) / at_k, basis

    def batch_basis(self, batch: int, context: float) -> str:
        """How a batch and context relate to the captured ones (the batches captured at the
        nearest captured context)."""
        bs, cs = self.fit.batches_near(context), self.contexts
        inside_b = bs[0] <= batch <= bs[-1]
        inside_c = cs[0] <= context <= cs[-1]
        if float(batch) in bs and float(context) in cs:
            return MEASURED
        return INTERPOLATED if inside_b and inside_c else "extrapolated"

    def union_fit(self, model: ModelConfig | None) -> UnionFit | None:
        """The experts touched over tokens per forward, fitted to the captures' MoE GEMM times
        (None: no MoE in the model file, or no MoE GEMM measured)."""
        if model is None or model.moe is None:
            return None
        key = (model.moe.experts, model.moe.top_k)
        if key not in self._moe:
            pts = [(p.tokens, p.phases_ms.get(MOE, 0.0)) for p in self.points]
            pts = [(n, ms) for n, ms in pts if ms > 0]
            self._moe[key] = fit_union(*key, pts) if pts else None
        return self._moe[key]

    def moe_union(self, model: ModelConfig | None) -> UnionFit | None:
        """The union the curves move the MoE GEMM by: where the captures measured it at two or
        more token counts (pinned, or independent routing with a wider band where they could
        not pin it); None with one token count (the roofline's union, as before: said so)."""
        u = self.union_fit(model)
        return u if u is not None and len({n for n, _ in u.points}) > 1 else None

    def routing(self, u: UnionFit | None) -> WidthFit | None:
        """With a union, the MoE routing kernels over tokens per forward from every capture's
        verify and width sweep (:func:`routing_curve`); None without one, or where fewer than two
        token counts measured them (the routing then stays in the step's fit)."""
        if u is None:
            return None
        sweeps = [(p, c.profile.width_routing) for p, c in zip(self.points, self.captures)]
        return routing_curve(list(self.points), sweeps)

    def fit_without_moe(self, u: UnionFit) -> StepFit:
        """The step fitted without its MoE GEMM, which the union carries, and its routing where
        :meth:`routing` has it: each capture's phases less them, each width sweep less its own
        measured MoE GEMM (else the union's at its tokens: :func:`sweep_rest`) and routing."""
        key = ("rest", u.experts, u.top_k)
        if key not in self._moe:
            r = self.routing(u)
            apart = (MOE, ROUTING) if r is not None else (MOE,)
            points = [replace(p, phases_ms=_without(p.phases_ms, apart)) for p in self.points]
            by_label = {c.label: c.profile for c in self.captures}
            sweeps = []
            for ref, widths in self.sweeps:
                prof = by_label[ref.label]
                rest = sweep_rest(
                    widths, prof.width_moe, ref.phases_ms.get(MOE, 0.0), u, ref.batch, ref.width
                )
                if r is not None:
                    own = prof.width_routing
                    rest = {w: t - own.get(w, r.at(ref.batch * w)[0]) for w, t in rest.items()}
                sweeps.append((replace(ref, phases_ms=_without(ref.phases_ms, apart)), rest))
            self._moe[key] = step_fit(points, sweeps)
        return self._moe[key]

    def plain_at(self, batch: int, context: float, model: ModelConfig | None) -> Value:
        """Plain decoding's step at a load from its measured steps (``decode``); with a union,
        the line through them less the union's MoE GEMM, which is added back at the batch (the
        experts one token a request touches saturate: :mod:`verifyprof.model.cycle.moe_split`)."""
        u = self.moe_union(model)
        if u is None:
            return self.decode.at(batch, 1, context)
        key = ("plain", u.experts, u.top_k)
        if key not in self._moe:
            self._moe[key] = step_fit(plain_less_moe(list(self.plain_points), u), [])
        v = self._moe[key].at(batch, 1, context)
        return Value(v.ms + u.ms_at(batch), v.basis, v.band + u.band)

    def union_notes(self, model: ModelConfig | None) -> list[str]:
        """The MoE GEMM's measured growth and the union the curves use, in words."""
        u = self.union_fit(model)
        return [] if u is None else u.words(used=self.moe_union(model) is not None)

    def move(
        self, profile: VerifyProfile, s: Scenario, frm: Shape, to: Shape
    ) -> tuple[dict[str, float], str, float]:
        """Per-phase deltas of the verify from ``frm`` to ``to`` along the fit (the tokens' change
        on the GEMMs, the requests' and KV's on the phases that grew between the captures; the
        MoE GEMM by the experts touched where the captures fitted them, and its routing by its
        measured curve over tokens), the basis of the value at ``to`` and its band."""
        u = self.moe_union(s.model)
        fit = self.fit if u is None else self.fit_without_moe(u)
        growth = _growth(s, moe=u is None)
        tok0 = fit.tokens_ms(frm.batch, frm.width, growth, frm.context)[0]
        tok1 = fit.tokens_ms(to.batch, to.width, growth, to.context)[0]
        rest0, rest1 = self._rest(frm, s, fit), self._rest(to, s, fit)
        v = profile.verify.phases_ms
        r = self.routing(u)
        skip = () if u is None else (MOE,) if r is None else (MOE, ROUTING)
        deltas: dict[str, float] = {}
        _add(deltas, _spread(tok1 - tok0, _gemms(v, skip), v))
        _add(deltas, _spread(rest1 - rest0, self.grown(v, skip), v))
        if u is not None:
            _add(deltas, {MOE: v.get(MOE, 0.0) * (u.scale(frm.tokens, to.tokens) - 1.0)})
        if r is not None:  # the routing along its measured curve over tokens, not the line
            _add(deltas, {ROUTING: r.at(to.tokens)[0] - r.at(frm.tokens)[0]})
        _add(deltas, launch_gap_delta(self.launches, profile.verify, frm.batch, to.batch))
        value = fit.at(to.batch, to.width, to.context, growth)
        return deltas, value.basis, value.band + (u.band if u is not None else 0.0)

    def _rest(self, shape: Shape, s: Scenario, f: StepFit) -> float:
        """The requests' and KV's part at a shape; where no capture varied the load, the
        attention's roofline floor (the model file's KV bytes) in its place."""
        if not f.load_varied and s.model is not None and s.hardware is not None:
            ref = self.captures[0]
            d = deltas_ms(
                s.model,
                s.hardware,
                Shape(ref.batch, shape.width, ref.context),
                Shape(shape.batch, shape.width, shape.context),
                s.tp,
            )
            return f.base_ms + d["attention"]
        return f.rest_ms(shape.batch, shape.context)

    def grown(self, v: dict[str, float], skip: tuple[str, ...] = ()) -> list[str]:
        """The busy phases that grew from the smallest capture to the largest (the requests' and
        KV's share lands on them; ``skip``: phases moved by a model of their own), else attention
        and the copies."""
        caps = sorted(self.captures, key=lambda c: c.batch * max(c.context, 1.0))
        lo, hi = caps[0].profile.verify.phases_ms, caps[-1].profile.verify.phases_ms
        fixed = (*FIXED_PHASES, *skip)
        names = [p for p in v if p not in fixed and hi.get(p, 0.0) > lo.get(p, 0.0) * 1.05]
        return names or [p for p in ("attention", "memcpy") if p in v] or ["attention"]

    def notes(self) -> list[str]:
        """What the model rests on, in words."""
        caps = ", ".join(
            f"{c.label} (batch {c.batch}, context"
            f" {f'unknown, {c.context:g} assumed' if c.context_assumed else f'{c.context:g}'},"
            f" k = {c.num_draft})"
            for c in self.captures
        )
        f = self.fit
        words = [
            f"one model from {len(self.captures)} capture(s) of one program: {caps}",
            f"the verify's GPU work fitted over tokens per forward (measured {f.tokens[0]:g} to"
            f" {f.tokens[-1]:g}: {f.per_token_ms * 1e3:.2f} us a token"
            + (
                f" plus {f.per_token_kv_ms * 1e6:.2f} ns per KV token it attends to"
                if f.per_token_kv_ms > 0
                else ""
            )
            + ")"
            + (
                f", requests ({f.per_request_ms * 1e3:.1f} us each) and KV tokens read"
                f" ({f.per_kv_token_ms * 1e6:.1f} us per thousand); residual"
                f" {100 * f.residual:.1f}%"
                if f.load_varied
                else "; one load captured: attention's growth with batch and context is the"
                " model file's KV bytes at the hardware's bandwidth (roofline)"
            ),
            "past the last measured point: the fit's own slope, or the model file's roofline where"
            " it grows faster, anchored at that point",
        ]
        if f.kv_floor_batch > min(self.batches):
            words.append(_floor_words(f, "a forward", "captures"))
        if self.decode is not None:
            d = self.decode
            words.append(
                f"plain decoding from its own measured steps at {len(d.points)} load(s), fitted"
                " over batch and context (not from the verify)"
            )
            if d.kv_floor_batch > min(d.batches):
                words.append("plain decoding: " + _floor_words(d, "a step", "its steps"))
        if f.kv_or_requests:
            words.append(
                "every capture has one context, so per-request work and KV reads cannot be told"
                " apart (taken as KV): a capture at another context settles it"
            )
        if len(self.batches) == 1:
            words.append(
                f"one batch measured ({self.batches[0]}): every other batch is extrapolated;"
                " a capture at the largest batch you serve measures it"
            )
        return words


def _floor_words(f: StepFit, what: str, taken: str) -> str:
    """A fit's own B* in words (the verify's and plain decoding's, said alike)."""
    return (
        f"below batch {f.kv_floor_batch:.1f} {what} reads its KV cache latency-bound (its context"
        f" costs what that many requests' would): solved from {taken} at two contexts, each at two"
        " batches (with four, exactly: no residual to judge it by)"
    )


def _gemms(v: dict[str, float], skip: tuple[str, ...] = ()) -> list[str]:
    names = [p for p in ("gemm_dense", MOE) if v.get(p, 0.0) > 0 and p not in skip]
    return names or ["gemm_dense"]


def _without(phases: dict[str, float], apart: tuple[str, ...] = (MOE,)) -> dict[str, float]:
    return {p: t for p, t in phases.items() if p not in apart}


def _add(into: dict[str, float], more: dict[str, float]) -> None:
    for p, d in more.items():
        into[p] = into.get(p, 0.0) + d


def _spread(delta: float, names: list[str], v: dict[str, float]) -> dict[str, float]:
    total = sum(v.get(p, 0.0) for p in names)
    if total <= 0:
        return {names[0]: delta}
    return {p: delta * v.get(p, 0.0) / total for p in names}


def _growth(s: Scenario, moe: bool = True):
    """The model file's GEMM floor change between two token counts (``moe``: the routed experts'
    too; None without a model file and hardware)."""
    if s.model is None or s.hardware is None:
        return None

    def tokens(x0: float, x1: float) -> float:
        d = deltas_ms(s.model, s.hardware, Shape(int(x0), 1, 0.0), Shape(int(x1), 1, 0.0), s.tp)
        return d["gemm_dense"] + (d[MOE] if moe else 0.0)

    return tokens


def measured_from(captures: list[Capture]) -> Measured:
    """One model from several captures of one program (the first: today's)."""
    points = [
        Point(c.batch, _width(c), c.context, c.profile.verify.phases_ms, c.label) for c in captures
    ]
    sweeps = [(p, c.profile.width_times) for p, c in zip(points, captures) if c.profile.width_times]
    fit = step_fit(points, sweeps)
    drafts: dict[tuple[int, float], list[tuple[int, float]]] = {}
    for c in captures:
        ms = sum(p.cost_ms for p in c.scenario.parts if p.name == "draft") or c.scenario.draft_ms
        what = f"the draft of {c.label} (batch {c.batch}, k = {c.num_draft})"
        check_finite("draft-count line", what, "time", {"{} ms a cycle": ms}, c.label)
        drafts.setdefault((c.batch, c.context), []).append((c.num_draft, ms))
    decode, plain_points = _decode_fit(captures)
    m = Measured(
        captures,
        fit,
        slopes_of(captures),
        drafts,
        decode,
        tuple(points),
        tuple(sweeps),
        tuple(plain_points),
        launches=verify_line(captures),
    )
    for c in captures:  # each capture's own state knows the others (its draft counts, say)
        c.scenario = replace(c.scenario, measured=m)
    return m


def _decode_fit(captures: list[Capture]) -> tuple[StepFit | None, list[Point]]:
    """Plain decoding's measured step (a traced decode, or ``capture --decode-cmd``'s unprofiled
    rate) fitted over batch and context like the verify's rest; None where fewer than two batches
    measured it, or where its steps make no fit (:class:`UnusableFit`): plain decoding then moves
    from the nearest capture's along the verify's fit, which carries the GEMMs' growth with batch
    (a line through one batch's decodes would not). With the measured steps it fits."""
    points = []
    for c in captures:
        if c.predicted or not plain_measured(c.profile, c.scenario):
            continue
        try:
            state, plain, _ = plain_state(c.profile, c.scenario)
        except Skip:
            continue
        points.append(
            Point(c.batch, 1, c.context, {"step": cycle_of(state, plain).cycle_ms}, c.label)
        )
    if len({p.batch for p in points}) < 2:  # one batch: its growth with batch is unmeasured
        return None, points
    try:
        return step_fit(points, []), points
    except UnusableFit:  # a step that is not a number: the verify's fit carries plain decoding
        return None, points


def _width(c: Capture) -> int:
    return c.profile.width or c.num_draft + 1
