"""``kernels``: the kernels of the run's step group (the one the verdict, whatif and the report's
top-kernels table are about), of every step, of ranges given, or of the whole trace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import ranges
from verifyprof.contracts.schema import group_label
from verifyprof.trace.events import Trace

if TYPE_CHECKING:
    from verifyprof.attribution.assignment import AttributedSteps
    from verifyprof.model.decision.whatif import WhatifOptions
    from verifyprof.pipeline.resolve import Story

SCOPES = ("story", "all", "range", "whole-trace")


class GroupOfRun(Protocol):
    """What the story's kernels read of a :class:`~verifyprof.pipeline.run.Run` (which imports
    this module: named here, not imported)."""

    options: WhatifOptions
    taxonomy: object
    group: Story | None
    shown_group: tuple[tuple[str, str], str | None, str]
    attributed: AttributedSteps | None


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
