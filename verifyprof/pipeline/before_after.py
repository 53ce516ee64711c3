"""``compare`` and ``report``: two inputs side by side with BEFORE's prediction of the change,
and everything the HTML report shows, about the step group the verdict is about."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.kernels import KernelTable
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.decision.compare import Comparison, check_change
from verifyprof.model.decision.compare import compare as side_by_side_of
from verifyprof.model.decision.whatif import WhatifOptions, prepare
from verifyprof.pipeline.resolve import Profiles
from verifyprof.trace.events import Trace

if TYPE_CHECKING:
    from verifyprof.pipeline.run import Run


@dataclass
class Loaded:
    """One input of compare/report: its breakdown frame and, for a trace, what only a trace has."""

    frame: BreakdownFrame
    result: Breakdown | None = None  # None for a breakdown JSON
    kernel_table: KernelTable | None = None
    verify_kernels: Any = None  # kernel table (DataFrame) of the verify ranges, for kernel families
    verify_scope: str = "the verify ranges"  # which kernels verify_kernels holds, in words

    @property
    def trace(self) -> Trace | None:
        return self.result.trace if self.result is not None else None


def load_input(
    source: str | Path,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    whole_trace: bool = False,
) -> Loaded:
    """A breakdown JSON read back, or a trace broken down with its kernel tables (the trace is kept:
    the report's timeline needs it)."""
    from verifyprof.pipeline.run import open_run

    options = WhatifOptions(step_range=step_regex, whole_trace=whole_trace)
    return loaded_of(open_run([source], options, taxonomy=taxonomy, keep_trace=True))


def loaded_of(run: Run, whole: bool = True) -> Loaded:
    """compare's and the report's view of a run: its frame and, for one trace, its kernel tables
    (``whole``: the whole trace's, which compare does not show; the verify ranges' for the
    kernel families), each made once per run."""
    if run.verify_kernels is None:  # a breakdown JSON, or per-rank nsys files
        return Loaded(run.frame, run.breakdown)
    verify, scope = run.verify_kernels
    return Loaded(run.frame, run.breakdown, run.trace_kernels if whole else None, verify, scope)


@dataclass
class Side:
    """One side of compare: its input as loaded, its verify profiles (made once: the run's when
    it is one), and the manifest its prediction reads (path and JSON, read once)."""

    label: str
    source: Any
    loaded: Loaded
    profiles: Profiles
    manifest: Path | None = None
    manifest_data: dict | None = None


def _side(label: str, source: Any, options: WhatifOptions, taxonomy, beside: bool) -> Side:
    """compare's view of one input: a run already open (its trace kept), a Loaded (frames only),
    or a path opened here as one run; ``beside``: a capture folder's own manifest is the one
    its prediction reads (unless ``options.manifest`` names another)."""
    from verifyprof.contracts.manifest import manifest_json
    from verifyprof.pipeline.run import Run, open_run

    if isinstance(source, Loaded):
        manifest = options.manifest
        data = manifest_json(manifest) if manifest is not None else None
        return Side(label, source, source, Profiles(source.frame), manifest, data)
    run = source if isinstance(source, Run) else open_run([source], options, **_keep(taxonomy))
    manifest = options.manifest
    if manifest is None and beside and len(run.inputs) == 1:
        manifest = run.inputs[0].manifest
    same = manifest is not None and run.manifest == Path(manifest)
    data = run.manifest_data if same else (manifest_json(manifest) if manifest else None)
    return Side(label, source, loaded_of(run, whole=False), run.profiles, manifest, data)


def _keep(taxonomy) -> dict:
    return {"taxonomy": taxonomy, "keep_trace": True}


def compare(
    before: str | Path | Loaded | Run,
    after: str | Path | Loaded | Run,
    accept_len: float | None = None,
    manifest: str | Path | None = None,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    whole_trace: bool = False,
    step: str | None = None,
    width: int | None = None,
    mode: str | None = None,
) -> Comparison:
    """``verifyprof compare BEFORE AFTER``: the verify steps side by side (``step``, ``width``,
    ``mode``: which group is the verify on both sides, as ``--step``, ``--width``, ``--mode``)
    and, when an accept length is known (or BEFORE is a capture folder with one), BEFORE's
    what-if prediction for the change beside AFTER's measured cycle. Each side is one run
    (:func:`~verifyprof.pipeline.run.open_run`): its inputs read once, each profile made once."""
    from verifyprof.pipeline.resolve import chosen_step, manifest_mode

    picks = {"step_range": step_regex, "whole_trace": whole_trace, "step": step, "width": width}
    given = WhatifOptions(accept_len=accept_len, manifest=optional_path(manifest), **picks)
    b = _side("before", before, given, taxonomy, beside=accept_len is None)
    a = _side("after", after, WhatifOptions(**picks), taxonomy, beside=True)
    b_step = chosen_step(b.loaded.frame, step, str(before))
    a_frame = a.loaded.frame
    after_step = _decode_step_if_no_verify(a_frame) or chosen_step(a_frame, step, str(after))
    (b_mode, b_note), (a_mode, a_note) = (
        ((mode, None), (mode, None))
        if mode is not None  # the user's, on both sides
        else (
            manifest_mode(b.loaded.frame, b_step, b.manifest, b.manifest_data),
            manifest_mode(a_frame, after_step, a.manifest, a.manifest_data),
        )
    )
    picked = ((b_step, width, b_mode), (after_step, width, a_mode))
    result = side_by_side(b, a, picked)
    result.notes += [f"{label}: {n}" for label, n in (("before", b_note), ("after", a_note)) if n]
    _families_scope(result, b.loaded, a.loaded)
    result.warnings += [  # the trace problems each side's numbers carry, as breakdown names them
        f"{side.label} {side.source}: {record['message']}"
        for side in (b, a)
        for record in side.loaded.frame.integrity
    ]
    if accept_len is None and b.manifest is None:
        result.prediction_note = (
            "no accept length: give --accept-len or --manifest for the prediction check"
        )
        return result
    _prediction_check(result, (b, a), picked, accept_len)
    return result


def side_by_side(b: Side, a: Side, picked) -> Comparison:
    """The model's comparison of the two frames' verify groups (``picked``: each side's step,
    width and mode), from each side's profile as made once."""
    return side_by_side_of(
        b.loaded.frame,
        a.loaded.frame,
        b.profiles.get(*picked[0]),
        a.profiles.get(*picked[1]),
        b.loaded.verify_kernels,
        a.loaded.verify_kernels,
    )


def _prediction_check(result: Comparison, sides, picked, accept_len: float | None) -> None:
    """BEFORE's what-if of the change beside AFTER's measured cycle (``sides``: each side;
    ``picked``: each side's step, width and mode); a side that cannot be modelled says why."""
    from verifyprof.pipeline.model_files import given_for

    b, a = sides
    (b_step, width, b_mode), (after_step, _, a_mode) = picked
    try:
        o = WhatifOptions(
            accept_len=accept_len, manifest=b.manifest, step=b_step, mode=b_mode, width=width
        )
        before_state = prepare(
            b.loaded.frame,
            o,
            given_for(b.loaded.frame, o, b.profiles.get(*picked[0]), b.manifest_data),
        )
        speculation_off = after_step is not None and after_step == _decode_step_if_no_verify(
            a.loaded.frame
        )
        o = WhatifOptions(
            accept_len=1.0
            if speculation_off
            else (None if a.manifest else before_state.scenario.accept_len),
            manifest=a.manifest,
            step=after_step,
            mode=a_mode,
            width=width,
        )
        after_state = prepare(
            a.loaded.frame,
            o,
            given_for(a.loaded.frame, o, a.profiles.get(*picked[1]), a.manifest_data),
        )
    except VerifyprofError as err:
        result.prediction_note = f"no prediction check: {err.problem}"
        return
    triton = any("triton" in row["family"] for row in result.families.get("appeared", []))
    check_change(result, before_state, after_state, triton_appeared=triton)


def _families_scope(result: Comparison, before: Loaded, after: Loaded) -> None:
    """Which kernels the families are of, each side's: its verify ranges, or its whole trace."""
    if result.families.get("available"):
        b, a = before.verify_scope, after.verify_scope
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
