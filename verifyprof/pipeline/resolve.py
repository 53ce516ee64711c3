"""One resolution path for every command: what each input is, the manifest beside it, the steps
broken down and which group is the verify, and the model's starting point, resolved once and
before anything is printed or written.

``breakdown``, ``whatif``, ``compare`` and ``report`` all resolve their inputs here, so a
capture folder's manifest, ``--step`` and the verdict's step group mean the same in each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.taxonomy import compile_regex
from verifyprof.contracts import ranges
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.schema import BreakdownFrame, variant
from verifyprof.model.decision.whatif import Prepared, WhatifOptions, check_options, prepare
from verifyprof.model.inputs.profile import verify_profile
from verifyprof.trace.sources import is_breakdown_json

CYCLE_PARTS = ("spec_step", "draft", "accept", "draft_extend")  # never the verify


@dataclass(frozen=True)
class Input:
    """One input as the user named it: what it is and what comes with it."""

    spec: str
    kind: str  # "breakdown-json" | "capture-folder" | "trace"
    manifest: Path | None = None  # a capture folder's manifest.json


def identify(spec: str | Path) -> Input:
    """The one place that decides what an input is."""
    path = Path(str(spec))
    if is_breakdown_json(path):
        return Input(str(spec), "breakdown-json")
    found = path / "manifest.json"
    if path.is_dir() and found.is_file():
        return Input(str(spec), "capture-folder", found)
    return Input(str(spec), "trace")


@dataclass(frozen=True)
class Story:
    """The step group a run's verdict, headline table, charts and compare are about."""

    name: str
    variant: str
    mode: str
    why: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.name, self.variant, self.mode)


@dataclass
class Resolved:
    inputs: list[Input]
    frame: BreakdownFrame
    result: Breakdown | None  # None for a breakdown JSON
    options: WhatifOptions  # as resolved: manifest found, --step turned into a step name
    prepared: Prepared | None = None  # None: no accept length (``reasons`` says why)
    story: Story | None = None
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def step_regex(options: WhatifOptions) -> str | None:
    """The ranges broken down: ``--range`` as given, else the default plus the ranges of the
    ``--step`` phase (a user's own spelling of it), so that choosing the verify drops no draft."""
    if options.step_range is not None:
        return options.step_range
    if options.step in ranges.PHASES:
        return f"{ranges.DEFAULT_STEP_REGEX}|{ranges.phase_regex(options.step)}"
    return None


def chosen_step(frame: BreakdownFrame, step: str | None, where: str | None) -> str | None:
    """``--step PHASE`` -> the most frequent step name of that phase; a name as given."""
    if step is None:
        return None
    counts = frame.steps["name"].value_counts()
    if step not in ranges.PHASES:
        if step in counts.index:
            return step
        raise NoStepsError(
            f"--step {step}: no steps named {step!r} and no such phase (unknown step phase"
            f" {step!r}; phases: {', '.join(ranges.PHASES)}); the steps are:"
            f" {', '.join(map(str, counts.index[:8]))}",
            where,
        )
    if step in CYCLE_PARTS:
        raise VerifyprofError(
            f"--step {step}: whatif models the verify step of the speculative cycle (or, with"
            f" --step decode/prefill, a step in its place); the {step} steps are already in the"
            " cycle from their own ranges, and their fixes in the plan (e.g. cuda_graph_draft)"
        )
    names = [str(n) for n in counts.index if ranges.is_phase(str(n), step)]
    if not names:
        raise NoStepsError(
            f"no {step} steps (verifyprof, SGLang or user ranges); the steps are:"
            f" {', '.join(map(str, counts.index[:8]))}",
            where,
        )
    return names[0]


def story_of(frame: BreakdownFrame, options: WhatifOptions) -> Story | None:
    try:
        p = verify_profile(frame, step_name=options.step, width=options.width, mode=options.mode)
    except NoStepsError:
        return None
    return Story(p.verify.name, variant(p.verify.attrs), p.verify.mode, p.choice)


