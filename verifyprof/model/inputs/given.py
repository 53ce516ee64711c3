"""What the pipeline read for the model (:mod:`verifyprof.pipeline.model_files`), once per run:
the model opens no file, so every file's content reaches it here, parsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.profile import VerifyProfile


@dataclass(frozen=True)
class Given:
    """The verify profile, the manifest's JSON, the hardware (and the note saying where it came
    from), the model config and the published drafters' entries (``data/drafters``)."""

    profile: VerifyProfile | None = None
    manifest: dict | None = None
    hardware: Hardware | None = None
    hardware_notes: tuple[str, ...] = ()
    model: ModelConfig | None = None
    published: tuple[dict[str, Any], ...] = ()
    cautions: tuple[str, ...] = ()  # a given file the trace contradicts (the GPU named)


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
