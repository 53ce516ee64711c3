"""``compare``: two runs side by side with BEFORE's prediction of the change
(:meth:`Run.compare <verifyprof.pipeline.run.Run.compare>`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.decision.compare import Comparison, check_change
from verifyprof.model.decision.compare import compare as side_by_side_of
from verifyprof.model.decision.whatif import Prepared, WhatifOptions

if TYPE_CHECKING:
    from verifyprof.pipeline.resolve import Profiles


class ComparedRun(Protocol):
    """What compare reads of a :class:`~verifyprof.pipeline.run.Run` (which imports this module:
    named here, not imported): its options, frame, profiles, manifest, verify kernels, and the
    same inputs under other options."""

    options: WhatifOptions
    frame: BreakdownFrame
    profiles: Profiles
    manifest: Path | None
    manifest_data: dict | None
    verify_kernels: tuple[Any, str] | None
    reasons: list[str]
    prepared: Prepared | None

    def under(self, options: WhatifOptions, beside: bool = True) -> ComparedRun: ...


def compare_runs(before: ComparedRun, after: ComparedRun) -> Comparison:
    """The verify steps of two runs side by side (BEFORE's ``--step``, ``--width``, ``--mode``:
    which group is the verify on both sides) and, when an accept length is known (or BEFORE is a
    capture folder with one), BEFORE's what-if prediction for the change beside AFTER's measured
    cycle. Each side's inputs are read once and its profiles made once (the run's members); a
    capture folder's manifest is BEFORE's only without ``--accept-len``."""
    from verifyprof.pipeline.resolve import chosen_step, manifest_mode

    o = before.options
    step, width, mode, accept_len = o.step, o.width, o.mode, o.accept_len
    b_manifest = before.manifest if o.manifest is not None or accept_len is None else None
    manifests = (b_manifest, after.manifest)
    b_step = chosen_step(before.frame, step, str(before))
    after_step = _decode_step_if_no_verify(after.frame) or chosen_step(
        after.frame, step, str(after)
    )
    (b_mode, b_note), (a_mode, a_note) = (
        ((mode, None), (mode, None))
        if mode is not None  # the user's, on both sides
        else (
            manifest_mode(before.frame, b_step, b_manifest, _data(before, b_manifest)),
            manifest_mode(after.frame, after_step, after.manifest, _data(after, after.manifest)),
        )
    )
    picked = ((b_step, width, b_mode), (after_step, width, a_mode))
    b_kernels, a_kernels = before.verify_kernels, after.verify_kernels
    result = side_by_side_of(
        before.frame,
        after.frame,
        before.profiles.get(*picked[0]),
        after.profiles.get(*picked[1]),
        b_kernels[0] if b_kernels else None,
        a_kernels[0] if a_kernels else None,
    )
    result.notes += [f"{label}: {n}" for label, n in (("before", b_note), ("after", a_note)) if n]
    _families_scope(result, b_kernels, a_kernels)
    result.warnings += [  # the trace problems each side's numbers carry, as breakdown names them
        f"{label} {run}: {record['message']}"
        for label, run in (("before", before), ("after", after))
        for record in run.frame.integrity
    ]
    if accept_len is None and b_manifest is None:
        result.prediction_note = (
            "no accept length: give --accept-len or --manifest for the prediction check"
        )
        return result
    _prediction_check(result, (before, after), picked, manifests)
    return result


def _data(run: ComparedRun, manifest: Path | None) -> dict | None:
    """The JSON of the manifest a side's prediction reads (the run's, read once), or None."""
    return run.manifest_data if manifest is not None else None


def _prediction_check(
    result: Comparison,
    runs: tuple[ComparedRun, ComparedRun],
    picked,
    manifests: tuple[Path | None, ...],
) -> None:
    """BEFORE's what-if of the change beside AFTER's measured cycle (``picked``: each side's
    step, width and mode; ``manifests``: each side's): each side's model state is its run's
    under those options (:meth:`Run.under`); a side that cannot be modelled says why."""
    (b, a), (b_manifest, a_manifest), after_step = runs, manifests, picked[1][0]
    try:
        before_state = _state(b, b.options.accept_len, b_manifest, picked[0])
        speculation_off = after_step is not None and after_step == _decode_step_if_no_verify(
            a.frame
        )
        accept_len = (
            1.0 if speculation_off else (None if a_manifest else before_state.scenario.accept_len)
        )
        after_state = _state(a, accept_len, a_manifest, picked[1])
    except VerifyprofError as err:
        result.prediction_note = f"no prediction check: {err.problem}"
        return
    triton = any("triton" in row["family"] for row in result.families.get("appeared", []))
    check_change(result, before_state, after_state, triton_appeared=triton)


def _state(run: ComparedRun, accept_len: float | None, manifest: Path | None, picked) -> Prepared:
    """A side's model state under the prediction's options (its step, width and mode picked)."""
    step, width, mode = picked
    from verifyprof.pipeline.resolve import step_regex

    cut = {"step_range": step_regex(run.options), "whole_trace": run.options.whole_trace}
    o = WhatifOptions(
        accept_len=accept_len, manifest=manifest, step=step, mode=mode, width=width, **cut
    )  # its steps as the run cut them (its ranges, --whole-trace): what it made from them shared
    side = run.under(o, beside=False)  # --step decode: one token a step, as whatif models it
    if side.prepared is None:
        raise VerifyprofError("; ".join(side.reasons))
    return side.prepared


def _families_scope(result: Comparison, before, after) -> None:
    """Which kernels the families are of, each side's (``Run.verify_kernels``): its verify
    ranges, or its whole trace."""
    if result.families.get("available"):
        b, a = (side[1] if side else "the verify ranges" for side in (before, after))
        result.families["scope"] = b if b == a else f"before {b}, after {a}"


def optional_path(value: str | Path | None) -> Path | None:
    return Path(value) if value is not None else None


def _decode_step_if_no_verify(frame: BreakdownFrame) -> str | None:
    """A run with speculation off has decode steps and no verify: those are what it measured."""
    from verifyprof.contracts.ranges import is_phase

    names = frame.steps["name"].astype(str).unique().tolist()
    if any(is_phase(n, "verify") for n in names):
        return None
    decodes = [n for n in names if is_phase(n, "decode")]
    return decodes[0] if decodes else None
