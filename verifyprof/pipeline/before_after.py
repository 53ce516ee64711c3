"""``compare`` and ``report``: two inputs side by side with BEFORE's prediction of the change,
and everything the HTML report shows, about the step group the verdict is about."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.decision.compare import Comparison, check_change
from verifyprof.model.decision.compare import compare as compare_frames
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.trace.events import Trace

if TYPE_CHECKING:
    from verifyprof.pipeline.run import Run

VERIFY_KERNELS_REGEX = (  # kernel families: the verify ranges' kernels
    r"^verifyprof\.verify(\s|$)|TARGET_VERIFY"
)


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


def loaded_of(run: Run) -> Loaded:
    """compare's and the report's view of a run: its frame and, for one trace, its kernel tables
    (the whole trace's, and the verify ranges' for the kernel families)."""
    if run.breakdown is None or run.trace is None:  # a breakdown JSON, or per-rank nsys files
        return Loaded(run.frame, run.breakdown)
    trace, rules = run.trace, load_taxonomy(run.taxonomy)
    table = kernel_table(trace, rules)
    scope = "the verify ranges"
    try:
        verify = kernel_table(trace, rules, step_regex=VERIFY_KERNELS_REGEX).table
    except VerifyprofError:  # no verify ranges or none with kernels: families from the whole trace
        verify, scope = table.table, "the whole trace (no verify ranges)"
    return Loaded(run.frame, run.breakdown, table, verify, scope)


def _input(
    source: str | Path | Loaded | Run,
    step_regex: str | None,
    taxonomy: str | Path | None,
    whole_trace: bool = False,
) -> Loaded:
    """compare's view of one side: a run already open (its trace kept), a Loaded, or a path."""
    if isinstance(source, Loaded):
        return source
    if hasattr(source, "resolved"):  # a Run (not imported here: run imports this module's users)
        return loaded_of(source)
    return load_input(source, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace)


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
    and, when an accept length is known (or BEFORE is a capture
    folder with one), BEFORE's what-if prediction for the change beside AFTER's measured cycle."""
    from verifyprof.pipeline.resolve import chosen_step, manifest_mode
    from verifyprof.pipeline.resolve import step_regex as regex_for

    regex = regex_for(WhatifOptions(step=step, step_range=step_regex))
    b, a = (
        _input(before, regex, taxonomy, whole_trace),
        _input(after, regex, taxonomy, whole_trace),
    )
    b_step = chosen_step(b.frame, step, str(before))
    after_step = _decode_step_if_no_verify(a.frame) or chosen_step(a.frame, step, str(after))
    manifest = manifest or (_manifest_beside(before) if accept_len is None else None)
    after_manifest = _manifest_beside(after)
    (b_mode, b_note), (a_mode, a_note) = (
        ((mode, None), (mode, None))
        if mode is not None  # the user's, on both sides
        else (
            manifest_mode(b.frame, b_step, optional_path(manifest)),
            manifest_mode(a.frame, after_step, after_manifest),
        )
    )
    result = compare_frames(
        b.frame,
        a.frame,
        b.verify_kernels,
        a.verify_kernels,
        after_step,
        before_step=b_step,
        modes=(b_mode, a_mode),
        width=width,
    )
    result.notes += [f"{label}: {n}" for label, n in (("before", b_note), ("after", a_note)) if n]
    _families_scope(result, b, a)
    result.warnings += [  # the trace problems each side's numbers carry, as breakdown names them
        f"{label} {path}: {record['message']}"
        for label, path, side in (("before", before, b), ("after", after, a))
        for record in side.frame.integrity
    ]
    if accept_len is None and manifest is None:
        result.prediction_note = (
            "no accept length: give --accept-len or --manifest for the prediction check"
        )
        return result
    sides = ((b, b_step, b_mode, optional_path(manifest)), (a, after_step, a_mode, after_manifest))
    _prediction_check(result, sides, accept_len, width)
    return result


def _prediction_check(result: Comparison, sides, accept_len: float | None, width) -> None:
    """BEFORE's what-if of the change beside AFTER's measured cycle (``sides``: each side's
    loaded input, step, mode and manifest); a side that cannot be modelled says why."""
    from verifyprof.pipeline.model_files import prepared_of as prepare

    (b, b_step, b_mode, manifest), (a, after_step, a_mode, after_manifest) = sides
    try:
        before_state = prepare(
            b.frame,
            WhatifOptions(
                accept_len=accept_len, manifest=manifest, step=b_step, mode=b_mode, width=width
            ),
        )
        speculation_off = after_step is not None and after_step == _decode_step_if_no_verify(
            a.frame
        )
        after_options = WhatifOptions(
            accept_len=1.0
            if speculation_off
            else (None if after_manifest else before_state.scenario.accept_len),
            manifest=after_manifest,
            step=after_step,
            mode=a_mode,
            width=width,
        )
        after_state = prepare(a.frame, after_options)
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


def _manifest_beside(source: Any) -> Path | None:
    """A capture folder's manifest, when the input is one."""
    if hasattr(source, "resolved"):  # a Run: its one capture folder's
        return source.inputs[0].manifest if len(source.inputs) == 1 else None
    path = Path(str(source)) if not isinstance(source, Loaded) else None
    found = path / "manifest.json" if path is not None and path.is_dir() else None
    return found if found is not None and found.is_file() else None


def _decode_step_if_no_verify(frame: BreakdownFrame) -> str | None:
    """A run with speculation off has decode steps and no verify: those are what it measured."""
    from verifyprof.contracts.ranges import is_phase

    names = frame.steps["name"].astype(str).unique().tolist()
    if any(is_phase(n, "verify") for n in names):
        return None
    decodes = [n for n in names if is_phase(n, "decode")]
    return decodes[0] if decodes else None
