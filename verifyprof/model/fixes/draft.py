"""Fixes of the acceptance side of the cycle: how many tokens to draft (accept length per k from
the survival curve, verify t(k+1) from the width model) and a better drafter (published data)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from verifyprof.contracts.plumbing.text import counted, signed
from verifyprof.model.cycle.moe_split import MOE, width_change
from verifyprof.model.cycle.parts import Part
from verifyprof.model.cycle.phase_fit import (
    BAND_PER_DOUBLING,
    EXTRAPOLATED,
    INTERPOLATED,
    MEASURED,
    MIN_BAND,
    PLAIN_RUN_BAND,
    ROOFLINE,
    worst,
)
from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.cycle.verify_cost import width_scaling
from verifyprof.model.cycle.width_fit import fit_widths
from verifyprof.model.fixes.base import Candidate, Scenario, Skip, edited, predicted
from verifyprof.model.fixes.catch_up import caught_up
from verifyprof.model.inputs.acceptance import Survival
from verifyprof.model.inputs.leviathan import expected_tokens
from verifyprof.model.inputs.profile import VerifyProfile

MAX_EXTRA_DRAFTS = 4


def _survival(profile: VerifyProfile, s: Scenario, k: int) -> tuple[Survival, str]:
    if s.survival is not None:
        return (
            s.survival,
            f"survival curve ({s.survival.source}) {', '.join(f'{x:.2f}' for x in s.survival.s)}",
        )
    alpha = fit_alpha(s.accept_len, k)
    return (
        Survival.from_alpha(alpha, k),
        (
            f"i.i.d. acceptance alpha={alpha:.3f} fitted to accept length {s.accept_len:.2f} at {k}"
            " drafts (Eq. 1); give --survival to do better"
        ),
    )


def fit_alpha(accept_len: float, k: int) -> float:
    """Invert Eq. (1) by bisection: the alpha whose expected tokens at k drafts is accept_len."""
    if accept_len >= k + 1:
        return 0.999999
    lo, hi = 0.0, 0.999999
    for _ in range(100):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < accept_len:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def verify_at_width(profile: VerifyProfile, s: Scenario, width: int) -> tuple[float, list[str]]:
    """t(width): measured when the trace has that width, else the measured phases rescaled."""
    total, _, notes = phases_at_width(profile, s, width)
    return total, notes


def phases_at_width(
    profile: VerifyProfile, s: Scenario, width: int
) -> tuple[float, dict[str, float], list[str]]:
    v = profile.verify
    n0 = profile.width or (s.num_draft or 0) + 1
    if width == n0:
        return v.wall_ms, dict(v.phases_ms), []
    fit = fit_widths(profile.width_times) if s.use_measured_widths else None
    union = s.measured.moe_union(s.model) if s.measured is not None else None
    if fit is not None and union is not None and v.phases_ms.get(MOE, 0.0) > 0:
        return _moe_apart(profile, s, union, n0, width)
    if fit is not None:
        (t_w, how), (t_n0, _) = fit.at(width), fit.at(n0)
        change = t_w - t_n0
        total = max(v.wall_ms + change, 1e-6)
        scale = total / v.wall_ms if v.wall_ms > 0 else 1.0
        return (
            total,
            {p: t * scale for p, t in v.phases_ms.items()},
            [
                f"t({width}) - t({n0}) from the width model over the trace's verify widths"
                f" {list(fit.widths)} (monotone, at most proportional; t({width}) {how}):"
                f" {t_w:.3f} - {t_n0:.3f} ms = {signed(change)} ms, added to the modelled verify's"
                f" {v.wall_ms:.3f} ms"
            ],
        )
    ar = None
    if s.hardware is not None and s.tp > 1:
        ar = lambda nbytes: s.hardware.allreduce_us(nbytes, s.tp, "nccl").us
    scaling = width_scaling(
        n0 * s.batch, width * s.batch, s.model, s.hardware, s.tp, s.context, ar, union
    )
    scaled = scaling.apply(v.phases_ms)
    changes = [f"{p} x{f:.2f}" for p, f in scaling.factors.items() if v.phases_ms.get(p, 0) > 0]
    changes += [
        f"{p} {signed(d)} ms" for p, d in scaling.deltas_ms.items() if v.phases_ms.get(p, 0) > 0
    ]
    return (
        sum(scaled.values()),
        scaled,
        [
            f"t({width}) from the measured t({n0}) phase by phase"
            + (f": {', '.join(changes)}" if changes else "")
        ]
        + scaling.notes,
    )


def _moe_apart(
    profile: VerifyProfile, s: Scenario, u, n0: int, width: int
) -> tuple[float, dict[str, float], list[str]]:
    """t(width) with the MoE GEMM apart (:mod:`verifyprof.model.cycle.moe_split`): the rest by
    the width sweep less its own MoE GEMM, the MoE GEMM by the experts the cycle's tokens touch
    (the union fitted to the captures' verifies: a sweep's repeated token routes unlike them)."""
    v = profile.verify.phases_ms
    own = v[MOE]
    rest, moe, _ = width_change(profile.width_times, profile.width_moe, own, u, s.batch, n0, width)
    others = sum(t for p, t in v.items() if p != MOE)
    scale = max(others + rest, 1e-6) / others if others > 0 else 1.0
    phases = {p: (max(own + moe, 0.0) if p == MOE else t * scale) for p, t in v.items()}
    swept = "its own measured" if profile.width_moe else "the union's"
    return (
        sum(phases.values()),
        phases,
        [
            f"t({width}) - t({n0}): the width sweep less {swept} MoE GEMM {signed(rest)} ms, the"
            f" MoE GEMM by the experts touched at {s.batch * width:g} tokens"
            f" ({u.touched(s.batch * width):.1f} against {u.touched(s.batch * n0):.1f})"
            f" {signed(moe)} ms"
        ],
    )


def at_drafts(
    profile: VerifyProfile, s: Scenario, k: int, k2: int, tau: float
) -> tuple[VerifyProfile, Scenario, list[str]]:
    """The state with ``k2`` drafts instead of ``k``: the verify at its new width (width model),
    the draft's forwards scaled, accept length ``tau``."""
    n0 = profile.width or k + 1
    width = k2 + 1 if n0 == k + 1 else max(1, round(n0 * (k2 + 1) / (k + 1)))
    _, phases, notes = phases_at_width(profile, s, width)
    after = edited(
        profile, {p: phases.get(p, 0.0) - t for p, t in profile.verify.phases_ms.items()}
    )
    after.width = width
    scale = s.measured.draft_scale(s.batch, s.context, k, k2) if s.measured else None
    if scale is not None:  # captures at this load measured other draft counts: their fit
        parts = tuple(p.scaled(scale[0]) if p.name == "draft" else p for p in s.parts)
    else:
        parts = tuple(_drafted(p, k, k2) if p.name == "draft" else p for p in s.parts)
    slopes = s.measured.slopes if s.measured else ()
    parts, caught = caught_up(parts, slopes, lambda: _survival(profile, s, k)[0], k, k2)
    notes = [*notes, *caught]
    ratio = scale[0] if scale is not None else k2 / k
    draft_ms = sum(p.cost_ms for p in parts if p.name == "draft") if s.parts else s.draft_ms * ratio
    s_after = replace(
        s, accept_len=tau, draft_ms=draft_ms, num_draft=k2, survival=None, parts=parts
    )
    return after, s_after, notes


