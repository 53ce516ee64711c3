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

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import Manifest
from verifyprof.model.cycle.fit_checks import UnusableFit
from verifyprof.model.decision.capture_facts import (
    as_int,
    load_axis,
    option_of,
    results_of,
    stated_context,
    target_of,
)
from verifyprof.model.decision.capture_identity import NOT_LOAD, command_of, load_differences
from verifyprof.model.decision.load_state import ASSUMED_CONTEXT
from verifyprof.model.decision.measure_commands import (
    BATCH_OPTIONS,
    CONTEXT_OPTIONS,
    again_source,
    program_template,
)
from verifyprof.model.decision.whatif import Prepared, WhatifOptions, _attr_float
from verifyprof.model.fixes.measured import Capture, Measured, measured_from


@dataclass(frozen=True)
class Where:
    """Where one capture was taken (batch, context, draft count) and who says each."""

    batch: int
    context: float | None  # None: no one says
    num_draft: int
    sources: dict[str, str]

    def words(self, label: str) -> str:
        ctx = "unknown" if self.context is None else f"{self.context:g}"
        return (
            f"{label}: batch {self.batch} ({self.sources['batch']}), context {ctx}"
            f" ({self.sources['context']}), k = {self.num_draft} ({self.sources['num_draft']})"
        )


def where_taken(
    prepared: Prepared,
    manifest: Manifest | None,
    label: str = "",
    found: dict[str, str | None] | None = None,
    o: WhatifOptions | None = None,
) -> Where:
    """Where a capture was taken: the batch from the trace's ``bs=`` tags, its results, the
    capture's load record, then its command's load options (``found``: the options it differs
    from today's in, as load); the draft count from the verify (its width, the accept length's
    source), its results or load record; the context as
    :func:`~verifyprof.model.decision.capture_facts.stated_context` finds it (never a default
    nor the load curve's ``--context``)."""
    o = o or WhatifOptions()
    s, res, target = prepared.scenario, results_of(manifest), target_of(manifest)
    load_options = [
        (n, a) for n, a in [*(found or {}).items(), *o.load_options] if a and a != NOT_LOAD
    ]
    by_axis = dict((axis, name) for name, axis in load_options)
    batch, b_from = _first(
        (prepared.profile.batch, "the trace's bs= tags"),
        (as_int(res.get("batch")), "its results"),
        *_axis(manifest, "batch"),
        (_option(target, by_axis.get("batch")), f"its command's {by_axis.get('batch')}"),
        (as_int(option_of(target, "--batch")), "its command's --batch"),
        (s.batch or 1, "not stated: taken as 1"),
    )
    width = prepared.profile.width
    k_said = (
        f"the verify's width {width}"
        if width and s.num_draft == width - 1
        else ("its results" if s.num_draft == as_int(res.get("num_draft")) else "the accept length")
    )
    k, k_from = _first(
        (s.num_draft, k_said),
        (as_int(res.get("num_draft")), "its results"),
        *_axis(manifest, "num_draft"),
        (_option(target, by_axis.get("num_draft")), f"its command's {by_axis.get('num_draft')}"),
        (0, "not stated: none"),
    )
    context, c_from = stated_context(
        manifest,
        _attr_float(prepared.profile, "ctx", "context"),
        label,
        tuple((n, a) for n, a in load_options if a == "context"),
        o.capture_contexts,
    )
    sources = {"batch": b_from, "num_draft": k_from, "context": c_from}
    return Where(int(batch), context, int(k), sources)


def _axis(manifest: Manifest | None, axis: str) -> list[tuple[int | None, str]]:
    got = load_axis(manifest, axis)
    return [(int(got[0]), got[1])] if got is not None and math.isfinite(got[0]) else []


def _option(target: list[str], name: str | None) -> int | None:
    return as_int(option_of(target, name)) if name and not name.startswith("argument") else None


def _first(*candidates: tuple[int | None, str]) -> tuple[int, str]:
    return next((v, how) for v, how in candidates if v is not None)


