"""The files the model is given, resolved once per run by the pipeline (the model opens none):
the manifest's JSON, the hardware (``--hardware``, else the file the trace's GPU name names), the
model config (``--model``) and the published drafters (:mod:`~verifyprof.pipeline.data_files`
reads each once)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from verifyprof.contracts.datafiles import catalogue
from verifyprof.contracts.manifest import manifest_json, read_manifest
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.decision.whatif import Given, Prepared, WhatifOptions, prepare
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.options import check_options, known_acceptance, today_batch
from verifyprof.model.inputs.profile import VerifyProfile, verify_profile
from verifyprof.pipeline.data_files import load_hardware, load_model_config, published_drafters


def guess_hardware(device_names: list[str]) -> Hardware | None:
    """A built-in or user hardware file whose name or alias the trace's GPU name contains."""
    known = catalogue("hardware", skip=("links",))
    for raw in device_names:
        name = raw.lower().replace("nvidia", "").strip()
        compact = name.replace(" ", "-")
        if compact in known:
            return load_hardware(known[compact])
        hits = sorted(
            (key for key in known if len(key) >= 4 and key in compact), key=len, reverse=True
        )
        if hits:
            return load_hardware(known[hits[0]])
    return None


def hardware_for(frame: BreakdownFrame, o: WhatifOptions) -> tuple[Hardware | None, list[str]]:
    """``--hardware`` (with ``--link``), else the file the trace's GPU name names, and the note
    saying so."""
    if o.hardware:
        return load_hardware(o.hardware, o.link), []
    hardware = guess_hardware(frame.device_names)
    if hardware is None:
        return None, []
    note = (
        f"hardware {hardware.name} recognised from the trace's GPU name"
        f" ({hardware.path.name}); override with --hardware"
    )
    if o.link:
        hardware = load_hardware(hardware.path, o.link)
    return hardware, [note]


def given_for(
    frame: BreakdownFrame,
    o: WhatifOptions,
    profile: VerifyProfile | None = None,
    manifest: dict | None = None,
) -> Given:
    """Everything the model is given for one frame under the options: the files read here, once
    (``manifest``: its JSON when the caller has read it already), and what the options resolve to
    against the frame (:func:`resolve_given`)."""
    hardware, notes = hardware_for(frame, o)
    if manifest is None and o.manifest is not None:
        manifest = manifest_json(o.manifest)
    model = load_model_config(o.model) if o.model else None
    cautions = hardware_caution(frame, o, hardware)
    files = Given(profile, manifest, hardware, tuple(notes), model, published_drafters(), cautions)
    return resolve_given(frame, o, files)


def resolve_given(frame: BreakdownFrame, o: WhatifOptions, files: Given) -> Given:
    """``files`` with what the options resolve to against the frame, each once, here: the
    verify profile, the manifest as read for its mode, the accept length (``--accept-len`` >
    the manifest's > the trace's, :func:`~verifyprof.model.inputs.options.acceptance`) and
    today's batch (``--batch`` > the trace's ``bs=`` tag > 1). The model takes these as given."""
    check_options(o)
    profile = files.profile or verify_profile(frame, step_name=o.step, width=o.width, mode=o.mode)
    manifest = (
        read_manifest(o.manifest, mode=profile.verify.mode, data=files.manifest)
        if o.manifest
        else None
    )
    acceptance = known_acceptance(o, manifest, profile)
    batch, batch_notes = today_batch(profile, o.batch)
    return replace(
        files,
        profile=profile,
        parsed_manifest=manifest,
        acceptance=acceptance,
        batch=batch,
        batch_notes=batch_notes,
    )


def hardware_caution(
    frame: BreakdownFrame, o: WhatifOptions, hardware: Hardware | None
) -> tuple[str, ...]:
    """One warning where ``--hardware`` names other hardware than the trace's GPU: every
    prediction is then of that hardware, not of the one the trace ran on."""
    if not o.hardware or hardware is None:
        return ()
    traced = guess_hardware(frame.device_names)
    if traced is None or traced.name == hardware.name:
        return ()
    gpu = next(iter(frame.device_names), traced.name)
    return (
        f"--hardware {o.hardware} ({hardware.name}) differs from the trace's GPU, {gpu}"
        f" ({traced.name}): every prediction is of {hardware.name}, not of the GPU traced",
    )


class PlainFiles:
    """What plain numbers are given (no trace), each read when the model first asks for it and
    once: ``--manifest``'s JSON, ``--model``, ``--hardware`` (with ``--link``) and the published
    drafters (:class:`~verifyprof.model.inputs.given.Files`)."""

    def __init__(self, o: WhatifOptions) -> None:
        self.o = o
        self._read: dict[str, Any] = {}

    def _once(self, what: str, read: Callable[[], Any]) -> Any:
        if what not in self._read:
            self._read[what] = read()
        return self._read[what]

    def manifest(self) -> dict | None:
        o = self.o
        return self._once("manifest", lambda: manifest_json(o.manifest) if o.manifest else None)

    def model(self) -> ModelConfig | None:
        o = self.o
        return self._once("model", lambda: load_model_config(o.model) if o.model else None)

    def hardware(self) -> Hardware | None:
        o = self.o
        read = lambda: load_hardware(o.hardware, o.link) if o.hardware else None  # noqa: E731
        return self._once("hardware", read)

    def published(self) -> tuple[dict[str, Any], ...]:
        return self._once("published", published_drafters)


def prepared_of(frame: BreakdownFrame, o: WhatifOptions, given: Given | None = None) -> Prepared:
    """The model's starting point for a frame, its files and options resolved here (the
    notebooks', bench's and tests' way to :func:`~verifyprof.model.decision.whatif.prepare`)."""
    return prepare(frame, o, resolve_given(frame, o, given) if given else given_for(frame, o))
