"""One point of the load curve (k drafts at a batch and a context) from the captures of one program
(``Scenario.measured``): a configuration a capture measured is that capture's own cycle; any
other is the nearest capture's state at k drafts, moved along the fitted phases to the batch and
context. Every point says its basis and its band (issue 32), and, where it is not measured, the
capture that would measure it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from verifyprof.model.cycle.batch_cost import Shape, compute_bound
from verifyprof.model.cycle.phase_fit import (
    EXTRAPOLATED,
    MEASURED,
    MIN_BAND,
    PLAIN_RUN_BAND,
    Value,
    worst,
)
from verifyprof.model.cycle.width_fit import WidthFit
from verifyprof.model.fixes.base import Scenario, Skip, cycle_of
from verifyprof.model.fixes.batch import PartSlope, at_load, at_load_measured
from verifyprof.model.fixes.cycle import plain_measured, plain_state
from verifyprof.model.fixes.draft import accept_at, at_drafts, draft_count_basis
from verifyprof.model.fixes.measured import Capture, Measured
from verifyprof.model.inputs.profile import VerifyProfile

_PREDICTED_BAND = 0.15  # a state after fixes: the plan's own prediction error (bench/README)


@dataclass
class KState:
    """A capture's state at k drafts, and how that state was had."""

    k: int
    profile: VerifyProfile
    s: Scenario
    width: int
    basis: str
    band: float
    label: str


def state_at(m: Measured, a: Capture, k: int, cache: dict) -> KState | None:
    """Capture ``a``'s state at ``k`` drafts (k = 0: plain decoding), cached per (capture, k)."""
    key = (a.label, k)
    if key not in cache:
        cache[key] = _state_at(m, a, k)
    return cache[key]


def _state_at(m: Measured, a: Capture, k: int) -> KState | None:
    width0 = a.profile.width or a.num_draft + 1
    if k == a.num_draft:
        return KState(k, a.profile, a.scenario, width0, MEASURED, MIN_BAND, a.label)
    if k == 0:
        try:
            state, plain, _ = plain_state(a.profile, a.scenario)
        except Skip:
            return None
        traced = a.profile.decode_group is not None or a.scenario.decode_ms is not None
        how = draft_count_basis(a.profile, a.scenario, a.num_draft, 0)
        basis = MEASURED if traced else how["basis"]
        return KState(0, state, plain, 1, basis, how["band"], a.label)
    tau, _ = accept_at(a.profile, a.scenario, a.num_draft, k)
    after, s_after, _ = at_drafts(a.profile, a.scenario, a.num_draft, k, tau)
    width = after.width or k + 1
    how = draft_count_basis(a.profile, a.scenario, a.num_draft, k)
    basis = how["basis"]
    if k not in {c.num_draft for c in m.captures if (c.batch, c.context) == a.key[:2]}:
        scale = m.draft_scale(a.batch, a.context, a.num_draft, k)
        draft_basis = scale[1] if scale else EXTRAPOLATED
        basis = worst(basis, draft_basis)
    return KState(k, after, s_after, width, basis, how["band"], a.label)


def measured_point(
    m: Measured, k: int, batch: int, context: float, cache: dict
) -> dict[str, Any] | None:
    """The point of ``k`` drafts at ``batch`` and ``context``, with its basis, band and the
    capture it rests on."""
    own = m.exact(batch, context, k)
    if own is not None:
        c = cycle_of(own.profile, own.scenario)
        basis = EXTRAPOLATED if own.predicted else MEASURED
        band = MIN_BAND if not own.predicted else _PREDICTED_BAND
        return _fields(own.scenario, k, own.profile.width or k + 1, c, batch, context) | {
            "source": f"{basis} ({own.label})",
            "basis": basis,
            **_bands(band, own.scenario),
            "from_capture": own.label,
        }
    a = m.anchor(batch, context, k)
    if k == 0 and m.decode is not None:
        return _plain_point(m, a, batch, context)
    st = state_at(m, a, k, cache)
    if st is None:
        return None
    profile, s, basis, band = at_load_measured(m, st.profile, st.s, st.width, batch, context)
    c = cycle_of(profile, s)
    basis = worst(basis, st.basis, EXTRAPOLATED if a.predicted else MEASURED)
    band = max(band, _PREDICTED_BAND) if a.predicted else band
    return _fields(s, k, st.width, c, batch, context) | {
        "source": f"{basis} (from {a.label})",
        "basis": basis,
        **_bands(math.hypot(band, st.band) if st.basis != MEASURED else max(band, st.band), st.s),
        "from_capture": a.label,
    }


