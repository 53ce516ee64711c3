"""``kernels``: the kernels of the run's step group (the one the verdict, whatif and the report's
top-kernels table are about), of every step, of ranges given, or of the whole trace."""

from __future__ import annotations

from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import ranges
from verifyprof.contracts.schema import group_label
from verifyprof.trace.events import Trace

SCOPES = ("story", "all", "range", "whole-trace")


def group_kernels(
    trace: Trace,
    group: tuple[str, str],
    mode: str | None,
    taxonomy=None,
    step_regex: str | None = None,
) -> KernelTable:
    """The kernels of one step group (name, attributes) in one mode: its steps only, as the
    breakdown (of ``step_regex``, default the default ranges) names and groups them; none of a
    sibling group (a width sweep's, say) nor of the group's steps run in the other mode."""
    regex = step_regex or ranges.DEFAULT_STEP_REGEX
    table = kernel_table(trace, load_taxonomy(taxonomy), regex, mode=mode or None, group=group)
    table.scope = f"the step group {group_label(*group)}" + (f", {mode} steps" if mode else "")
    return table


def story_kernels(
    trace: Trace,
    resolved,
    step: str | None = None,
    taxonomy=None,
    regex: str | None = None,
) -> KernelTable:
    """The kernels of a resolved run's story group (``resolve.Resolved``: its story, or the
    summary's first group when it has no verify group), with the group and the scope in words:
    ``kernels`` and the report's top-kernels table both list this one."""
    from verifyprof.pipeline.resolve import CYCLE_PARTS, story_group

    if resolved.story is not None:
        story = resolved.story
        group, mode, why = (story.name, story.variant), story.mode, story.why
    else:
        summary = resolved.result.summary() if resolved.result is not None else None
        group, why = story_group(resolved.frame, summary or resolved.frame.summary or {})
        why, mode = f"{group_label(*group)}: {why}", None
    table = group_kernels(trace, group, mode, taxonomy, regex)
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
        if resolved.story is not None
        else "the step group"
    )
    table.scope = f"{lead}: {why}" + (f"; {mode} steps" if mode else "")
    return table
