"""``compare`` and ``report``: two inputs side by side with BEFORE's prediction of the change,
and everything the HTML report shows, about the step group the verdict is about."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts.bounds import TOP_KERNELS
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import WHOLE_TRACE, BreakdownFrame
from verifyprof.model.decision.compare import Comparison, check_change
from verifyprof.model.decision.compare import compare as compare_frames
from verifyprof.model.decision.whatif import WhatifOptions
from verifyprof.pipeline.parallel import (
    rank_files,
)
from verifyprof.pipeline.reading import breakdown, load, read_breakdown_json
from verifyprof.pipeline.story import story_group
from verifyprof.trace.events import Trace
from verifyprof.trace.sources import NSYS_KINDS, is_breakdown_json, sniff

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
    path = Path(str(source))
    if is_breakdown_json(path):
        return Loaded(frame=read_breakdown_json(path))
    files, _ = rank_files([source])
    if len(files) > 1 and any(
        sniff(f) in NSYS_KINDS for f in files
    ):  # per-rank nsys files: mapped, no one trace
        result = breakdown(
            [source],
            step_regex=step_regex,
            taxonomy=taxonomy,
            whole_trace=whole_trace,
            release=True,
        )
        return Loaded(frame=result.frame(), result=result)
    trace = load(source)
    result = breakdown(trace, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace)
    rules = load_taxonomy(taxonomy)
    table = kernel_table(trace, rules)
    scope = "the verify ranges"
    try:
        verify = kernel_table(trace, rules, step_regex=VERIFY_KERNELS_REGEX).table
    except VerifyprofError:  # no verify ranges or none with kernels: families from the whole trace
        verify, scope = table.table, "the whole trace (no verify ranges)"
    return Loaded(result.frame(), result, table, verify, scope)


def _input(
    source: str | Path | Loaded,
    step_regex: str | None,
    taxonomy: str | Path | None,
    whole_trace: bool = False,
) -> Loaded:
    return (
        source
        if isinstance(source, Loaded)
        else load_input(source, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace)
    )


def compare(
    before: str | Path | Loaded,
    after: str | Path | Loaded,
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
            manifest_mode(b.frame, b_step, _path(manifest)),
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
    from verifyprof.model.decision.whatif import prepare

    try:
        before_state = prepare(
            b.frame,
            WhatifOptions(
                accept_len=accept_len,
                manifest=_path(manifest),
                step=b_step,
                mode=b_mode,
                width=width,
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
        return result
    triton = any("triton" in row["family"] for row in result.families.get("appeared", []))
    check_change(result, before_state, after_state, triton_appeared=triton)
    return result


def _families_scope(result: Comparison, before: Loaded, after: Loaded) -> None:
    """Which kernels the families are of, each side's: its verify ranges, or its whole trace."""
    if result.families.get("available"):
        b, a = before.verify_scope, after.verify_scope
        result.families["scope"] = b if b == a else f"before {b}, after {a}"


def _path(value: str | Path | None) -> Path | None:
    return Path(value) if value is not None else None


