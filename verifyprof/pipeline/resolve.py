"""One resolution path for every command: what each input is, the manifest beside it, the steps
broken down and which group is the verify, and the model's starting point, resolved once and
before anything is printed or written.

``breakdown``, ``whatif``, ``compare`` and ``report`` all resolve their inputs here, so a
capture folder's manifest, ``--step`` and the verdict's step group mean the same in each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifyprof.contracts import ranges
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.schema import BreakdownFrame, variant
from verifyprof.model.inputs.options import WhatifOptions
from verifyprof.model.inputs.profile import VerifyProfile, verify_profile
from verifyprof.pipeline.option_checks import (  # noqa: F401 - CYCLE_PARTS, check re-exported
    CYCLE_PARTS,
    check,
    check_one_token,
)
from verifyprof.trace.path_checks import kept_breakdown
from verifyprof.trace.sources import is_breakdown_json

if TYPE_CHECKING:  # a breakdown is made by reading, the model's state by the runs that
    # prepare it (not breakdown's): resolving needs only their types
    from verifyprof.attribution.breakdown import Breakdown
    from verifyprof.model.decision.whatif import Prepared


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
        kept = kept_breakdown(path)  # a capture kept as its breakdown (bench/results)
        if kept is not None:
            return Input(str(kept), "breakdown-json", found)
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
class Profiles:
    """The verify profiles of one frame, each made once: every section that needs the modelled
    group's profile (the story, the model's state, the verdict's scope) asks here."""

    frame: BreakdownFrame
    made: dict[tuple, VerifyProfile | NoStepsError] = field(default_factory=dict)

    def get(self, step: str | None, width: int | None, mode: str | None) -> VerifyProfile:
        """:func:`~verifyprof.model.inputs.profile.verify_profile` (raising as it does)."""
        key = (step, width, mode)
        if key not in self.made:
            try:
                self.made[key] = verify_profile(self.frame, step_name=step, width=width, mode=mode)
            except NoStepsError as err:
                self.made[key] = err
        found = self.made[key]
        if isinstance(found, NoStepsError):
            raise found
        return found

    def of(self, options: WhatifOptions) -> VerifyProfile:
        return self.get(options.step, options.width, options.mode)


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
    manifest: dict | None = None  # the manifest's JSON, read once
    profiles: Profiles | None = None
    picked: str | None = None  # why the verify's mode is the one modelled (the manifest's run)

    def profile(self) -> VerifyProfile:
        """The modelled group's profile (as the model prepares it)."""
        return (self.profiles or Profiles(self.frame)).of(self.options)


def step_regex(options: WhatifOptions) -> str | None:
    """The ranges broken down: ``--range`` as given, else the default plus the ranges of the
    ``--step`` phase (a user's own spelling of it), so that choosing the verify drops no draft."""
    if options.step_range is not None:
        return options.step_range
    if options.step in ranges.PHASES:
        return f"{ranges.DEFAULT_STEP_REGEX}|{ranges.phase_regex(options.step)}"
    return None


def chosen_step(
    frame: BreakdownFrame, step: str | None, where: str | None, parts: bool = False
) -> str | None:
    """``--step PHASE`` -> the most frequent step name of that phase; a name as given.
    ``parts``: a part of the cycle (draft, accept, ...) may be chosen too (breakdown, kernels:
    commands that show a group, where whatif models the verify)."""
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
    if step in CYCLE_PARTS and not parts:
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


def story_of(
    frame: BreakdownFrame, options: WhatifOptions, profiles: Profiles | None = None
) -> Story | None:
    try:
        p = (profiles or Profiles(frame)).of(options)
    except NoStepsError:
        return None
    return Story(p.verify.name, variant(p.verify.attrs), p.verify.mode, p.choice)


