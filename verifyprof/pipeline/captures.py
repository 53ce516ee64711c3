"""Several captures of one program, one answer: ``whatif CAP1 CAP2 ...`` (issue 32). Each capture
is a :class:`~verifyprof.pipeline.run.Run` of its own (read and resolved once), a member of
today's run (``open_run(captures, options, captures=True)``: :attr:`Run.members`); this module
joins them: the model makes one model of them
(:func:`verifyprof.model.decision.pooled_captures.one_model`) and ranks today's run, the first, with
every other capture's steps as measured points of its load and draft-count curves. A server
capture driven at several loads (``capture --concurrency 1,8,32``) is split by its steps' ``bs=``
tags into one measured point per batch.

The runs are taken as given (``Run``'s members), never opened here, so that ``run.py`` can call
this module and this module never imports it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import unfinished
from verifyprof.model.decision.pooled_captures import one_model
from verifyprof.model.decision.whatif import Given, Prepared, WhatifOptions, prepare
from verifyprof.model.inputs.step_attrs import with_attr_columns
from verifyprof.pipeline.capture_inputs import (  # noqa: F401 - re-exported
    expand_captures,
    expanded_captures,
)
from verifyprof.pipeline.model_files import resolve_given
from verifyprof.pipeline.resolve import Resolved

MIN_STEPS = 8  # a batch size with fewer verify steps is no measured point of its own


def label_of(spec: str, taken: set[str]) -> str:
    """A short, distinct name for a capture: its folder's name (or file's stem)."""
    path = Path(spec.rstrip("/"))
    name = path.name if path.is_dir() else path.name.split(".")[0]
    name = name or spec
    out, n = name, 2
    while out in taken:
        out, n = f"{name}#{n}", n + 1
    return out


def capture_options(sources: list[str], options: WhatifOptions) -> WhatifOptions:
    """The options of several captures, refused or read as several captures mean them, before
    anything is read: ``--manifest`` names one capture's; one ``--context`` is the load curve's."""
    if options.manifest is not None and len(sources) > 1:
        raise VerifyprofError(
            "--manifest names one capture's manifest: with several captures give capture folders"
            " (each with its manifest.json)"
        )
    if len(sources) > 1 and options.context is not None and not options.contexts:
        # one --context with several captures is the load curve's context, never theirs (each
        # states its own, or --capture-context does: issue 41)
        options = replace(options, context=None, contexts=(options.context,))
    return options


def join(runs: Sequence[Any], options: WhatifOptions) -> Resolved | None:
    """Today's resolved state (``runs[0]``'s) with the model of every capture; None: one capture
    at one load (the run's own state). ``runs``: each capture's run, today's first (a
    :class:`~verifyprof.pipeline.run.Run`'s members), each read and prepared here in turn; a
    capture whose manifest says it did not finish joins today's ``unfinished``."""
    points: list[tuple] = []
    taken: set[str] = set()
    for run in runs:
        spec = run.sources[0]
        said = unfinished(run.manifest_data)
        if said is not None:  # printed by the CLI as a warning: never used without a word
            runs[0].unfinished.append((spec, said))
        if len(runs) == 1 and not _loads(run):
            return None
        prepared = run.prepared
        if prepared is None:
            raise VerifyprofError("; ".join(run.reasons) or "no accept length", spec)
        label = label_of(spec, taken)
        taken.add(label)
        gpu = next(iter(run.frame.device_names), "")
        if len(runs) == 1:
            parts = by_batch(run, prepared)
            points += [(f"{label} bs={b}", p, prepared.manifest, gpu) for b, p in parts]
        else:
            points.append((label, prepared, prepared.manifest, gpu))
    combined = one_model(points, options)
    return replace(runs[0].resolved, prepared=combined)


def _loads(run: Any) -> bool:
    """Whether the capture drove several loads in one trace (its manifest's ``loads``)."""
    data = run.manifest_data or {}
    return len(data.get("loads") or []) > 1


def by_batch(run: Any, head: Prepared) -> list[tuple[int, Prepared]]:
    """A trace driven at several loads (``capture --concurrency 1,8,32``) as one prepared state
    per batch size its verify steps ran at (their ``bs=`` tags), with at least
    :data:`MIN_STEPS` steps each; the steps that name no batch stay in every one. The most
    frequent batch first: today's run."""
    resolved = run.resolved
    frame, o = resolved.frame, resolved.options
    steps = with_attr_columns(frame.steps)
    verify = steps[steps["_phase"] == "verify"]
    counts = verify["_batch"].dropna().astype(int).value_counts()
    given = Given(
        manifest=run.manifest_data,
        hardware=head.scenario.hardware,
        model=head.scenario.model,
        published=head.scenario.published,
    )
    out = []
    for batch in counts[counts >= MIN_STEPS].index:
        keep = steps["_batch"].isna() | (steps["_batch"] == batch)
        sub = replace(frame, steps=frame.steps[keep.to_numpy()])
        out.append((int(batch), prepare(sub, o, resolve_given(sub, o, given))))
    if not out:
        raise VerifyprofError(
            f"no batch size with {MIN_STEPS} or more verify steps tagged bs=", frame.source
        )
    return out
