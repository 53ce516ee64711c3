"""The load curve of a ranked run: read at the state the verdict decides on (today's, or after
the plan's fixes where speculate-or-not flips there: one decision everywhere, issue 33), from the
captures' measured model (issue 32), or from one capture where only one was given."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest
from verifyprof.model.cycle.parts import HOST_IDLE
from verifyprof.model.cycle.phase_fit import UnusableFit
from verifyprof.model.decision.candidates import Ranking, Scenario
from verifyprof.model.decision.capture_facts import stated_context
from verifyprof.model.decision.load import LoadCurve, load_curve
from verifyprof.model.decision.plain_numbers import DEFAULT_CONTEXT
from verifyprof.model.decision.plan import _with_cycle as with_cycle_of
from verifyprof.model.decision.server_flags import settings
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
    """The ranking with its load curve, read at the state the verdict decides on."""
    profile, s, fixes = decided_state(ranking)
    ranking.load, ranking.load_skipped = load_of(profile, s, o, manifest, measured=not fixes)
    if ranking.load is not None and fixes:
        ranking.load.notes.insert(
            0,
            f"{AFTER_PLAN} ({', '.join(fixes)}), where the verdict"
            " decides: speculate or not flips between today and after them",
        )
    return ranking


def decided_state(r: Ranking) -> tuple[VerifyProfile, Scenario, list[str]]:
    """The state the load curve and the server settings are read at: today's, or where the
    verdict's answer flips after the plan, speculating with the plan's fixes (and plain decoding
    beside it with those of them that apply), so that one decision holds everywhere."""
    plain, plan = r.plain, [st for st in r.plan if st.candidate.name != "no_speculation"]
    if plain is None or not plan or plain.spec_after_plan is None or plain.own_plan:
        return r.profile, r.scenario, []
    plain_after = plain.along_plan[len(plan) - 1]
    if (plain_after > plain.spec_after_plan) == plain.speculation_loses:
        return r.profile, r.scenario, []
    profile, s = r.profile, r.scenario
    for step in plan:
        profile = step.candidate.profile or profile
        s = step.candidate.scenario or with_cycle_of(s, step.candidate.cycle)
    plain_profile, plain_s = plain.after
    step = cycle_of(plain_profile, plain_s).cycle_ms  # plain decoding with the fixes, as re-timed
    group = plain_profile.verify  # its host time set so that its cost is the re-timed step
    delta = step - group.wall_ms
    decode = edited_group(
        group, {"host_wait": delta} if delta >= 0 else take_idle(group, -delta, HOST_IDLE)
    )
    profile = replace(profile, decode_group=decode)
    s = replace(s, decode_ms=None if r.scenario.decode_ms is None else step, measured=None)
    return profile, s, [step.candidate.name for step in plan]


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
    s = replace(s, model=model, context=context)
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


def _workload_config(manifest: Manifest | None) -> dict:
    """A workload run's config (its summary is the manifest's raw record, or nested in it)."""
    raw = manifest.raw if manifest is not None else {}
    summary = raw.get("workload_summary", raw)
    config = summary.get("config") if isinstance(summary, dict) else None
    return config if isinstance(config, dict) else {}
