"""Several captures of one program, one model (issue 32): ``whatif CAP1 CAP2 ...``.

Each capture is prepared on its own (its verify, its cycle, its accept length); this module says
where each was taken (batch, context, draft count), refuses captures that are not of one
program, hardware, model and execution mode (naming what differs), pools the verify widths that
captures at one batch and context measured, and hands the first capture's scenario the
:class:`~verifyprof.model.fixes.measured.Measured` model made from all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest
from verifyprof.model.cycle.fit_checks import UnusableFit
from verifyprof.model.decision.capture_facts import (
    as_int,
    option_of,
    program_context,
    results_of,
    target_of,
)
from verifyprof.model.decision.plain_numbers import DEFAULT_CONTEXT
from verifyprof.model.decision.whatif import Prepared
from verifyprof.model.fixes.measured import Capture, Measured, measured_from

# a program's options that set its load, not what it runs: captures may differ in these
LOAD_OPTIONS = frozenset(
    {
        "--batch",
        "--batch-size",
        "--bs",
        "--context",
        "--ctx",
        "--num-draft",
        "--num-draft-tokens",
        "--speculative-num-steps",
        "--speculative-num-draft-tokens",
        "--steps",
        "--warmup",
        "--rounds",
        "--out",
        "--output",
        "--seed",
        "--sweep-widths",
        "--sweep-steps",
        "--concurrency",
        "--requests",
    }
)


@dataclass(frozen=True)
class Identity:
    """What must be the same in every capture of one model."""

    program: str
    settings: tuple[str, ...]
    hardware: str
    mode: str


def identity(prepared: Prepared, manifest: Manifest | None, gpu: str) -> Identity:
    target = target_of(manifest)
    program = next((a for a in target if not Path(a).name.startswith("python")), "")
    settings = []
    skip = False
    for arg in target[target.index(program) + 1 :] if program in target else []:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in LOAD_OPTIONS:
            skip = "=" not in arg
            continue
        settings.append(arg)
    s = prepared.scenario
    hw = s.hardware.name if s.hardware is not None else gpu
    return Identity(Path(program).name, tuple(settings), hw, prepared.profile.verify.mode)


def where_taken(prepared: Prepared, manifest: Manifest | None) -> tuple[int, float, int, str]:
    """(batch, context, drafts, how the context was found) of one capture: the batch from the
    trace's tags, then what the program reported, then its command line; the context from what
    the program reported or ran with, then the trace's tags or --context, then a stated
    default."""
    s, res, target = prepared.scenario, results_of(manifest), target_of(manifest)
    batch = (
        prepared.profile.batch or as_int(res.get("batch")) or as_int(option_of(target, "--batch"))
    )
    context, how = program_context(manifest), ""
    if context:
        how = "the capture's program"  # what it ran at, before an option that names one for all
    elif s.context:
        context, how = s.context, "the trace or --context"
    else:
        context, how = DEFAULT_CONTEXT, f"a stated default ({DEFAULT_CONTEXT:g}: give --context)"
    k = s.num_draft or as_int(res.get("num_draft")) or 0
    return int(batch or s.batch or 1), float(context), int(k), how


def one_model(
    runs: list[tuple[str, Prepared, Manifest | None, str]],
) -> Prepared:
    """The first capture's prepared state with the model of all of them (``runs``: label,
    prepared, manifest, GPU name); captures of another program, hardware, model or execution
    mode are refused naming what differs."""
    first_label, first, first_manifest, gpu = runs[0]
    ident = identity(first, first_manifest, gpu)
    captures = []
    for label, prepared, manifest, gpu_name in runs:
        other = identity(prepared, manifest, gpu_name)
        if other != ident:
            raise VerifyprofError(_differs(ident, other, first_label), label)
        batch, context, k, _ = where_taken(prepared, manifest)
        # a context that is not a number is the fit's to refuse (the load curve), as with one
        # capture: today's state keeps its own
        ctx = context if math.isfinite(context) else prepared.scenario.context
        s = replace(prepared.scenario, batch=batch, context=ctx)
        captures.append(Capture(label, prepared.profile, s, batch, context, k))
    seen = {c.key for c in captures}
    if len(seen) < len(captures):
        raise VerifyprofError(
            "two captures at the same batch, context and draft count: give one of each", None
        )
    captures = _pooled_widths(captures)
    head = captures[0]
    try:
        measured: Measured = measured_from(captures)
    except UnusableFit as err:  # costs what rests on the fit (the load curve), not the answer
        scenario = replace(head.scenario, unfitted=_unfitted(err, head.label))
        scenario.notes = [*scenario.notes, *_apart(runs)]
        return replace(first, profile=head.profile, scenario=scenario)
    scenario = replace(head.scenario, measured=measured)
    scenario.notes = [*scenario.notes, *measured.notes(), *_apart(runs)]
    return replace(first, profile=head.profile, scenario=scenario)


def _unfitted(err: UnusableFit, today: str) -> str:
    """Why several captures made no model, and what would: the answer is today's capture's
    alone; the capture the fit's refusal names, recaptured or left out, gives the model back."""
    fix = f": recapture {err.capture} or leave it out" if err.capture else ""
    return f"{err.problem}; the rest of the answer is from {today} alone{fix}"


