"""Several captures of one program, one answer: ``whatif CAP1 CAP2 ...`` and ``report CAP1 CAP2
...`` (issue 32). Each capture is read and resolved as a single run is; the model then makes one
model of them (:func:`verifyprof.model.decision.captures.one_model`) and ranks today's run, the
first, with every other capture's steps as measured points of its load and draft-count curves.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from verifyprof.capture.batches import capture_folders
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest import read_manifest
from verifyprof.model.decision.candidates import Ranking
from verifyprof.model.decision.captures import one_model
from verifyprof.model.decision.whatif import Prepared, WhatifOptions, prepare
from verifyprof.model.inputs.step_attrs import with_attr_columns
from verifyprof.pipeline.resolve import Resolved, ranking_of, resolve_sources


def expand_captures(specs: list[str]) -> list[str]:
    """A ``capture --batches`` output folder stands for its ``batch-N`` captures (smallest batch
    first); every other input for itself."""
    out = []
    for spec in specs:
        found = capture_folders(Path(spec))
        out += [str(p) for p in found] if found else [spec]
    return out


def label_of(spec: str, taken: set[str]) -> str:
    """A short, distinct name for a capture: its folder's name (or file's stem)."""
    path = Path(spec.rstrip("/"))
    name = path.name if path.is_dir() else path.name.split(".")[0]
    name = name or spec
    out, n = name, 2
    while out in taken:
        out, n = f"{name}#{n}", n + 1
    return out


def resolve_captures(
    sources: list[str], options: WhatifOptions, parallel=None
) -> tuple[Resolved, list[Resolved]]:
    """The first capture's resolved run with the model of all of them, and each capture's own."""
    if options.manifest is not None and len(sources) > 1:
        raise VerifyprofError(
            "--manifest names one capture's manifest: with several captures give capture folders"
            " (each with its manifest.json)"
        )
    each, runs, taken = [], [], set()
    for spec in sources:
        resolved = resolve_sources([spec], replace(options, source=spec), parallel=parallel)
        if resolved.prepared is None:
            if len(sources) == 1:
                return resolved, [resolved]  # the caller says why there is no ranking
            raise VerifyprofError("; ".join(resolved.reasons) or "no accept length", spec)
        label = label_of(spec, taken)
        taken.add(label)
        path = resolved.options.manifest
        manifest = read_manifest(path) if path is not None else None
        gpu = next(iter(resolved.frame.device_names), "")
        if len(sources) == 1 and len((manifest.raw if manifest else {}).get("loads") or []) > 1:
            runs += [(f"{label} bs={b}", p, manifest, gpu) for b, p in by_batch(resolved)]
        else:
            runs.append((label, resolved.prepared, manifest, gpu))
        each.append(resolved)
    if len(runs) == 1:
        return each[0], each
    combined = one_model(runs)
    return replace(each[0], prepared=combined), each


MIN_STEPS = 8  # a batch size with fewer verify steps is no measured point of its own


def by_batch(resolved: Resolved) -> list[tuple[int, Prepared]]:
    """A trace driven at several loads (``capture --concurrency 1,8,32``: its manifest's
    ``loads``) as one prepared state per batch size its verify steps ran at (their ``bs=``
    tags), with at least :data:`MIN_STEPS` steps each; the steps that name no batch stay in
    every one. The most frequent batch first: today's run."""
    frame = resolved.frame
    steps = with_attr_columns(frame.steps)
    verify = steps[steps["_phase"] == "verify"]
    counts = verify["_batch"].dropna().astype(int).value_counts()
    out = []
    for batch in counts[counts >= MIN_STEPS].index:
        keep = steps["_batch"].isna() | (steps["_batch"] == batch)
        sub = replace(frame, steps=frame.steps[keep.to_numpy()])
        out.append((int(batch), prepare(sub, resolved.options)))
    if not out:
        raise VerifyprofError(
            f"no batch size with {MIN_STEPS} or more verify steps tagged bs=", resolved.frame.source
        )
    return out


def whatif_captures(sources: list[str], options: WhatifOptions, parallel=None) -> Ranking:
    """``whatif CAP1 CAP2 ...``: today's run (the first) ranked, its curves from all of them."""
    head, _ = resolve_captures(sources, options, parallel)
    ranking = ranking_of(head)
    if ranking is None:
        raise VerifyprofError("; ".join(head.reasons) or "no plan", sources[0])
    return ranking