def _drafted(part: Part, k: int, k2: int) -> Part:
    """The draft part at ``k2`` drafts: its forwards in proportion (one per draft for a chain),
    its fixed part (entering the drafter, gathering its tokens) kept."""
    return part.with_forwards(part.forwards * k2 / max(k, 1))


def width_source(profile: VerifyProfile, s: Scenario, width: int) -> str:
    """How t(width) is had: measured, fitted or extrapolated by the width model over the trace's
    widths, else roofline (phase by phase from the modelled width)."""
    if width == (profile.width or (s.num_draft or 0) + 1):
        return MEASURED
    fit = fit_widths(profile.width_times) if s.use_measured_widths else None
    return fit.at(width)[1] if fit is not None else "roofline"


# plain decoding predicted from the verify's kernels at width 1, against the H200 programs'
# measured decode steps: -13% (hf_chain 7b, batch 1), -12% to -21% (7b-mha, batch 1 to 8)
PLAIN_FROM_VERIFY_BAND = 0.2


def dilation_share(profile: VerifyProfile, s: Scenario) -> float:
    """The share of the verify's unprofiled time that the profiler's dilation took out, or put in
    where the anchor stretched it (0 on the traced basis). The dilation is one rate for the whole
    program, spread over the cycle's parts by their host time; how it really falls on the verify
    is unmeasured, so a number resting on the verify alone (plain decoding from its width 1) is
    uncertain by that much. Program B's batch-32 verify came out at 54.5 ms from 72.4 traced;
    its width-1 twin ran 57-68 ms unprofiled (bench/README, B4)."""
    traced, now = s.traced_verify_ms, profile.verify.wall_ms
    if s.basis != "unprofiled" or traced is None or now <= 0:
        return 0.0
    return abs(traced / now - 1.0)  # stretched or shrunk: unmeasured either way