def resolve_frame(
    frame: BreakdownFrame,
    inputs: list[Input],
    options: WhatifOptions,
    result: Breakdown | None = None,
) -> Resolved:
    """The manifest, step, story and prepared state of a breakdown already made."""
    notes = []
    if options.manifest is None and len(inputs) == 1 and inputs[0].manifest is not None:
        options = replace(options, manifest=inputs[0].manifest)
        notes.append(f"manifest {inputs[0].manifest} found in the capture folder given")
    where = inputs[0].spec if inputs else None
    name = chosen_step(frame, options.step, where)
    if options.step in ranges.PHASES and name is not None:
        n = int((frame.steps["name"] == name).sum())
        notes.append(f"--step {options.step}: modelling the {n} steps named {name!r}")
    options = replace(options, step=name)
    out = Resolved(inputs, frame, result, options, story=story_of(frame, options), notes=notes)
    if out.story is None:  # no verify steps: a breakdown still has its tables, whatif says why
        names = sorted(frame.steps["name"].astype(str).unique().tolist())
        out.reasons.append(
            "breakdown has no verify steps (verifyprof, SGLang or user ranges) to model; it has:"
            f" {', '.join(names[:8])} (pick one with --step NAME)"
        )
        return out
    try:
        out.prepared = prepare(frame, options)
    except VerifyprofError as err:
        if "accept length unknown" not in err.problem:
            raise
        out.reasons.append(err.problem)
    return out


def check(options: WhatifOptions) -> None:
    """Every option, before any input is read or output written."""
    check_options(options)
    if options.step_range is not None:  # one line before any file is read, not one per file
        compile_regex(
            options.step_range,
            f"--range '{options.step_range:.80}' is not a valid regular expression",
        )
    if options.step is not None and options.step_range is not None and options.step in CYCLE_PARTS:
        raise VerifyprofError(f"--step {options.step}: not a verify step (see --step's help)")


def resolve_sources(
    specs: list[str],
    options: WhatifOptions,
    taxonomy: str | Path | None = None,
    parallel=None,  # ParallelOptions
    release: bool = True,
) -> Resolved:
    """Inputs read and broken down once (a breakdown JSON read back), then resolved."""
    from verifyprof.pipeline import reading

    check(options)
    inputs = [identify(spec) for spec in specs]
    if len(inputs) == 1 and inputs[0].kind == "breakdown-json":
        frame, result = reading.read_breakdown_json(Path(inputs[0].spec)), None
    else:
        result = reading.breakdown(
            specs if len(specs) > 1 else specs[0],
            step_regex=step_regex(options),
            taxonomy=taxonomy,
            whole_trace=options.whole_trace,
            release=release,
            parallel=parallel,
        )
        frame = result.frame()
    return resolve_frame(frame, inputs, options, result)


def ranking_of(resolved: Resolved):
    """The ranking of a resolved run (None without an accept length)."""
    from verifyprof.model.decision.candidates import rank_candidates
    from verifyprof.model.decision.whatif import load_of

    p = resolved.prepared
    if p is None:
        return None
    ranking = rank_candidates(p.profile, p.scenario, resolved.options.candidates or None)
    ranking.dilation, ranking.profiled_tps = p.dilation, p.profiled_tps
    ranking.unprofiled_tps = p.unprofiled_tps
    ranking.profile.notes.extend(resolved.notes)
    ranking.load, ranking.load_skipped = load_of(p.profile, p.scenario, resolved.options)
    return ranking


def verdict_text(resolved: Resolved) -> str | None:
    """The verdict under ``breakdown``'s tables: the ranking's when an accept length is known,
    else the step in words and why there is no plan; None without a verify group."""
    from verifyprof.model.decision.verdict import step_words

    ranking = ranking_of(resolved)
    if ranking is not None:
        return ranking.verdict.text()
    if resolved.story is None:
        return None
    profile = verify_profile(
        resolved.frame, step_name=resolved.options.step, width=resolved.options.width,
        mode=resolved.options.mode,
    )  # fmt: skip
    return step_words(profile) + (
        " Give an accept length (--accept-len or a capture manifest) for the plan of fixes."
    )