def _plain_point(m: Measured, a: Capture, batch: int, context: float) -> dict[str, Any] | None:
    """Plain decoding at a load from its own measured steps (``Measured.plain_at``: with an MoE
    union, their MoE GEMM by the experts touched), shaped as the nearest capture's: its step
    takes the fitted time."""
    v = m.plain_at(batch, context, a.scenario.model)
    own = _measured_plain(m, batch, context)
    if own is not None:  # a capture measured plain decoding here: its own rate, not the fit's
        v, a = Value(own[0], MEASURED, MIN_BAND), own[1]  # its floor raised below, as a fit's
    given = replace(a.scenario, decode_ms=v.ms, decode_given=True, batch=batch, context=context)
    try:
        state, plain, _ = plain_state(a.profile, given)
    except Skip:
        return None
    c = cycle_of(state, plain)
    return _fields(plain, 0, 1, c, batch, context) | {
        "source": f"{v.basis} (plain decoding's steps, from {a.label})",
        "basis": v.basis,
        **_bands(v.band + max(PLAIN_RUN_BAND - MIN_BAND, 0.0), a.scenario),  # its floor raised
        "from_capture": a.label,
    }


def _measured_plain(m: Measured, batch: int, context: float) -> tuple[float, Capture] | None:
    """The plain step a capture at this batch and context measured (its cycle, ms), if any."""
    for c in m.captures:
        here = (c.batch, float(c.context)) == (batch, float(context))
        if here and not c.predicted and plain_measured(c.profile, c.scenario):
            try:
                state, plain, _ = plain_state(c.profile, c.scenario)
            except Skip:
                continue
            return cycle_of(state, plain).cycle_ms, c
    return None


def rate_band(point: dict[str, Any]) -> float | None:
    """The band to show beside a point's rate: how far the rate itself may lie (``rate_band``,
    with its capture's anchor error, where it has one), not ``band`` (what comparisons between
    k use: the best-k set, the verdict; docs/GLOSSARY.md)."""
    return point.get("rate_band", point.get("band"))


def _bands(band: float, anchored_on: Scenario) -> dict[str, float]:
    """A point's ``band`` (how far it may lie from the capture's own cycle moved here: what
    comparisons between k use) and, where the capture's anchor is the median of samples that
    spread, its ``anchor_band`` (the median's standard error, common to every k at the capture's
    load) and ``rate_band``, the two in quadrature: how far the rate itself may lie."""
    out = {"band": round(band, 4)}
    if anchored_on.anchor_band > 0:
        out["anchor_band"] = round(anchored_on.anchor_band, 4)
        out["rate_band"] = round(math.hypot(band, anchored_on.anchor_band), 4)
    return out


def _fields(s: Scenario, k: int, width: int, c, batch: int, context: float) -> dict[str, Any]:
    shape = Shape(batch, width, context)
    return {
        "num_draft": k,
        "width": width,
        "verify_ms": c.verify_ms,
        "draft_ms": c.draft_ms,
        "cycle_ms": c.cycle_ms,
        "accept_len": c.accept_len,
        "tokens_per_s": c.tokens_per_s,
        "tokens_per_s_per_gpu": c.batch_tokens_per_s / max(s.tp, 1),
        "compute_bound": compute_bound(s.model, s.hardware, shape, s.tp)
        if s.model is not None and s.hardware is not None
        else None,
    }


@dataclass
class _State:
    k: int
    profile: VerifyProfile
    s: Scenario
    width: int
    source: str


def roofline_states(
    profile: VerifyProfile, s: Scenario, k0: int, ks: tuple[int, ...], notes: list[str]
) -> list[_State]:
    """The state at each k at today's batch and context (k = 0: plain decoding), for plain
    numbers (no capture): moved by the roofline."""
    out = []
    for k in ks:
        if k == 0:
            try:
                state, plain, source = plain_state(profile, s)
            except Skip as why:
                notes.append(f"no plain decoding point: {why}")
                continue
            how = "measured" if plain_measured(profile, s) else "predicted"
            out.append(_State(0, state, plain, 1, f"plain decoding ({how})"))
        elif k == k0:
            out.append(_State(k, profile, s, profile.width or k + 1, "today"))
        else:
            tau, _ = accept_at(profile, s, k0, k)
            after, s_after, _ = at_drafts(profile, s, k0, k, tau)
            out.append(_State(k, after, s_after, after.width or k + 1, "width model"))
    return out


def roofline_point(
    st: _State,
    batch: int,
    context: float,
    slopes: tuple[PartSlope, ...],
    fit: WidthFit | None,
) -> dict:
    profile, s = at_load(st.profile, st.s, st.width, batch, context, slopes, fit)
    c = cycle_of(profile, s)
    today = (batch, context) == (st.s.batch, st.s.context)
    return _fields(s, st.k, st.width, c, batch, context) | {
        "source": st.source if today else "roofline",
        "basis": "measured" if today and st.source == "today" else "roofline",
    }