def _manifest_beside(source: Any) -> Path | None:
    """A capture folder's manifest, when the input is one."""
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
    source: str | Path,
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
):
    """``verifyprof report``: everything the HTML report shows (a ReportData), from a trace or
    breakdown JSON, about the step group the verdict is about (``step``, ``width``, ``mode``: as
    ``--step``, ``--width`` and ``--mode`` pick it for every command)."""
    from verifyprof.attribution.summary import summarize
    from verifyprof.contracts import phases as phase_names
    from verifyprof.pipeline.resolve import identify, ranking_of, resolve_frame, unranked_verdict
    from verifyprof.pipeline.resolve import step_regex as regex_for
    from verifyprof.pipeline.story import check_picked
    from verifyprof.report.data import ReportData

    options = WhatifOptions(
        accept_len=accept_len,
        manifest=_path(manifest),
        step=step,
        step_range=step_regex,
        baseline_tps=baseline_tps,  # plain decoding's rate, as whatif takes it
        decode_ms=decode_ms,
        width=width,
        mode=mode,
    )
    regex = regex_for(options)
    loaded = load_input(source, step_regex=regex, taxonomy=taxonomy, whole_trace=whole_trace)
    frame = loaded.frame
    summary = (
        loaded.result.summary()
        if loaded.result is not None
        else (frame.summary or summarize(frame.steps))
    )
    data = ReportData(
        source=str(source),
        trace=frame.trace,
        phases=list(phase_names.ALL),
        steps=frame.steps,
        summary=summary,
    )
    resolved = resolve_frame(frame, [identify(source)], options, loaded.result)
    check_picked(frame, options.step, width, mode)  # a --width/--mode no group has: one line
    if resolved.story is not None:
        data.group = (resolved.story.name, resolved.story.variant)
        data.group_mode, data.group_why = resolved.story.mode, resolved.story.why
    else:
        data.group, data.group_why = story_group(frame, summary)
    data.notes += resolved.notes
    try:
        ranking = ranking_of(resolved)
        data.ranking = ranking
        data.whatif = ranking.to_json() if ranking is not None else None
        data.whatif_note = "; ".join(
            "no plan: give an accept length (--accept-len A or --manifest M)"
            if r.startswith("accept length unknown")
            else f"no plan: {r}"
            for r in resolved.reasons
        )
    except VerifyprofError as err:
        data.whatif_note = f"no plan: {err.problem}"
    if data.ranking is None:  # breakdown's own verdict, word for word: one definition
        data.verdict = unranked_verdict(resolved)
    data.group_why = _about(data, resolved.story)
    _kernels_and_timelines(data, loaded, summary, taxonomy, top_kernels, (resolved, regex))
    if compare_with is not None:
        after = load_input(
            compare_with, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace
        )
        data.comparison = compare(
            loaded, after, accept_len=accept_len, manifest=resolved.options.manifest, step=step
        )
        data.compare = data.comparison.to_json()
    return data


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


def _kernels_and_timelines(
    data: Any, loaded: Loaded, summary: dict[str, Any], taxonomy, top_kernels: int, story=None
) -> None:
    """The story group's top kernels and median-step timelines, which need the trace itself."""
    from verifyprof.attribution.timeline import step_timelines

    frame = loaded.frame
    if (
        loaded.kernel_table is not None and loaded.trace is not None
    ):  # a trace read whole (not per-rank files)
        data.kernels = _group_kernels(loaded, data, taxonomy, *story).to_json(top_kernels)
        windows = median_verify_windows(frame, summary, data.group)
        per_window = max(
            400, 4000 // max(len(windows), 1)
        )  # the page stays a few MB with many ranks
        data.timelines = step_timelines(
            loaded.trace,
            loaded.result,
            windows,
            taxonomy=load_taxonomy(taxonomy),
            max_ops=per_window,
        )
    elif loaded.result is not None:
        data.timeline_note = (
            "the timeline and the kernel table need one trace: per-rank nsys files are broken down"
            " rank by rank and keep no events; give one rank's file for its timeline"
        )
    else:
        data.timeline_note = (
            "the timeline and the kernel table need the trace (a breakdown JSON has no kernels):"
            " give the trace"
        )


def _group_kernels(loaded: Loaded, data: Any, taxonomy, resolved, regex) -> KernelTable:
    """The top kernels of the story's step group, in its mode, as ``kernels`` lists them (the
    same table, group and scope: one ``story_kernels``); the whole trace's when the step is the
    whole trace (``--whole-trace``, as ``kernels --whole-trace``), or when the group's steps
    cannot be told apart (saying so)."""
    from verifyprof.pipeline.kernel_scope import story_kernels

    if data.group is None or data.group[0] == WHOLE_TRACE:
        return loaded.kernel_table
    try:
        return story_kernels(loaded.trace, resolved, None, taxonomy, regex)
    except VerifyprofError as err:
        scope = f"whole trace (the step group's kernels: {err.problem})"
        return replace(loaded.kernel_table, scope=scope)
