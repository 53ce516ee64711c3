"""``verifyprof report``: everything the HTML report shows (a ReportData), gathered from a trace
or breakdown JSON: the story's group, its ranking or breakdown's verdict, its top kernels (the
``kernels`` command's), median-step timelines, and a comparison with ``--compare``."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from verifyprof.attribution.kernels import KernelTable
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts.bounds import TOP_KERNELS
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.paths import shown
from verifyprof.contracts.schema import WHOLE_TRACE, BreakdownFrame
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.pipeline.before_after import optional_path
from verifyprof.pipeline.resolve import Resolved

if TYPE_CHECKING:
    from verifyprof.pipeline.run import Run


def group_regex(group: tuple[str, str]) -> str:
    """A ``--range`` regex selecting the ranges of exactly one step group: its name, each of its
    attributes, and no other attribute (but the volatile ones, which every step has its own of)."""
    from verifyprof.contracts.schema import VOLATILE_ATTRS

    name, label = group
    pairs = [kv for kv in label.split() if "=" in kv]
    has = "".join(rf"(?=.*\s{re.escape(kv)}(\s|$))" for kv in pairs)
    keys = sorted({kv.split("=", 1)[0] for kv in pairs} | VOLATILE_ATTRS)
    only = rf"(?!.*\s(?!(?:{'|'.join(map(re.escape, keys))})=)\w+=)"
    return rf"^{re.escape(name)}(?=\s|$){has}{only}"


def median_verify_windows(
    frame: BreakdownFrame, summary: dict[str, Any], group: tuple[str, str] | None = None
) -> list[tuple[int, int]]:
    """The (step, device) windows a report's timeline draws: per rank (or device), the step
    nearest the median wall of the story's group (default: the summary's first group)."""
    from verifyprof.contracts.schema import variant

    groups = summary.get("groups") or []
    if group is None:
        if not groups:
            return []
        group = (groups[0]["name"], groups[0]["variant"])
    name, label = group
    steps = frame.steps
    rows = steps[(steps["name"] == name).to_numpy() & (steps["device"] >= 0).to_numpy()]
    rows = rows[[variant(a) == label for a in rows["attrs"]]] if label else rows
    windows = []
    for _, group in rows.groupby(["rank", "device"], sort=True):  # ranks: a handful
        wall = group["wall_ns"].to_numpy()
        pick = group.iloc[int(abs(wall - float(np.median(wall))).argmin())]
        windows.append((int(pick["step"]), int(pick["device"])))
    return windows[:16]


def report(
    source: str | Path | list[str | Path],
    compare_with: str | Path | None = None,
    accept_len: float | None = None,
    manifest: str | Path | None = None,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    top_kernels: int = TOP_KERNELS,
    whole_trace: bool = False,
    step: str | None = None,
    baseline_tps: float | None = None,
    decode_ms: float | None = None,
    width: int | None = None,
    mode: str | None = None,
    *,
    options: WhatifOptions | None = None,
    expanded: tuple[list[str], list[tuple[str, str]]] | None = None,
):
    """``verifyprof report``: everything the HTML report shows (a ReportData), from a trace or
    breakdown JSON, about the step group the verdict is about (``step``, ``width``, ``mode``: as
    ``--step``, ``--width`` and ``--mode`` pick it for every command). ``source``: one input, or
    several captures of one program, today's first, made one model as ``whatif CAP...`` makes
    it (``open_run(..., captures=True)``: the same run; ``expanded``: the sources' expansion where
    the caller has it, each capture folder listed once). ``options``: the command's own, typed
    and whole (the CLI's: the load curve's options too); else made of the keywords here."""
    from verifyprof.pipeline.run import open_run

    if options is None:
        options = WhatifOptions(
            accept_len=accept_len,
            manifest=optional_path(manifest),
            step=step,
            step_range=step_regex,
            whole_trace=whole_trace,
            baseline_tps=baseline_tps,  # plain decoding's rate, as whatif takes it
            decode_ms=decode_ms,
            width=width,
            mode=mode,
        )
    sources = [str(s) for s in (source if isinstance(source, list) else [source])]
    run = open_run(
        sources, options, taxonomy=taxonomy, keep_trace=True, captures=True, expanded=expanded
    )
    captures = list(run.captures)  # a --batches folder's, any cut short left out (and said)
    combined = run.joined
    after = None
    if compare_with is not None:
        after_options = WhatifOptions(
            step_range=options.step_range, whole_trace=options.whole_trace
        )
        after = open_run([compare_with], after_options, taxonomy=taxonomy, keep_trace=True)
    return report_of(run, after, top_kernels, combined, captures)


def report_of(
    run: Run,
    after: Run | None = None,
    top_kernels: int = TOP_KERNELS,
    combined: Resolved | None = None,
    captures: list[str] | None = None,
):
    """The report's page of a run (and ``after``: the comparison with another run of it;
    ``combined``: the run's state with the model of every capture in ``captures``)."""
    from verifyprof.contracts import phases as phase_names
    from verifyprof.report.data import ReportData

    frame, summary = run.frame, run.summary
    data = ReportData(
        source=shown(run.sources[0]),
        trace=frame.trace,
        phases=list(phase_names.ALL),
        steps=frame.steps,
        summary=summary,
    )
    resolved = run.resolved
    data.group, mode, data.group_why = run.shown_group
    if resolved.story is not None:
        data.group_mode = mode
    data.notes += resolved.notes + _captures_note(captures or [], combined)
    data.unfinished = list(run.unfinished)  # warned as whatif warns, and noted on the page
    data.notes += [f"{shown(c)}: {why}" for c, why in run.unfinished]
    run.prepared  # noqa: B018 - a model input refused fails the report, as whatif's would
    _whatif_of(data, run, combined)
    data.group_why = _about(data, resolved.story)
    _kernels_and_timelines(data, summary, top_kernels, run)
    if after is not None:  # as ``compare BEFORE AFTER`` says it, from the two runs (the
        before = run  # manifest found beside a capture read, as the page's whatif reads it)
        if resolved.options.manifest != run.options.manifest:
            before = run.under(replace(run.options, manifest=resolved.options.manifest))
        data.comparison = before.compare(after)
        data.compare = data.comparison.to_json()
    return data


