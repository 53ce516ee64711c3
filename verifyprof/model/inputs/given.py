"""What the pipeline read for the model (:mod:`verifyprof.pipeline.model_files`), once per run:
the model opens no file, so every file's content reaches it here, parsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from verifyprof.contracts.manifest import Manifest
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.options import Acceptance
from verifyprof.model.inputs.profile import VerifyProfile


@dataclass(frozen=True)
class Given:
    """The verify profile, the manifest's JSON, the hardware (and the note saying where it came
    from), the model config and the published drafters' entries (``data/drafters``); and what the
    options resolve to against the trace: the accept length and today's batch."""

    profile: VerifyProfile | None = None
    manifest: dict | None = None
    hardware: Hardware | None = None
    hardware_notes: tuple[str, ...] = ()
    model: ModelConfig | None = None
    published: tuple[dict[str, Any], ...] = ()
    cautions: tuple[str, ...] = ()  # a given file the trace contradicts (the GPU named)
    # what the options resolve to against the trace (pipeline.model_files.resolve_given), once:
    # the model reads these, never the options they came from
    parsed_manifest: Manifest | None = None  # the manifest as read for the verify's mode
    acceptance: Acceptance | None = None  # the accept length: option > manifest > the trace
    batch: int | None = None  # today's batch: --batch > the trace's bs= tag > 1
    batch_notes: tuple[str, ...] = ()  # where today's batch came from, where it is said


class Files(Protocol):
    """Plain numbers' files, read by the pipeline when the model first asks for each
    (:class:`verifyprof.pipeline.model_files.PlainFiles`), so that an option is refused before
    any file is read, as the model's checks order them; each read once."""

    def manifest(self) -> dict | None: ...

    def model(self) -> ModelConfig | None: ...

    def hardware(self) -> Hardware | None: ...

    def published(self) -> tuple[dict[str, Any], ...]: ...


class NoFiles:
    """No file given: plain numbers of numbers only."""

    def manifest(self) -> dict | None:
        return None

    def model(self) -> ModelConfig | None:
        return None

    def hardware(self) -> Hardware | None:
        return None

    def published(self) -> tuple[dict[str, Any], ...]:
        return ()
