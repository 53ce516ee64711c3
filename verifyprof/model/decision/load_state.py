"""The load curve of a ranked run: read at the state the verdict decides on (today's, or after
the plan's fixes where speculate-or-not flips there: one decision everywhere, issue 33), from the
captures' measured model (issue 32), or from one capture where only one was given."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest
from verifyprof.contracts.plumbing.text import counted
from verifyprof.model.cycle.parts import HOST_IDLE
from verifyprof.model.cycle.phase_fit import UnusableFit
from verifyprof.model.decision.candidates import Ranking, Scenario
from verifyprof.model.decision.capture_facts import stated_context
from verifyprof.model.decision.load import LoadCurve, load_curve
from verifyprof.model.decision.measure_commands import (
    BATCH_OPTIONS,
    CONTEXT_OPTIONS,
    again_source,
    program_template,
)
from verifyprof.model.decision.plain_numbers import DEFAULT_CONTEXT
from verifyprof.model.decision.plan import _with_cycle as with_cycle_of
from verifyprof.model.decision.server_flags import settings
from verifyprof.model.decision.speculate import plain_decoding
from verifyprof.model.decision.today import today_answer
from verifyprof.model.fixes import registry
from verifyprof.model.fixes.base import Skip, cycle_of, edited_group, take_idle
from verifyprof.model.fixes.measured import Capture, measured_from
from verifyprof.model.inputs.model_config import model_from_workload
from verifyprof.model.inputs.options import WhatifOptions
from verifyprof.model.inputs.profile import VerifyProfile

ASSUMED_CONTEXT = DEFAULT_CONTEXT  # what the rows rest on where no one says (marked assumed)
ONE_CAPTURE_CONTEXT = (
    f"context unknown: neither the capture (results, ctx= tag, capture --program-context) nor"
    f" you state it; rows marked assumed take {ASSUMED_CONTEXT:g} tokens: state it with whatif"
    " --capture-context N"
)
AFTER_PLAN = "the load curve after the plan's fixes"  # the note's start (the console reads it)


def with_load(ranking: Ranking, o: WhatifOptions, manifest: Manifest | None = None) -> Ranking:
    """The ranking with today's load curve (every capture given), and, where speculate-or-not
    flips after the plan's fixes, the curve after them beside it: each capture with the plan's
    fixes applied, so that it too rests on every capture."""
    ranking.load, ranking.load_skipped = load_of(ranking.profile, ranking.scenario, o, manifest)
    profile, s, fixes = decided_state(ranking)
    if not fixes:
        return ranking
    s = replace(s, measured=after_captures(ranking, s.measured))
    after, why = load_of(profile, s, o, manifest, measured=False)
    if after is not None:
        n = len(s.measured.captures) if s.measured is not None else 1
        after.notes.insert(
            0,
            f"{AFTER_PLAN} ({', '.join(fixes)}), from {counted(n, 'capture')} with those"
            " fixes applied: speculate or not flips between today and after them",
        )
    ranking.load_after, ranking.load_after_skipped = after, why
    return ranking


def decided_state(r: Ranking) -> tuple[VerifyProfile, Scenario, list[str]]:
    """The state after the plan's fixes where the verdict's answer flips there (speculating with
    the plan's fixes, plain decoding beside it with those of them that apply); today's, with no
    fixes, where it does not."""
    plain, plan = r.plain, [st for st in r.plan if st.candidate.name != registry.NO_SPECULATION]
    if plain is None or not plan or plain.spec_after_plan is None or plain.own_plan:
        return r.profile, r.scenario, []
    plain_after = plain.along_plan[len(plan) - 1]
    today = today_answer(plain, r.curve).speculate  # the verdict's answer today
    if (plain_after <= plain.spec_after_plan) == today:
        return r.profile, r.scenario, []
    profile, s = fixed(r.profile, r.scenario, plan, plain.after)
    return profile, s, [step.candidate.name for step in plan]


def fixed(
    profile: VerifyProfile, s: Scenario, plan: list[Any], plain_after: tuple | None
) -> tuple[VerifyProfile, Scenario]:
    """``profile`` and ``s`` with the plan's fixes (each step's candidate state), plain
    decoding's step set to ``plain_after``'s (plain decoding with the fixes that apply)."""
    for step in plan:
        profile = step.candidate.profile or profile
        s = step.candidate.scenario or with_cycle_of(s, step.candidate.cycle)
    if plain_after is None:
        return profile, s
    plain_profile, plain_s = plain_after
    step_ms = cycle_of(plain_profile, plain_s).cycle_ms  # plain decoding with the fixes
    group = plain_profile.verify  # its host time set so that its cost is the re-timed step
    delta = step_ms - group.wall_ms
    decode = edited_group(
        group, {"host_wait": delta} if delta >= 0 else take_idle(group, -delta, HOST_IDLE)
    )
    profile = replace(profile, decode_group=decode)
    s = replace(s, decode_ms=None if s.decode_ms is None else step_ms, measured=None)
    return profile, s


def after_captures(r: Ranking, measured: Any) -> Any:
    """Every capture of today's model with the plan's fixes applied (each fix as it applies to
    that capture's own state: one that does not apply there is left out for it), as one model of
    predicted states; None with one capture (the load curve then models today's state alone)."""
    today = r.scenario.measured
    if today is None or len(today.captures) < 2:
        return None
    names = [st.candidate.name for st in r.plan if st.candidate.name != registry.NO_SPECULATION]
    builders = dict(registry.builders())
    out = []
    for c in today.captures:
        profile, s = c.profile, replace(c.scenario, measured=None)
        now = cycle_of(profile, s)
        for name in names:
            try:
                cand = builders[name](profile, s, now)
            except Skip:
                continue
            profile = cand.profile or profile
            s = cand.scenario or with_cycle_of(s, cand.cycle)
            now = cand.cycle
        plain = plain_decoding(c.profile, replace(c.scenario, measured=None), now, [], builders)
        track = _plain_track(plain, names, builders) if plain is not None else None
        profile, s = fixed(profile, s, [], track)
        out.append(replace(c, profile=profile, scenario=s, predicted=True))
    try:
        return measured_from(out)
    except UnusableFit:
        return None


def _plain_track(plain: Any, names: list[str], builders: dict) -> tuple | None:
    """Plain decoding's state with the plan's fixes that apply to a decode step."""
    if plain.after is None:
        return None
    state, plain_s = plain.after
    for name in names:
        if name in registry.speculative_only() or name not in builders:
            continue
        try:
            applied = builders[name](state, plain_s, cycle_of(state, plain_s))
        except Skip:
            continue
        state, plain_s = applied.profile or state, applied.scenario or plain_s
    return state, plain_s


def load_of(
    profile: VerifyProfile,
    s: Scenario,
    o: WhatifOptions,
    manifest: Manifest | None = None,
    measured: bool = True,
) -> tuple[LoadCurve | None, str | None]:
    """The load curve of a prepared run, or None and why not. The model config is the option's,
    else a workload capture's (its manifest's summary); today's context the scenario's, else the
    capture's ``--context`` or what its program reported, else the first ``--context`` asked
    (``manifest``: as prepare read it; the model opens no file). ``measured``: False for a
    predicted state (after the plan's fixes), whose own point is no measurement."""
    if s.unfitted is not None:  # the captures' fit is unusable: no curve from fewer of them
        return None, f"no load curve: {s.unfitted}"
    run = _workload_config(manifest)
    model = s.model
    if model is None and run.get("target"):
        dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(
            str(run.get("dtype")), "bf16"
        )
        try:  # a summary that mangles its config costs the load curve, not the answer
            model = model_from_workload(run["target"], Path(str(o.manifest)), dtype)
        except VerifyprofError as err:
            return None, f"no load curve: {err}"
    label = Path(o.source).name if o.source else ""
    context = (
        s.context
        or float((run.get("run") or {}).get("context") or 0.0)
        or (stated_context(manifest, None, label, (), o.capture_contexts)[0] or 0.0)
    )
    # no one states it (never the load curve's --context, issue 41): the rows rest on an
    # assumed context, marked so, and the screen says how to state it
    assumed = s.context_assumed or (None if context else ONE_CAPTURE_CONTEXT)
    context = context or ASSUMED_CONTEXT  # never 0: a flat curve that no server runs
    from_summary = model is not s.model
    program = s.program_template or program_template(
        manifest, BATCH_OPTIONS | _declared(o, "batch"), CONTEXT_OPTIONS | _declared(o, "context")
    )
    source = s.program_source if s.program_template else again_source(manifest)
    s = replace(s, model=model, context=context, program_template=program, program_source=source)
    k = s.num_draft or ((profile.width - 1) if profile.width else 0)
    if s.measured is None and k:  # one capture (or a predicted state): a model of one point
        label = "this capture" if measured else "the state after the plan"
        one = Capture(label, profile, s, s.batch, context, k, predicted=not measured)
        try:  # a step that makes no fit costs the load curve, not the answer
            s.measured = measured_from([one])
        except UnusableFit as err:  # named by its file: the label says only "this capture"
            return None, f"no load curve: {VerifyprofError(err.problem, o.source)}"
    try:
        load = load_curve(profile, s, o.batches, o.contexts)
    except Skip as why:
        return None, str(why)
    if assumed:
        load.assume_context(assumed)
    vllm = "vllm" in f"{profile.source} {profile.verify.name}".lower()
    load.server = settings(load, vllm)
    if from_summary:
        load.notes.insert(0, f"model config from the capture's workload summary: {model.name}")
    if assumed:
        load.notes.insert(0, assumed)
    return load, None


def _declared(o: WhatifOptions, axis: str) -> frozenset[str]:
    return frozenset(n for n, a in o.load_options if a == axis)


def _workload_config(manifest: Manifest | None) -> dict:
    """A workload run's config (its summary is the manifest's raw record, or nested in it)."""
    raw = manifest.raw if manifest is not None else {}
    summary = raw.get("workload_summary", raw)
    config = summary.get("config") if isinstance(summary, dict) else None
    return config if isinstance(config, dict) else {}