WIDTH_BASIS = {"measured": MEASURED, "fitted": INTERPOLATED, "extrapolated": EXTRAPOLATED}


def draft_count_basis(profile: VerifyProfile, s: Scenario, k0: int, k2: int) -> dict[str, Any]:
    """:func:`_draft_count_basis`, with the anchor's standard error where today's rate has one
    (``anchor_band``, common to every k) and the rate's band (``rate_band``: both in quadrature),
    as the load curve's points carry them (``band`` stays what comparisons between k use)."""
    out = _draft_count_basis(profile, s, k0, k2)
    if s.anchor_band > 0:
        out["anchor_band"] = round(s.anchor_band, 4)
        out["rate_band"] = round(math.hypot(out["band"], s.anchor_band), 4)
    return out


def _draft_count_basis(profile: VerifyProfile, s: Scenario, k0: int, k2: int) -> dict[str, Any]:
    """How the point of ``k2`` drafts at today's load is had (issue 32): ``measured`` at the
    traced k (or a capture at this load that measured k2), else the least confident of the
    verify at its width (the width model) and the draft at k2 drafts (a fit over the captures'
    draft counts, or one count scaled: extrapolated), with a band that grows with the distance
    from the nearest measured width and draft count."""
    measured_ks = {k0}
    if s.measured is not None:
        measured_ks |= {
            c.num_draft for c in s.measured.captures if (c.batch, c.context) == (s.batch, s.context)
        }
    if k2 in measured_ks:
        return {"basis": MEASURED, "band": MIN_BAND}
    n0 = profile.width or k0 + 1
    width = 1 if k2 == 0 else (k2 + 1 if n0 == k0 + 1 else max(1, round(n0 * (k2 + 1) / (k0 + 1))))
    widths = sorted({*profile.width_times, n0})
    if k2 == 0 and profile.decode_group is not None:
        verify_basis = MEASURED
    else:
        verify_basis = WIDTH_BASIS.get(width_source(profile, s, width), ROOFLINE)
    near_w = min(widths, key=lambda w: abs(math.log2(width / w)))
    fit = fit_widths(profile.width_times) if s.use_measured_widths else None
    noise = fit.residual(width) if fit is not None else 0.0
    band = max(MIN_BAND, noise) + BAND_PER_DOUBLING * abs(math.log2(width / near_w))
    union = s.measured.moe_union(s.model) if s.measured is not None and fit is None else None
    band += union.band if union is not None else 0.0  # the MoE GEMM by an unpinned union
    if k2 == 0:
        if profile.decode_group is not None:  # traced decode steps, as the verify's
            return {"basis": MEASURED, "band": MIN_BAND}
        if s.decode_ms is not None:  # one run's rate (--decode-cmd, or given)
            return {"basis": MEASURED, "band": PLAIN_RUN_BAND}
        # a decode step is not the verify at width 1: programs run other kernels for one token
        # (a q_len = 1 attention path): an extrapolation with its own error (bench/README); and
        # it rests on the verify's unprofiled time alone, whose share of the dilation is unknown
        band = math.hypot(max(band, PLAIN_FROM_VERIFY_BAND), dilation_share(profile, s))
        return {"basis": EXTRAPOLATED, "band": round(band, 4)}
    ks = sorted(measured_ks)
    draft_basis = INTERPOLATED if ks[0] < k2 < ks[-1] else EXTRAPOLATED
    near_k = min(ks, key=lambda k: abs(math.log2(k2 / k)))
    band += BAND_PER_DOUBLING * abs(math.log2(k2 / near_k))
    return {"basis": worst(verify_basis, draft_basis), "band": round(band, 4)}


def _num_draft(profile: VerifyProfile, s: Scenario) -> int | None:
    return s.num_draft or ((profile.width - 1) if profile.width else None)


def accept_at(profile: VerifyProfile, s: Scenario, k: int, k2: int) -> tuple[float, str]:
    """Accept length at ``k2`` drafts: the measured one at ``k`` moved along the survival curve
    (per-position acceptance where given, else i.i.d. fitted to the measured accept length)."""
    survival, survival_note = _survival(profile, s, k)
    change = survival.accept_len(k2) - survival.accept_len(k)
    tau = min(max(s.accept_len + change, 1.0), k2 + 1.0)
    note = (
        f"accept length {tau:.3f} at {counted(k2, 'draft')}: the measured {s.accept_len:.3f}"
        f" {signed(change)}"
        f" from the {survival_note}"
        + (" (extrapolated past the measured positions)" if survival.is_extrapolated(k2) else "")
    )
    return tau, note


