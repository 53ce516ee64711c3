"""One resolved run (HTA's single facade): a command's inputs read once, resolved once, and
every answer made from that state, lazily, at most once.

``open_run(sources, options)`` names what the user gave. Nothing is read until a member is
asked for; then each input is read once (the trace, or the breakdown JSON; ``manifest.json``),
the manifest, hardware and model files are resolved once, the steps are assigned once (by the
attribution's one assignment, cycle windows included) and the step group is decided once
(:mod:`verifyprof.pipeline.resolve`). ``breakdown``, ``kernels``, ``whatif``, ``compare``,
``report`` and ``load`` are each answered from it: a command computes only what it prints
(``verdict_line`` makes the candidates and plan it names, not the load curve).

Several captures of one program are one run too (``open_run(captures, options, captures=True)``):
every capture's run is a member, read and resolved once, and the ranking, verdict and load are
of their one model (``Run.joined``). Plain numbers are a run of no inputs (``open_run([],
options)``), answered through the same ``ranking``, ``verdict`` and ``load``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import manifest_json
from verifyprof.model.inputs.options import WhatifOptions
from verifyprof.pipeline.resolve import (
    Input,
    Profiles,
    Resolved,
    Story,
    identify,
    prepare_resolved,
    resolve_frame,
    step_regex,
)

if TYPE_CHECKING:
    from verifyprof.attribution.assignment import AttributedSteps
    from verifyprof.attribution.breakdown import Breakdown
    from verifyprof.attribution.kernels import KernelTable
    from verifyprof.contracts.schema import BreakdownFrame
    from verifyprof.model.decision.candidates import Ranking
    from verifyprof.model.decision.compare import Comparison
    from verifyprof.model.decision.plain_numbers import PlainAnswer
    from verifyprof.model.decision.whatif import Prepared  # the model, loaded where it is used
    from verifyprof.pipeline.parallel import ParallelOptions
    from verifyprof.pipeline.verdicts import VerdictScope
    from verifyprof.trace.events import Trace


class Run:
    """A command's inputs and options, and every answer about them, each made once.

    ``parts``: ``--step draft`` (a part of the cycle) may be the group shown (breakdown,
    kernels); ``keep_trace``: the trace's events are kept for the sections that need them (the
    kernel tables, the report's timelines), else they are dropped once broken down.
    """

    def __init__(
        self,
        sources: list[str | Path],
        options: WhatifOptions | None = None,
        parallel: ParallelOptions | None = None,
        taxonomy: str | Path | None = None,
        parts: bool = False,
        keep_trace: bool = False,
    ) -> None:
        self.sources = [str(s) for s in sources]
        self.options = options or WhatifOptions()  # as asked; ``resolved.options`` as resolved
        self.parallel = parallel
        self.taxonomy = taxonomy
        self.parts = parts
        self.keep_trace = keep_trace
        self.inputs: list[Input] = [identify(s) for s in self.sources]
        self.unfinished: list[tuple[str, str]] = []  # (capture, why) whose manifest is not ok

    def __str__(self) -> str:
        return ", ".join(self.sources)

    @classmethod
    def of_trace(cls, trace: Trace, options: WhatifOptions | None = None, **kw: Any) -> Run:
        """A run of a trace already read (a notebook's): never read again."""
        run = cls([str(p) for p in trace.source] or ["<trace>"], options, keep_trace=True, **kw)
        run.__dict__["trace"] = trace
        return run

    @property
    def is_breakdown_json(self) -> bool:
        return len(self.inputs) == 1 and self.inputs[0].kind == "breakdown-json"

    @cached_property
    def manifest(self) -> Path | None:
        """The manifest of the run: ``--manifest``, else the one capture folder's."""
        if self.options.manifest is not None:
            return Path(self.options.manifest)
        return self.inputs[0].manifest if len(self.inputs) == 1 else None

    @cached_property
    def manifest_data(self) -> dict | None:
        """The manifest's JSON, read once."""
        return manifest_json(self.manifest) if self.manifest is not None else None

    @cached_property
    def trace(self) -> Trace | None:
        """The one trace, read once; None for a breakdown JSON or several nsys files (those are
        broken down file by file and keep no events)."""
        from verifyprof.pipeline import reading
        from verifyprof.pipeline.parallel import rank_files
        from verifyprof.trace.sources import NSYS_KINDS, sniff

        if self.is_breakdown_json:
            return None
        files, _ = rank_files(self.sources)
        if len(files) > 1 and any(sniff(f) in NSYS_KINDS for f in files):
            return None
        return reading.load(self.sources[0] if len(self.sources) == 1 else files[0])

    @cached_property
    def breakdown(self) -> Breakdown | None:
        """Per step and device, where the time went; None for a breakdown JSON."""
        from verifyprof.pipeline import reading

        if self.is_breakdown_json:
            return None
        o = self.options
        regex = step_regex(o)
        if self.keep_trace and self.trace is not None:
            return reading.breakdown(
                self.trace,
                step_regex=regex,
                taxonomy=self.taxonomy,
                whole_trace=o.whole_trace,
                attributed=self.attributed,
            )
        return reading.breakdown(
            self.sources if len(self.sources) > 1 else self.sources[0],
            step_regex=regex,
            taxonomy=self.taxonomy,
            whole_trace=o.whole_trace,
            release=True,
            parallel=self.parallel,
        )

    @cached_property
    def frame(self) -> BreakdownFrame:
        """What the model consumes: the breakdown's frame, or the breakdown JSON read back."""
        from verifyprof.pipeline import reading

        if not self.sources:
            raise VerifyprofError("a run of plain numbers has no trace and no steps")
        if self.is_breakdown_json:
            return reading.read_breakdown_json(Path(self.inputs[0].spec))  # a kept capture
        assert self.breakdown is not None
        return self.breakdown.frame()

    @cached_property
    def profiles(self) -> Profiles:
        """The frame's verify profiles, each made once (the story's, the model's, compare's)."""
        return Profiles(self.frame)

    @cached_property
    def resolved(self) -> Resolved:
        """The options resolved against the frame: the manifest, ``--step``, the step group."""
        return resolve_frame(
            self.frame,
            self.inputs,
            self.options,
            self.breakdown,
            self.parts,
            self.manifest_data,
            model=False,
            profiles=self.profiles,
        )

    @property
    def group(self) -> Story | None:
        """The step group the verdict, tables, charts and compare are about."""
        return self.resolved.story

    @property
    def notes(self) -> list[str]:
        return self.resolved.notes

    @property
    def reasons(self) -> list[str]:
        """Why there is no plan (no verify group, no accept length)."""
        self.prepared  # noqa: B018 - its reason, when it has none
        return self.resolved.reasons

    @cached_property
    def prepared(self) -> Prepared | None:
        """The model's starting point; None without a verify group or accept length."""
        if self.resolved.reasons:  # no verify group: resolve_frame said so
            return None
        prepare_resolved(self.resolved)  # a missing accept length joins the reasons
        return self.resolved.prepared

    @cached_property
    def ranking(self) -> Ranking | PlainAnswer | None:
        """Every fix ranked, the plan, the load curve (``whatif``); None without a plan. Of
        every capture's model where the run has several (:attr:`joined`); plain numbers'
        answer where it has no inputs (:attr:`plain`)."""
        from verifyprof.pipeline.verdicts import ranking_of

        if not self.sources:
            return self.plain
        if self.joined is not None:
            return ranking_of(self.joined)
        self.prepared  # noqa: B018
        return ranking_of(self.resolved)

    @cached_property
    def verdict(self) -> dict:
        """``verdict`` (the line) and ``verdict_parts``: from the ranking when made already,
        else from only what the verdict names (no load curve)."""
        from verifyprof.pipeline.verdicts import verdict_json

        if self.plain is not None:  # plain numbers: their answer's own verdict
            return {k: self.plain.to_json()[k] for k in ("verdict", "verdict_parts")}
        if self.joined is not None:  # several captures: the verdict of their one model
            return verdict_json(self.joined, self.ranking)
        self.prepared  # noqa: B018
        return verdict_json(self.resolved, self.__dict__.get("ranking"))

    @property
    def load(self):
        """The load curve (``whatif --batch/--context``): (LoadCurve or None, why not); plain
        numbers' as JSON."""
        if self.ranking is None:
            return None, "; ".join(self.reasons) or "no plan"
        return self.ranking.load, self.ranking.load_skipped

    @property
    def verdict_line(self) -> str | None:
        return self.verdict["verdict"]

    @cached_property
    def scope(self) -> VerdictScope | None:
        """Which steps the verdict's numbers are (None without a verdict)."""
        from verifyprof.pipeline.verdicts import verdict_scope

        return verdict_scope(self.resolved) if self.verdict_line else None

    @cached_property
    def trace_kernels(self) -> KernelTable | None:
        """The whole trace's kernels (the report's table where the step is the whole trace,
        compare's families without verify ranges); None without one trace's events."""
        from verifyprof.attribution.kernels import kernel_table
        from verifyprof.attribution.taxonomy import load_taxonomy

        if self.breakdown is None or self.trace is None:  # a breakdown JSON, per-rank files
            return None
        return kernel_table(self.trace, load_taxonomy(self.taxonomy), attributed=self.attributed)

    @cached_property
    def verify_kernels(self) -> tuple[Any, str] | None:
        """The verify ranges' kernel table (compare's kernel families) and which kernels it
        holds, in words (:func:`~verifyprof.pipeline.kernel_scope.verify_kernels`)."""
        from verifyprof.pipeline.kernel_scope import verify_kernels

        return verify_kernels(self)

    def kernels(self, scope: str = "story") -> KernelTable:
        """``kernels``: the story group's ("story"; ``--step`` picks it as everywhere), every
        step's ("all"), ``--range``'s ("range") or the whole trace's ("whole-trace") kernels
        (:func:`~verifyprof.pipeline.kernel_scope.run_kernels`)."""
        from verifyprof.pipeline.kernel_scope import run_kernels

        return run_kernels(self, scope)

    def ranked(self, source: str) -> Ranking:
        """The ranking, or the one line saying why there is none (``whatif``)."""
        if self.ranking is None:
            raise VerifyprofError("; ".join(self.reasons) or "no plan", source)
        return self.ranking

    # the attributed steps, the group shown, compare: each made once, from the members above

    @cached_property
    def attributed(self) -> AttributedSteps | None:
        """The trace's attributed steps (ops, calls, launches, assignment, modes), made once for
        the breakdown, kernel tables, timelines and kernel families; None without its events."""
        from verifyprof.attribution.assignment import attributed_steps
        from verifyprof.attribution.taxonomy import load_taxonomy
        from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX

        if not self.keep_trace or self.trace is None:
            return None
        o = self.options
        regex = None if o.whole_trace else (step_regex(o) or DEFAULT_STEP_REGEX)
        return attributed_steps(self.trace, load_taxonomy(self.taxonomy), regex)

    @cached_property
    def summary(self) -> dict:
        """The breakdown's summary, made once (a breakdown JSON's own, else made of its steps)."""
        from verifyprof.attribution.summary import summarize

        b = self.breakdown
        return b.summary() if b is not None else self.frame.summary or summarize(self.frame.steps)

    @cached_property
    def shown_group(self) -> tuple[tuple[str, str], str | None, str]:
        """The step group the tables and charts show, its mode and why: the story's, else (no
        verify group to model) the one :func:`~verifyprof.pipeline.resolve.story_group` picks."""
        from verifyprof.pipeline.resolve import story_group

        if self.group is not None:
            return (self.group.name, self.group.variant), self.group.mode, self.group.why
        group, why = story_group(self.frame, self.summary)
        return group, None, why

    def compare(self, other: Run) -> Comparison:
        """``compare``: this run (BEFORE) beside ``other`` (AFTER), under this run's options
        (:func:`~verifyprof.pipeline.before_after.compare_runs`)."""
        from verifyprof.pipeline.before_after import compare_runs

        return compare_runs(self, other)

    def under(self, options: WhatifOptions, beside: bool = True) -> Run:
        """This run's inputs under other options (compare's prediction check), what was read
        shared; ``beside=False``: its manifest is ``options.manifest``, not a capture folder's."""
        run = Run(self.sources, options, self.parallel, self.taxonomy, self.parts, self.keep_trace)
        run.inputs = [i if beside else replace(i, manifest=None) for i in self.inputs]
        shared = ("trace", "breakdown", "frame", "profiles", "attributed", "verify_kernels")
        o = self.options  # other step windows (the ranges cut, --whole-trace): only the trace
        if (step_regex(options), options.whole_trace) != (step_regex(o), o.whole_trace):
            shared = ("trace",)
        run.__dict__.update({k: self.__dict__[k] for k in shared if k in self.__dict__})
        if options.manifest is not None and Path(options.manifest) == self.manifest:
            run.__dict__["manifest_data"] = self.manifest_data
        return run

    @classmethod
    def of_frame(cls, frame: BreakdownFrame, options: WhatifOptions | None = None) -> Run:
        """A run of a breakdown frame already made (no trace): what compare and the model read."""
        run = cls(["<breakdown>"], options)
        run.__dict__.update(frame=frame, breakdown=None, trace=None)
        return run

    # Several captures of one program (``open_run(..., captures=True)``) and plain numbers
    # (``open_run([], options)``): members of the same run, each made once.
    captures: tuple[str, ...] = ()  # every capture of the program, today's (this run) first

    @cached_property
    def members(self) -> list[Run]:
        """Every capture's own run, today's (this one) first, each read and resolved once."""
        rest = [
            Run([c], replace(self.options, source=c), self.parallel, taxonomy=self.taxonomy)
            for c in self.captures[1:]
        ]
        return [self, *rest]

    @cached_property
    def joined(self) -> Resolved | None:
        """This run's state with one model of every capture (their steps the measured points
        of its load and draft-count curves; a capture driven at several loads split by batch);
        None: one input at one load, the run's own state (:attr:`resolved`)."""
        from verifyprof.pipeline.captures import join

        return join(self.members, self.options) if self.captures else None

    @cached_property
    def plain(self) -> PlainAnswer | None:
        """Plain numbers' answer (a run of no inputs: ``whatif --verify-ms V --accept-len A``),
        the files the options name read once; None for a run of inputs."""
        from verifyprof.model.decision.plain_numbers import plain_answer
        from verifyprof.pipeline.model_files import PlainFiles

        return None if self.sources else plain_answer(self.options, PlainFiles(self.options))


def open_run(
    sources: list[str | Path] | str | Path,
    options: WhatifOptions | None = None,
    parallel: ParallelOptions | None = None,
    *,
    captures: bool = False,
    expanded: tuple[list[str], list[tuple[str, str]]] | None = None,
    **kw: Any,
) -> Run:
    """The one way into the pipeline: a :class:`Run` of the inputs (a trace, a capture folder, a
    breakdown JSON, or several trace files) under the options. ``captures``: the inputs are
    captures of one program (``whatif CAP...``, ``report CAP...``; a ``capture --batches``
    folder stands for its captures, ``expanded`` where the caller has them): the run is
    today's, the first, the others its :attr:`~Run.members`. No inputs: plain numbers."""
    sources = [sources] if isinstance(sources, (str, Path)) else sources
    if captures:
        from verifyprof.pipeline.captures import capture_options, expanded_captures

        found, left_out = expanded or expanded_captures([str(s) for s in sources])
        if not found:
            raise VerifyprofError("no captures given")
        options = capture_options(found, options or WhatifOptions())
        run = Run(found[:1], replace(options, source=found[0]), parallel, **kw)
        run.captures = tuple(found)
        run.unfinished += left_out  # said, as a capture that did not finish is
        return run
    return Run(list(sources), options, parallel, **kw)