def _captures_note(captures: list[str], combined: Resolved | None) -> list[str]:
    """Which captures the model rests on, when more than today's."""
    from verifyprof.pipeline.captures import label_of

    if combined is None or len(captures) < 2:
        return []
    taken: set[str] = set()
    labels = []
    for spec in captures:
        labels.append(label_of(spec, taken))
        taken.add(labels[-1])
    return [
        f"one model of {len(captures)} captures of one program (every capture's steps are"
        f" measured points of its curves; today's run is the first): {', '.join(labels)}"
    ]


def _whatif_of(data: Any, run: Run, combined: Resolved | None = None) -> None:
    """The ranking (``combined``: of every capture's model), its JSON and why there is none;
    without one, breakdown's own verdict, word for word (one definition: pipeline.verdicts)."""
    from verifyprof.pipeline.verdicts import ranking_of, unranked_verdict

    try:
        ranking = run.ranking if combined is None else ranking_of(combined)
        data.ranking = ranking
        data.whatif = ranking.to_json() if ranking is not None else None
        data.whatif_note = "; ".join(
            "no plan: give an accept length (--accept-len A or --manifest M)"
            if r.startswith("accept length unknown")
            else f"no plan: {r}"
            for r in run.reasons
        )
    except VerifyprofError as err:
        data.whatif_note = f"no plan: {err.problem}"
    if data.ranking is None:
        data.verdict = unranked_verdict(run.resolved)


def _about(data: Any, story: Any) -> str:
    """Which group the verdict is about, and why: the story's words, but where no model ran (no
    plan) a whole trace is described as traced, not 'modelled as one verify step'."""
    if data.ranking is not None or story is None or story.name != WHOLE_TRACE:
        return data.group_why
    what = story.why.partition(": ")[0]
    return (
        f"{what}: whole-trace breakdown (--whole-trace): the whole trace as one step per"
        " device, described as traced; no model ran (no plan)"
    )


def _kernels_and_timelines(data: Any, summary: dict[str, Any], top_kernels: int, run: Run) -> None:
    """The story group's top kernels and median-step timelines, which need the trace itself."""
    from verifyprof.attribution.timeline import step_timelines

    if run.trace_kernels is not None:  # a trace read whole (not per-rank files)
        data.kernels = _group_kernels(data, run).to_json(top_kernels)
        windows = median_verify_windows(run.frame, summary, data.group)
        per_window = max(
            400, 4000 // max(len(windows), 1)
        )  # the page stays a few MB with many ranks
        data.timelines = step_timelines(
            run.trace,
            run.breakdown,
            windows,
            taxonomy=load_taxonomy(run.taxonomy),
            max_ops=per_window,
            attributed=run.attributed,
        )
    elif run.breakdown is not None:
        data.timeline_note = (
            "the timeline and the kernel table need one trace: per-rank nsys files are broken down"
            " rank by rank and keep no events; give one rank's file for its timeline"
        )
    else:
        data.timeline_note = (
            "the timeline and the kernel table need the trace (a breakdown JSON has no kernels):"
            " give the trace"
        )


def _group_kernels(data: Any, run: Run) -> KernelTable:
    """The top kernels of the story's step group, in its mode, as ``kernels`` lists them (the
    same table, group and scope: one ``story_kernels``); the whole trace's when the step is the
    whole trace (``--whole-trace``, as ``kernels --whole-trace``), or when the group's steps
    cannot be told apart (saying so)."""
    from verifyprof.pipeline.kernel_scope import story_kernels

    assert run.trace is not None and run.trace_kernels is not None
    if data.group is None or data.group[0] == WHOLE_TRACE:
        return run.trace_kernels
    try:
        return story_kernels(run.trace, run)
    except VerifyprofError as err:
        scope = f"whole trace (the step group's kernels: {err.problem})"
        return replace(run.trace_kernels, scope=scope)
