"""The cycle at another batch and context: the verify's (or the decode step's) GEMM and attention
phases moved by the change of their roofline floor (:mod:`verifyprof.model.cycle.batch_cost`),
the rest of the cycle as measured.

What changes with the batch: the tokens of one forward (batch x width), so the GEMMs' FLOPs, and
the KV cache read by attention (batch x context); with several captures of an eager program whose
launches per forward grow with the batch, those launches and the host time issuing them
(:mod:`verifyprof.model.fixes.launch_growth`). What does not, in this model: the host's other
work per cycle (the draft's forwards, the accept's sync, the program's loop) and per-request
acceptance (every request of a chain verifies its own k+1 tokens). The drafter's
GPU time is kept too: a drafter's own bytes and FLOPs are not in the target's model file, and a
small drafter stays bandwidth- and launch-bound far longer than its target (said in the notes).
Where a second measured batch is given (``BatchAnchor``), the draft and the rest of the cycle
move between the two measured batches instead, in proportion to the batch.
"""

from __future__ import annotations

import math
from dataclasses import replace

from verifyprof.model.cycle.batch_cost import Shape, deltas_ms
from verifyprof.model.cycle.parts import Part
from verifyprof.model.cycle.phase_fit import BAND_PER_DOUBLING, MEASURED, MIN_BAND, worst
from verifyprof.model.cycle.width_fit import WidthFit, fit_widths
from verifyprof.model.fixes.base import Scenario, edited
from verifyprof.model.fixes.measured import Measured, PartSlope
from verifyprof.model.inputs.profile import VerifyProfile

__all__ = ["PartSlope", "at_load", "at_load_measured", "token_fit"]


def at_load(
    profile: VerifyProfile,
    s: Scenario,
    width: int,
    batch: int,
    context: float,
    slopes: tuple[PartSlope, ...] = (),
    fit: WidthFit | None = None,
) -> tuple[VerifyProfile, Scenario]:
    """The state ``(profile, s)`` (its verify at ``width`` tokens per request, measured at the
    scenario's batch and context) at ``batch`` requests over ``context`` tokens each.

    Needs ``s.model`` and ``s.hardware``; at the measured batch and context it is the state
    itself. With ``fit`` (the measured verify over tokens per forward, :func:`token_fit`) the
    GEMMs move along the measured curve where it reaches, and by the roofline past it."""
    if s.model is None or s.hardware is None:
        raise ValueError("at_load needs a model config and a hardware file")
    frm = Shape(s.batch, width, s.context)
    to = Shape(batch, width, context)
    if frm == to:
        return profile, s
    deltas = deltas_ms(s.model, s.hardware, frm, to, s.tp)
    if fit is not None:
        deltas = {
            "gemm_dense": _measured(fit, s, frm.tokens, to.tokens),
            "attention": deltas["attention"],
        }
    deltas["allreduce"] = _allreduce_delta(profile, s, frm.tokens, to.tokens)
    after = edited(profile, deltas)
    after.width = profile.width
    after.batch = batch
    parts = tuple(_moved(p, slopes, batch - s.batch, s.batch) for p in s.parts)
    draft_ms = s.draft_ms + sum(
        sl.per_request_ms * (batch - s.batch) for sl in slopes if sl.name == "draft"
    )
    return after, replace(s, batch=batch, context=context, parts=parts, draft_ms=max(draft_ms, 0))


