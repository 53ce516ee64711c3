"""``kernels``: the kernels of the run's step group (the one the verdict, whatif and the report's
top-kernels table are about), of every step, of ranges given, or of the whole trace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import ranges
from verifyprof.contracts.schema import group_label
from verifyprof.trace.events import Trace

if TYPE_CHECKING:
    from verifyprof.attribution.assignment import AttributedSteps
    from verifyprof.attribution.breakdown import Breakdown
    from verifyprof.model.decision.whatif import WhatifOptions
    from verifyprof.pipeline.resolve import Story

SCOPES = ("story", "all", "range", "whole-trace")


VERIFY_KERNELS_REGEX = (  # kernel families: the verify ranges' kernels
    r"^verifyprof\.verify(\s|$)|TARGET_VERIFY"
)


class GroupOfRun(Protocol):
    """What the kernel tables read of a :class:`~verifyprof.pipeline.run.Run` (which imports
    this module: named here, not imported)."""

    sources: list[str]
    options: WhatifOptions
    taxonomy: object
    trace: Trace | None
    breakdown: Breakdown | None
    group: Story | None
    shown_group: tuple[tuple[str, str], str | None, str]
    attributed: AttributedSteps | None
    trace_kernels: KernelTable | None


def run_kernels(run: GroupOfRun, scope: str = "story") -> KernelTable:
    """``kernels``: the story group's ("story"; ``--step`` picks it as everywhere: ``--step
    verify`` is the verdict's group, ``--step draft`` the draft's), every step's ("all"),
    ``--range``'s ("range") or the whole trace's ("whole-trace") kernels."""
    from verifyprof.contracts.errors import NoStepsError, VerifyprofError
    from verifyprof.pipeline import reading

    if scope not in SCOPES:
        raise VerifyprofError(f"unknown kernel scope {scope!r}; one of {', '.join(SCOPES)}")
    # several nsys files or a breakdown JSON: the reader's own line on why it is no trace
    trace = run.trace or reading.load(run.sources[0])
    rules = load_taxonomy(run.taxonomy)
    if scope in ("whole-trace", "range"):
        return kernel_table(trace, rules, run.options.step_range if scope == "range" else None)
    if scope == "all":
        table = kernel_table(trace, rules, ranges.DEFAULT_STEP_REGEX)
        table.scope = "every step (verifyprof's ranges, SGLang's and users': every group)"
        return table
    try:
        run.breakdown  # noqa: B018 - the steps, found once
    except NoStepsError as err:
        if run.options.step is not None:
            raise
        table = kernel_table(trace, rules)
        table.scope = f"whole trace ({err.problem.split(';')[0]})"
        return table
    return story_kernels(trace, run, run.options.step)


def verify_kernels(run: GroupOfRun) -> tuple[Any, str] | None:
    """The verify ranges' kernel table (compare's kernel families, from the run's attributed
    steps) and which kernels it holds, in words: the whole trace's where no verify range has
    kernels; None without one trace's events."""
    from verifyprof.attribution.steps import find_steps
    from verifyprof.contracts.errors import VerifyprofError

    if run.breakdown is None or run.trace is None:
        return None
    try:
        if not run.options.whole_trace:
            rules = load_taxonomy(run.taxonomy)
            regex = VERIFY_KERNELS_REGEX
            return kernel_table(run.trace, rules, regex, attributed=run.attributed).table, (
                "the verify ranges"
            )
        find_steps(run.trace, VERIFY_KERNELS_REGEX)  # the steps compared are the whole
        scope = "the whole trace (--whole-trace)"  # trace's: so are the families
    except VerifyprofError:  # no verify ranges or none with kernels
        scope = "the whole trace (no verify ranges)"
    assert run.trace_kernels is not None
    return run.trace_kernels.table, scope


def group_kernels(
    trace: Trace,
    group: tuple[str, str],
    mode: str | None,
    taxonomy=None,
    step_regex: str | None = None,
    attributed: AttributedSteps | None = None,
) -> KernelTable:
    """The kernels of one step group (name, attributes) in one mode: its steps only, as the
    breakdown (of ``step_regex``, default the default ranges) names and groups them; none of a
    sibling group (a width sweep's, say) nor of the group's steps run in the other mode.
    ``attributed``: the trace's attributed steps, when a run holds them."""
    regex = step_regex or ranges.DEFAULT_STEP_REGEX
    rules = load_taxonomy(taxonomy)
    table = kernel_table(trace, rules, regex, mode or None, group, attributed)
    table.scope = f"the step group {group_label(*group)}" + (f", {mode} steps" if mode else "")
    return table


def story_kernels(trace: Trace, run: GroupOfRun, step: str | None = None) -> KernelTable:
    """The kernels of a run's story group (its story, or the summary's first group when it has
    no verify group: :attr:`Run.shown_group`), with the group and the scope in words: ``kernels``
    and the report's top-kernels table both list this one, from the run's attributed steps."""
    from verifyprof.pipeline.resolve import CYCLE_PARTS, step_regex

    group, mode, why = run.shown_group
    if run.group is None:
        why = f"{group_label(*group)}: {why}"
    regex = step_regex(run.options)
    table = group_kernels(trace, group, mode, run.taxonomy, regex, run.attributed)
    table.group = {
        "name": group[0],
        "variant": group[1],
        "label": group_label(*group),
        "mode": mode,
        "why": why,
        "steps": table.steps,
    }
    lead = (
        f"the {step} steps' group"
        if step in CYCLE_PARTS
        else "the verdict's step group"
        if run.group is not None
        else "the step group"
    )
    table.scope = f"{lead}: {why}" + (f"; {mode} steps" if mode else "")
    return table