def one_model(
    runs: list[tuple[str, Prepared, Manifest | None, str]],
    o: WhatifOptions | None = None,
) -> Prepared:
    """The first capture's prepared state with the model of all of them (``runs``: label,
    prepared, manifest, GPU name); captures of another program, hardware, model or execution
    mode are refused naming what differs (:mod:`~verifyprof.model.decision.capture_identity`)."""
    o = o or WhatifOptions()
    _labels_named(o, [label for label, *_ in runs])
    first_label, first, first_manifest, gpu = runs[0]
    head = _command(first_label, first, first_manifest)
    ident = _identity(first, gpu)
    wheres, found_all, same_files = [], dict(o.load_options), {}
    for label, prepared, manifest, gpu_name in runs:
        command = _command(label, prepared, manifest)
        if command.program != head.program:  # another program: said before what else differs
            load_differences(head, command)
        other = _identity(prepared, gpu_name)
        if other != ident:
            raise VerifyprofError(_differs(ident, other, first_label), label)
        same: list[str] = []
        found = load_differences(head, command, o.load_options, same)
        found_all |= {n: a for n, a in found.items() if a}
        same_files |= dict.fromkeys(same)
        wheres.append(where_taken(prepared, manifest, label, found, o))
    assumed = _context_assumption(runs, wheres)
    captures = []
    for (label, prepared, _, _), w in zip(runs, wheres):
        context = ASSUMED_CONTEXT if w.context is None else w.context
        # a context that is not a number is the fit's to refuse (the load curve), as with one
        # capture: today's state keeps its own
        ctx = context if math.isfinite(context) else prepared.scenario.context
        s = replace(prepared.scenario, batch=w.batch, context=ctx, context_assumed=assumed)
        captures.append(
            Capture(label, prepared.profile, s, w.batch, context, w.num_draft, False, bool(assumed))
        )
    _refuse_same_point(captures, wheres)
    captures = _pooled_widths(captures)
    lead = captures[0]
    where_notes = [w.words(c.label) for c, w in zip(captures, wheres)]
    if same_files:
        where_notes.append(
            f"{', '.join(same_files)}: another path in some captures to a file of the same"
            " contents (its fingerprint, sha256): taken as one input"
        )
    try:
        measured: Measured = measured_from(captures)
    except UnusableFit as err:  # costs what rests on the fit (the load curve), not the answer
        scenario = replace(lead.scenario, unfitted=_unfitted(err, lead.label))
        scenario.notes = [*scenario.notes, *_apart(runs)]  # the answer is today's alone
        return replace(first, profile=lead.profile, scenario=scenario)
    program = program_template(
        first_manifest,
        BATCH_OPTIONS | {n for n, a in found_all.items() if a == "batch"},
        CONTEXT_OPTIONS | {n for n, a in found_all.items() if a == "context"},
    )
    scenario = replace(
        lead.scenario,
        measured=measured,
        program_template=program,
        program_source=again_source(first_manifest),
    )
    scenario.notes = [*scenario.notes, *measured.notes(), *where_notes, *_apart(runs)]
    return replace(first, profile=lead.profile, scenario=scenario)


def _labels_named(o: WhatifOptions, labels: list[str]) -> None:
    """A ``--capture-context LABEL=N`` whose label names no capture is refused (it would leave
    that context unstated without a word)."""
    for label, value in o.capture_contexts:
        if label is not None and label not in labels:
            raise VerifyprofError(
                f"--capture-context {label}={value:g}: no capture is called {label!r};"
                f" the captures are {', '.join(labels)}"
            )


def _command(label: str, prepared: Prepared, manifest: Manifest | None):
    return command_of(label, manifest, prepared.profile.batch, prepared.profile.width)


def _identity(prepared: Prepared, gpu: str) -> tuple[str, str]:
    """What must be the same in every capture besides the program: hardware, verify mode."""
    s = prepared.scenario
    return (s.hardware.name if s.hardware is not None else gpu, prepared.profile.verify.mode)


def _context_assumption(runs, wheres: list[Where]) -> str | None:
    """None where every capture states its context; the assumption's words where none does;
    refused where some do and some do not (the missing one named, and how to state it)."""
    unknown = [r[0] for r, w in zip(runs, wheres) if w.context is None]
    if not unknown:
        return None
    if len(unknown) < len(runs):
        label, w = next((r[0], w) for r, w in zip(runs, wheres) if w.context is not None)
        raise VerifyprofError(
            f"context unknown (no results, ctx= tag, {{context}} or declaration says it), beside"
            f" {label} at context {w.context:g} ({w.sources['context']}): state it: whatif"
            f" --capture-context {unknown[0]}=N",
            unknown[0],
        )
    return (
        f"context unknown: no capture states it (results, ctx= tag, capture --contexts or"
        f" --program-context); rows marked assumed take {ASSUMED_CONTEXT:g} tokens: state it"
        " with whatif --capture-context N"
    )


def _refuse_same_point(captures: list[Capture], wheres: list[Where]) -> None:
    """Two captures at one batch, context and draft count: the two named; where neither states
    its context, the missing fact asked for instead."""
    seen: dict[tuple, int] = {}
    for i, c in enumerate(captures):
        j = seen.setdefault(c.key, i)
        if j == i:
            continue
        a, b = captures[j], c
        if wheres[i].context is None:
            raise VerifyprofError(
                f"{a.label} and {b.label}: both at batch {b.batch} and k = {b.num_draft}, and"
                " neither states its context: if they ran at different contexts, state each"
                f" (whatif --capture-context {a.label}=N --capture-context {b.label}=M)"
            )
        raise VerifyprofError(
            f"{a.label} and {b.label}: two captures at the same batch, context and draft count"
            f" (batch {b.batch}, context {b.context:g}, k = {b.num_draft}): give one of each"
        )


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


def _differs(a: tuple[str, str], b: tuple[str, str], first: str) -> str:
    if a[0] != b[0]:
        return f"not a capture of the same hardware as {first}: {b[0]} against {a[0]}"
    return (
        f"not a capture of the same execution mode of the verify as {first}: {b[1]} against {a[1]}"
    )


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
