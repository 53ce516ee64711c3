"""``kernels``: the kernels of the story's step group (the one the verdict, whatif and the report's
top-kernels table are about), of every step, of ranges given, or of the whole trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import ranges
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.trace.events import Trace

SCOPES = ("story", "all", "range", "whole-trace")


def group_label(name: str, variant: str) -> str:
    """A step group as the console names it: ``name [attributes]``."""
    return f"{name} [{variant}]" if variant else name


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


def kernels_of(
    source: str | Path,
    options: WhatifOptions,
    scope: str = "story",
    taxonomy: str | Path | None = None,
) -> KernelTable:
    """``kernels``: ``scope`` "story" (the story's group; ``options.step`` picks it as
    everywhere: ``--step verify`` is the verdict's group, ``--step draft`` the draft's), "all"
    (every step's kernels), "range" (``options.step_range``) or "whole-trace"."""
    from verifyprof.pipeline.reading import load

    if scope not in SCOPES:
        raise VerifyprofError(f"unknown kernel scope {scope!r}; one of {', '.join(SCOPES)}")
    trace = load(source)
    rules = load_taxonomy(taxonomy)
    if scope == "whole-trace":
        return kernel_table(trace, rules)
    if scope in ("all", "range"):
        if scope == "range":
            return kernel_table(trace, rules, options.step_range)
        table = kernel_table(trace, rules, ranges.DEFAULT_STEP_REGEX)
        table.scope = "every step (verifyprof's ranges, SGLang's and users': every group)"
        return table
    return _story_kernels(trace, source, options, taxonomy)


def _story_kernels(trace: Trace, source, options: WhatifOptions, taxonomy) -> KernelTable:
    """The kernels of the group :mod:`verifyprof.pipeline.resolve` makes the story's, named as
    the verdict names it; a trace without steps: the whole trace, saying so."""
    from verifyprof.contracts.ranges import PHASES
    from verifyprof.pipeline.reading import breakdown
    from verifyprof.pipeline.resolve import (
        CYCLE_PARTS,
        Input,
        identify,
        manifest_mode,
        resolve_frame,
        step_regex,
    )

    try:
        result = breakdown(trace, step_regex=step_regex(options), taxonomy=taxonomy)
    except NoStepsError as err:
        if options.step is not None:
            raise
        table = kernel_table(trace, load_taxonomy(taxonomy))
        table.scope = f"whole trace ({err.problem.split(';')[0]})"
        return table
    frame = result.frame()
    manifest, picked = options.manifest or identify(source).manifest, None
    if options.mode is None and manifest is not None and options.step not in CYCLE_PARTS:
        # the verify's mode as every command picks it: the manifest's measured run's
        step = None if options.step is None or options.step in PHASES else options.step
        mode, picked = manifest_mode(frame, step, manifest)
        options = replace(options, mode=mode) if mode else options
    # the story only: no manifest, so no model state is prepared (kernels needs none)
    resolved = resolve_frame(
        frame, [Input(str(source), "trace")], replace(options, manifest=None), result, parts=True
    )
    return story_kernels(trace, resolved, options.step, taxonomy, step_regex(options), picked)


def story_kernels(
    trace: Trace,
    resolved,
    step: str | None = None,
    taxonomy=None,
    regex: str | None = None,
    picked: str | None = None,
) -> KernelTable:
    """The kernels of a resolved run's story group (``resolve.Resolved``: its story, or the
    summary's first group when it has no verify group), with the group and the scope in words:
    ``kernels`` and the report's top-kernels table both list this one. ``picked``: why the
    manifest picked the mode, when the run was resolved without it."""
    from verifyprof.pipeline.resolve import CYCLE_PARTS, mode_why
    from verifyprof.pipeline.story import story_group

    if resolved.story is not None:
        story = resolved.story
        group, mode, why = (story.name, story.variant), story.mode, story.why
        why = mode_why(why, picked) if picked else why
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