def resolve_frame(
    frame: BreakdownFrame,
    inputs: list[Input],
    options: WhatifOptions,
    result: Breakdown | None = None,
    parts: bool = False,
    manifest: dict | None = None,
    model: bool = True,
    profiles: Profiles | None = None,
) -> Resolved:
    """The manifest, step, story and (``model``) prepared state of a breakdown already made.
    ``parts``: ``--step draft`` (a part of the cycle) makes that part's group the story, the
    verdict still about the verify (breakdown, kernels). ``manifest``: its JSON, when read
    already; else read here, once. ``profiles``: the run's, when it has made some already. A
    decode or prefill step in the verify's place makes one token a step, for whatif and compare's
    prediction check alike."""
    from verifyprof.contracts.manifest import manifest_json

    notes = []
    if options.manifest is None and len(inputs) == 1 and inputs[0].manifest is not None:
        options = replace(options, manifest=inputs[0].manifest)
        notes.append(f"manifest {inputs[0].manifest} found in the capture folder given")
    if manifest is None and options.manifest is not None:
        manifest = manifest_json(options.manifest)
    profiles = profiles or Profiles(frame)
    where = inputs[0].spec if inputs else None
    name = chosen_step(frame, options.step, where, parts)
    part = parts and options.step in CYCLE_PARTS
    if options.step in ranges.PHASES and name is not None:
        n = int((frame.steps["name"] == name).sum())
        what = "showing" if part else "modelling"
        notes.append(f"--step {options.step}: {what} the {n} steps named {name!r}")
    picked = None  # why the verify's mode is the one modelled, when the manifest picked it
    if options.mode is None and options.manifest is not None:
        options, picked = _manifest_mode(frame, options, notes, None if part else name, manifest)
    story = story_of(frame, replace(options, step=name), profiles)
    if story is None and (options.width is not None or options.mode is not None):
        check_picked(frame, name, options.width, options.mode)  # none has them: one line
    if story is not None and picked:
        story = replace(story, why=mode_why(story.why, picked))
    options = replace(options, step=None if part else name)  # the model's: the verify
    if name is not None and ranges.phase_of(name) in ("decode", "prefill"):
        options = _one_token_steps(options, name, notes)
    out = Resolved(inputs, frame, result, options, story=story, notes=notes)
    out.manifest, out.profiles, out.picked = manifest, profiles, picked
    if part:
        notes.append("the verdict stays about the verify steps (its plan covers the whole cycle)")
    if (story_of(frame, options, profiles) if part else story) is None:
        # no verify steps: a breakdown still has its tables, whatif says why
        names = sorted(frame.steps["name"].astype(str).unique().tolist())
        out.reasons.append(
            "breakdown has no verify steps (verifyprof, SGLang or user ranges) to model; it has:"
            f" {', '.join(names[:8])} (pick one with --step NAME)"
        )
        return out
    if model:
        prepare_resolved(out)
    return out


def prepare_resolved(out: Resolved) -> None:
    """The model's state of a resolved run with a verify group (its files resolved here, the
    profile the story's), or the reason it has none (no accept length)."""
    from verifyprof.model.decision.whatif import prepare  # the model: only runs that prepare it
    from verifyprof.pipeline.model_files import given_for

    frame, options = out.frame, out.options
    try:
        given = given_for(frame, options, out.profile(), out.manifest)
        out.prepared = prepare(frame, options, given)
        if out.picked:
            profile = out.prepared.profile
            out.prepared.profile = replace(profile, choice=mode_why(profile.choice, out.picked))
    except VerifyprofError as err:
        if "accept length unknown" not in err.problem:
            raise
        out.reasons.append(err.problem)


def _manifest_mode(
    frame: BreakdownFrame,
    options: WhatifOptions,
    notes: list[str],
    step: str | None,
    data: dict | None = None,
) -> tuple[WhatifOptions, str | None]:
    """The options with the manifest's mode (and the note why), or as they were."""
    mode, note = manifest_mode(frame, step, options.manifest, data)
    notes += [note] if note else []
    return (replace(options, mode=mode), note) if mode else (options, None)