def at_load_measured(
    m: Measured, profile: VerifyProfile, s: Scenario, width: int, batch: int, context: float
) -> tuple[VerifyProfile, Scenario, str, float]:
    """The state at ``batch`` and ``context`` along the fits of the scenario's captures
    ``m``: the verify's phases by their drivers, the other parts by their fitted GPU time per
    request; with the basis and the band of the verify's move."""
    frm, to = Shape(s.batch, width, s.context), Shape(batch, width, context)
    if frm == to:
        return profile, s, MEASURED, MIN_BAND
    deltas, basis, band = m.move(profile, s, frm, to)
    after = edited(profile, deltas)
    after.width = profile.width
    after.batch = batch
    parts = tuple(_moved(p, m.slopes, batch - s.batch, s.batch) for p in s.parts)
    draft_ms = s.draft_ms + sum(
        sl.per_request_ms * (batch - s.batch) for sl in m.slopes if sl.name == "draft"
    )
    moved = replace(s, batch=batch, context=context, parts=parts, draft_ms=max(draft_ms, 0))
    nearest = min(m.batches, key=lambda b: abs(math.log(batch / b)))
    parts_band = MIN_BAND + BAND_PER_DOUBLING * abs(math.log2(batch / nearest))
    share = after.verify.wall_ms / max(after.verify.wall_ms + sum(p.cost_ms for p in parts), 1e-9)
    band = share * band + (1 - share) * parts_band
    return after, moved, worst(basis, m.batch_basis(batch, context)), band


def _allreduce_delta(profile: VerifyProfile, s: Scenario, frm: int, to: int) -> float:
    """The verify's allreduces over ``to`` tokens instead of ``frm`` (the latency model's
    ratio; 0 on one GPU or without allreduces)."""
    t = profile.verify.phases_ms.get("allreduce", 0.0)
    if s.tp <= 1 or t <= 0:
        return 0.0
    per_token = s.model.activation_bytes_per_token()
    a = s.hardware.allreduce_us(frm * per_token, s.tp, "nccl").us
    b = s.hardware.allreduce_us(to * per_token, s.tp, "nccl").us
    return t * (b / a - 1.0) if a > 0 else 0.0


def token_fit(profile: VerifyProfile, batch: int) -> WidthFit | None:
    """The measured verify over tokens per forward (batch x each measured width), or None."""
    return fit_widths({batch * w: t for w, t in profile.width_times.items()})


def _measured(fit: WidthFit, s: Scenario, frm: int, to: int) -> float:
    """t(to) - t(frm) over tokens per forward: the measured fit up to its last tokens, then the
    GEMMs' roofline floor (dense and routed) past them."""
    top = fit.widths[-1]

    def at(tokens: int) -> float:
        if tokens <= top:
            return fit.at(tokens)[0]
        d = deltas_ms(s.model, s.hardware, Shape(top, 1, 0.0), Shape(tokens, 1, 0.0), s.tp)
        return fit.at(top)[0] + d["gemm_dense"] + d["gemm_moe"]

    return at(to) - at(frm)


def _moved(part: Part, slopes: tuple[PartSlope, ...], extra: int, batch_now: int = 1) -> Part:
    """A part's GPU busy time moved by its slope over ``extra`` more requests (never below 0); a
    part run once per request, all of it by its forwards (a Python loop over the rows costs its
    launches and host time per row, not only GPU time)."""
    for slope in slopes:
        if slope.name == part.name and slope.per_row and part.forwards > 0:
            # the rows added catch up at this state's share, not the captures' (another k)
            share = part.forwards / max(slope.forwards_at(batch_now), 1e-9)
            added = slope.forwards_per_request * extra * share
            return part.with_forwards(max(part.forwards + added, 0.0))
        if slope.name == part.name:
            busy = max(part.busy_ms + slope.per_request_ms * extra, 0.0)
            return _launched(replace(part, busy_ms=busy), slope, batch_now, batch_now + extra)
    return part


def _launched(part: Part, slope: PartSlope, frm: int, to: int) -> Part:
    """An eager part whose launches per forward grow with the batch: its kernels and the host
    time that issues them (all of its host idle but its once-a-cycle fixed part) follow them."""
    if slope.launches is None or part.mode != "eager" or frm == to:
        return part
    ratio = slope.launches.ratio(frm, to)
    fixed = min(part.fixed_ms, part.host_idle_ms)
    host = fixed + (part.host_idle_ms - fixed) * ratio
    return replace(part, host_idle_ms=host, kernels=part.kernels * ratio)
