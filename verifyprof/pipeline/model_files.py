"""The files the model is given, resolved once per run by the pipeline (the model opens none):
the manifest's JSON, the hardware (``--hardware``, else the file the trace's GPU name names) and
the model config (``--model``)."""

from __future__ import annotations

from verifyprof.contracts.datafiles import catalogue
from verifyprof.contracts.manifest import manifest_json
from verifyprof.contracts.schema import BreakdownFrame
from verifyprof.model.decision.whatif import Given, Prepared, WhatifOptions, prepare
from verifyprof.model.inputs.hardware import Hardware, load_hardware
from verifyprof.model.inputs.model_config import load_model_config
from verifyprof.model.inputs.profile import VerifyProfile


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
    (``manifest``: its JSON when the caller has read it already)."""
    hardware, notes = hardware_for(frame, o)
    if manifest is None and o.manifest is not None:
        manifest = manifest_json(o.manifest)
    model = load_model_config(o.model) if o.model else None
    cautions = hardware_caution(frame, o, hardware)
    return Given(profile, manifest, hardware, tuple(notes), model, cautions)


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


def prepared_of(frame: BreakdownFrame, o: WhatifOptions, given: Given | None = None) -> Prepared:
    """The model's starting point for a frame, its files resolved here (the notebooks', bench's
    and tests' way to :func:`~verifyprof.model.decision.whatif.prepare`)."""
    return prepare(frame, o, given or given_for(frame, o))