def _apart(runs: list[tuple[str, Prepared, Manifest | None, str]]) -> list[str]:
    """A note where the captures were taken on different GPUs (bus id) or over 20 minutes apart
    (``capture --batches`` takes its captures back to back): one fit then joins runs whose host
    speed differs by a few percent (the same recipe on three H200 leases: 9.1% to 10.5% worst
    error; bench/README)."""
    when, where = [], set()
    for label, _, manifest, _ in runs:
        raw = manifest.raw if manifest is not None and isinstance(manifest.raw, dict) else {}
        started = raw.get("started_at")
        if isinstance(started, str):
            try:
                when.append((datetime.fromisoformat(started), label))
            except ValueError:
                pass
        gpus = (
            (raw.get("versions") or {}).get("gpus")
            if isinstance(raw.get("versions"), dict)
            else None
        )
        if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict):
            where.add(str(gpus[0].get("pci_bus_id")))
    notes = []
    if len(where) > 1:
        notes.append(
            f"the captures ran on {len(where)} different GPUs (bus ids): one fit joins hosts"
            " whose speed differs by a few percent"
        )
    if len(when) > 1:
        (first, a), (last, b) = min(when), max(when)
        minutes = (last - first).total_seconds() / 60
        if minutes > 20:
            notes.append(
                f"the captures were taken {minutes:.0f} min apart ({a} to {b}): one fit joins runs"
                " whose host speed may differ by a few percent; captures of one session agree best"
            )
    return notes


def _differs(a: Identity, b: Identity, first: str) -> str:
    for field, words in (
        ("program", "program"),
        ("hardware", "hardware"),
        ("mode", "execution mode of the verify"),
        ("settings", "model or settings"),
    ):
        x, y = getattr(a, field), getattr(b, field)
        if x != y:
            show = (lambda v: " ".join(v) or "(none)") if field == "settings" else str
            return f"not a capture of the same {words} as {first}: {show(y)} against {show(x)}"
    return "not a capture of the same program"


def _pooled_widths(captures: list[Capture]) -> list[Capture]:
    """Each capture's verify widths with those other captures at its batch and context measured
    (a k = 1 capture's width-2 verify is a point of the k = 4 capture's width model)."""
    out = []
    for c in captures:
        widths = dict(c.profile.width_times)
        for o in captures:
            if o is c or (o.batch, o.context) != (c.batch, c.context):
                continue
            w = o.profile.width or o.num_draft + 1
            widths.setdefault(w, o.profile.verify.wall_ms)
        own = c.profile.width or c.num_draft + 1
        if len(widths) > len(c.profile.width_times):
            widths.setdefault(own, c.profile.verify.wall_ms)
        out.append(replace(c, profile=replace(c.profile, width_times=widths)))
    return out
