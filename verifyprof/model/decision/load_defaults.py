"""The load curve's defaults and shapes: which batches and contexts it lists (while the weights
and the KV cache fit the GPU), the acceptance shape (chain or tree), and why a curve cannot be
made, and what it rests on (its notes)."""

from __future__ import annotations

from typing import Any

from verifyprof.model.cycle.batch_cost import (
    Shape,
    compute_bound,
    kv_fits,
    ridge_flops_per_byte,
    ridge_tokens,
)
from verifyprof.model.cycle.width_fit import WidthFit
from verifyprof.model.fixes.base import Scenario
from verifyprof.model.fixes.draft import dilation_share
from verifyprof.model.fixes.launch_growth import launch_words
from verifyprof.model.fixes.measured import PartSlope

MAX_BATCH = 512  # the default batches stop here (or where the KV cache no longer fits)


def acceptance_shape(width: int, k: int) -> dict[str, Any]:
    """Chain or tree, from the verify's width per request against the drafts."""
    chain = width == k + 1
    return {
        "kind": "chain" if chain else "tree",
        "num_draft": k,
        "verify_tokens_per_request": width,
        "words": (
            f"a chain: {k} drafts verified as {width} tokens per request, so a batch of B"
            f" verifies B x {width} tokens"
            if chain
            else f"a tree (top-k): {k} draft steps verified as {width} tokens per request, so a"
            f" batch of B verifies B x {width} tokens and reaches the ridge point"
            f" {width / (k + 1):.1f}x sooner than a chain of {k}"
        )
        + "; each request accepts its own prefix, so acceptance per request does not change"
        " with the batch",
    }


def default_contexts(context: float) -> tuple[float, ...]:
    """Today's context and 4x (attention grows with it, the GEMMs do not)."""
    return (float(context), 4.0 * float(context)) if context > 0 else (0.0,)


def default_batches(s: Scenario, context: float, width: int) -> tuple[int, ...]:
    """1, 2, 4, ... while the weights and the KV cache fit the GPU (and today's batch)."""
    memory = _memory_gb(s)
    out, b = [], 1
    while b <= MAX_BATCH and (memory is None or kv_fits(s.model, memory, b, context + width, s.tp)):
        out.append(b)
        b *= 2
    return tuple(sorted({*out, s.batch}))


def fits(
    s: Scenario, batches: tuple[int, ...], context: float, width: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The batches whose weights and KV cache at ``context`` fit the GPU, and those that do
    not (never given a rate: such a load cannot run)."""
    memory = _memory_gb(s)
    if memory is None:
        return batches, ()
    # today's load ran (the model errs where it says it cannot fit); not at a --context it
    # did not run at
    ran = lambda b: b == s.batch and context == s.context and not s.context_given
    ok = tuple(b for b in batches if ran(b) or kv_fits(s.model, memory, b, context + width, s.tp))
    return ok, tuple(b for b in batches if b not in ok)


def too_big_note(s: Scenario, batches: tuple[int, ...], context: float) -> str:
    memory = _memory_gb(s)
    return (
        f"batch {', '.join(map(str, batches))} at context {context:g}: the weights and the KV"
        f" cache of {s.model.name} do not fit 90% of {s.hardware.name}'s {memory:g} GB"
        + (f" per GPU at TP {s.tp}" if s.tp > 1 else "")
        + ": no rate given (that load cannot run)"
    )


def _memory_gb(s: Scenario) -> float | None:
    return s.hardware.memory_gb


def load_skip(s: Scenario) -> str:
    missing = [
        what
        for what, value in (("--model (a model config)", s.model), ("--hardware", s.hardware))
        if value is None
    ]
    return (
        "no load curve: give "
        + " and ".join(missing)
        + ": the verify's bytes and FLOPs over batch x width come from them"
    )


def _slope_words(sl: PartSlope) -> str:
    if sl.per_row:
        return (
            f"{sl.name} {sl.forwards_per_request:.2f} forwards per extra request (run per row:"
            " its whole time, host included, follows them)"
        )
    return f"{sl.name} {sl.per_request_ms * 1e3:.1f} us"


def curve_notes(s: Scenario, slopes: tuple[PartSlope, ...], fit: WidthFit | None) -> list[str]:
    if s.measured is not None:
        return (
            s.measured.notes()
            + s.measured.union_notes(s.model)
            + [
                "the draft and the rest of the cycle: GPU time per extra request fitted over the"
                " captured batches"
                + (
                    ": " + ", ".join(_slope_words(sl) for sl in slopes)
                    if (slopes := s.measured.slopes)
                    else " (one batch captured: kept as measured, an optimistic bound at large"
                    " batches)"
                ),
                "per-request acceptance unchanged with the batch",
            ]
            + launch_words(s.measured.launches, s.measured.slopes)
            + _plain_note(s)
        )
    model = s.model
    out = (
        []
        if fit is None
        else [
            f"the verify over tokens per forward measured at {list(fit.widths)} tokens (monotone,"
            " at most proportional fit): the GEMMs follow it up to its last measured tokens,"
            " then the roofline"
        ]
    )
    out += [
        f"each batch and context from today's (batch {s.batch}, context {s.context:g}) by the"
        f" roofline of {model.name} on {s.hardware.name}: dense GEMMs by the tokens of one forward"
        " (batch x width), attention by the KV cache read (batch x context) and its FLOPs; what"
        " the kernels lose to their floor today carries over",
        "kernel counts, launches and the host's work per cycle unchanged with the batch;"
        " per-request acceptance unchanged",
    ]
    if slopes:
        out.append(
            "draft and the rest of the cycle: GPU time per extra request from the two measured"
            " batches: " + ", ".join(f"{sl.name} {sl.per_request_ms * 1e3:.1f} us" for sl in slopes)
        )
    else:
        out.append(
            "the drafter's GPU time kept at today's (its own bytes and FLOPs are not in the"
            " target's model file; a small drafter stays bandwidth- and launch-bound far longer"
            " than its target): an optimistic bound for speculation at large batches"
        )
    return out


def _first_bound(s: Scenario, batches: tuple[int, ...], width: int) -> int | None:
    return next(
        (b for b in batches if compute_bound(s.model, s.hardware, Shape(b, width, 0.0), s.tp)),
        None,
    )


def ridge_json(s: Scenario) -> dict[str, Any]:
    tokens = ridge_tokens(s.model, s.hardware, s.tp)
    return {
        "hardware": s.hardware.name,
        "flops_per_byte": ridge_flops_per_byte(s.model, s.hardware),
        "tokens_per_forward": tokens,
    }


def _plain_note(s: Scenario) -> list[str]:
    """Where no capture measured a decode step, plain decoding is the verify at width 1: say
    so, and what measures it."""
    measured = any(
        c.profile.decode_group is not None or c.scenario.decode_ms is not None
        for c in s.measured.captures
    )
    if measured:
        return []
    shares = [dilation_share(c.profile, c.scenario) for c in s.measured.captures]
    taken = (
        f"; and with the share of the verify the profiler's dilation took out (up to"
        f" {100 * max(shares):.0f}% here: the dilation is the program's, how it falls on the"
        " verify is unmeasured)"
        if max(shares, default=0.0) >= 0.005
        else ""
    )
    return [
        "plain decoding (k = 0) is predicted from the verify's kernels at width 1 (band at least"
        f" 20%: a decode step often runs another attention path{taken}): capture --decode-cmd"
        ' "..." or whatif --decode-ms measures it'
    ]