def mode_why(choice: str, picked: str) -> str:
    """The modelled group's words with why its mode is the one modelled (the manifest's run):
    never 'the trace's only verify group' when other modes' verify steps are beside it."""
    what, _, why = choice.partition(": ")
    if not why or why == "the trace's only verify group":
        return f"{what}: {picked}"
    return f"{choice}; {picked}"


STEP_MODES = ("eager", "graph")  # a program's own mode names (seed, compile) say nothing of these


def manifest_mode(
    frame: BreakdownFrame, step: str | None, manifest: Path | None, data: dict | None = None
) -> tuple[str | None, str | None]:
    """Verify steps in several modes and no --mode: the mode of the run whose rate the manifest
    measured (its accept length and dilation are that run's), or a note that its rate is of a
    mode these steps are not. (mode to model or None, note or None)"""
    from verifyprof.contracts.manifest import run_results

    results = run_results(manifest, data) if manifest is not None else {}
    run_mode, rate = results.get("mode"), results.get("tokens_per_s")
    if not isinstance(run_mode, str) or not isinstance(rate, (int, float)):
        return None, None
    names = frame.steps["name"].astype(str)
    verify = names == step if step else names.map(_verify_name)
    modes = sorted(frame.steps.loc[verify & (frame.steps["device"] >= 0), "mode"].unique())
    if len(modes) > 1 and run_mode in modes:
        return run_mode, (
            f"verify steps run in modes {modes}: modelling {run_mode}, the mode of the run the"
            f" manifest measured ({rate:,.1f} tok/s; pick another with --mode)"
        )
    if modes and run_mode not in modes and run_mode in STEP_MODES:
        return None, (
            f"the manifest's rate ({rate:,.1f} tok/s) is of its {run_mode} run, and these verify"
            f" steps run {', '.join(modes)}: that rate is not used"
        )
    return None, None


def _verify_name(name: str) -> bool:
    return ranges.is_phase(name, "verify")


def _one_token_steps(options: WhatifOptions, name: str, notes: list[str]) -> WhatifOptions:
    """A decode or prefill step in the verify's place makes one token a step: accept length 1
    (a speculative accept length there is an impossible combination: refused)."""
    check_one_token(name, ranges.phase_of(name), options.accept_len)
    notes.append(
        f"{name} steps make one token each: accept length 1 (plain decoding's step), the"
        " manifest's speculative accept length not used"
    )
    return replace(options, accept_len=1.0, alpha=None, survival=None, num_draft=None)


def story_group(frame: BreakdownFrame, summary: dict[str, Any]) -> tuple[tuple[str, str], str]:
    """The step group a run is about where it has no verify group the model can pick: the verify
    group the model picks (and why), else the summary's first group."""
    try:
        profile = verify_profile(frame)
        return (profile.verify.name, variant(profile.verify.attrs)), profile.choice
    except VerifyprofError:
        groups = summary.get("groups") or []
        if not groups:
            return ("", ""), "no steps"
        return (groups[0]["name"], groups[0]["variant"]), "the summary's first group (no verify)"


def check_picked(frame: BreakdownFrame, step: str | None, width: int | None, mode: str | None):
    """``--width`` / ``--mode`` given and no group has them: the model's one line naming the widths
    and modes there are (as whatif refuses them), never another group shown in silence."""
    if width is None and mode is None:
        return
    try:
        verify_profile(frame, step_name=step, width=width, mode=mode)
    except NoStepsError as err:
        if step is None or ranges.is_phase(step, "verify"):
            raise
        # the model words it for the verify; these are another phase's steps (--step draft)
        problem = err.problem.replace("no verify steps", f"no {step!r} steps", 1)
        problem = problem.replace("(the breakdown has", f"(the {step!r} steps have", 1)
        raise NoStepsError(problem, err.path) from None