def with_drafts(
    profile: VerifyProfile, s: Scenario, now: Cycle, k: int, k2: int, name: str
) -> Candidate:
    """The cycle with ``k2`` drafts instead of ``k`` (chain: verify width k2+1)."""
    tau, accept_note = accept_at(profile, s, k, k2)
    after, s_after, notes = at_drafts(profile, s, k, k2, tau)
    n0 = profile.width or k + 1
    width = after.width
    shape = (
        f"chain drafting: {counted(k2, 'draft')} verified as {width} tokens per request (now {k}"
        f" as {k + 1})"
        if n0 == k + 1
        else (
            f"verify width {n0} for {counted(k, 'draft')} (a tree): {counted(k2, 'draft')} taken to"
            f" verify {width}"
            " tokens, in proportion"
        )
    )
    draft_note = (
        f"draft time scales with the number of draft steps: {s.draft_ms:.3f} ->"
        f" {s_after.draft_ms:.3f} ms; the draft-extend and accept are unchanged"
    )
    return predicted(
        name,
        after,
        s_after,
        now,
        [shape, accept_note, draft_note, *notes],
        {"num_draft": k2, "width": width},
    )


def curve_point(c: Candidate) -> dict[str, float]:
    return {
        "num_draft": c.details.get("num_draft"),
        "width": c.details.get("width"),
        "verify_ms": c.cycle.verify_ms,
        "draft_ms": c.cycle.draft_ms,
        "overhead_ms": c.cycle.overhead_ms,
        "cycle_ms": c.cycle.cycle_ms,
        "accept_len": c.cycle.accept_len,
        "tokens_per_s": c.cycle.tokens_per_s,
    }


def draft_tokens(profile: VerifyProfile, s: Scenario, now: Cycle, more: bool) -> Candidate:
    k = _num_draft(profile, s)
    if not k:
        raise Skip(
            "number of draft tokens unknown: give --num-draft (or a trace with verify tokens=N)"
        )
    if not more and k <= 1:
        raise Skip("already 1 draft token")
    name = "more_draft_tokens" if more else "fewer_draft_tokens"
    options = range(k + 1, k + 1 + MAX_EXTRA_DRAFTS) if more else range(1, k)
    tried = [with_drafts(profile, s, now, k, k2, name) for k2 in options]
    best = max(tried, key=lambda c: c.cycle.tokens_per_s)
    best.details["options"] = [curve_point(c) for c in tried]  # every k' evaluated, best kept
    return best


def published_accept_len(
    k: int, model_name: str | None, entries: tuple[dict[str, Any], ...]
) -> tuple[float, str] | None:
    """The best published accept length at ``k`` drafts (chain) for the target family, from the
    drafter data files' ``entries`` (``data/drafters/*.toml`` and the user's, read by the
    pipeline): (accept length, where published)."""
    best = None
    for entry in entries:
        family = str(entry.get("target", "")).lower()
        if entry.get("num_draft") != k or not (
            family == "any" or (model_name and family in model_name.lower())
        ):
            continue
        tau = float(entry["accept_len"])
        if best is None or tau > best[0]:
            best = (
                tau,
                (
                    f"{entry['name']} on {entry.get('target_model', family)},"
                    f" {entry.get('benchmark', '')}: {entry['source']}"
                ),
            )
    return best


def better_drafter(profile: VerifyProfile, s: Scenario, now: Cycle) -> Candidate:
    k = _num_draft(profile, s)
    if not k:
        raise Skip("number of draft tokens unknown: give --num-draft")
    if s.drafter_gain is not None:
        tau, source = s.accept_len + s.drafter_gain, f"--drafter-gain {s.drafter_gain:g}"
    else:
        found = published_accept_len(k, s.model.name if s.model else None, s.published)
        if found is None:
            raise Skip(
                f"no published accept length at {k} drafts for this target in the drafter data"
                " (data/drafters/): give --drafter-gain or --model"
            )
        tau, source = found
    capped = tau > k + 1
    tau = min(tau, float(k + 1))
    if tau <= s.accept_len:
        raise Skip(
            f"accept length {s.accept_len:.2f} already at or above the best published drafter"
            f" ({tau:.2f}: {source})"
        )
    return predicted(
        "better_drafter",
        profile,
        replace(s, accept_len=tau, survival=None),
        now,
        [
            f"accept length {s.accept_len:.2f} -> {tau:.2f} at {k} drafts ({source})"
            + (f", capped at k+1 = {k + 1}" if capped else ""),
            "the new drafter costs the same draft time and the verify is unchanged",
        ],
    )
