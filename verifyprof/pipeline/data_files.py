"""The data files the model is given, read here (the model opens none): hardware and its links,
model configs and the published drafters' accept lengths. Each file is read and parsed once per
process (:func:`~verifyprof.contracts.datafiles.read_once`), however many places of a command
ask for it: the catalogue of names and the hit, both sides of a comparison, every candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verifyprof.contracts.datafiles import catalogue, read_toml, resolve, search_dirs
from verifyprof.model.inputs.hardware import LINKS_FILE, Hardware, Link, hardware_of, links_of
from verifyprof.model.inputs.model_config import ModelConfig, model_config_of


def load_links() -> dict[str, Link]:
    """Built-in links, overridden entry by entry by the user's ``links.toml``."""
    files = [d / f"{LINKS_FILE}.toml" for d in reversed(search_dirs("hardware"))]
    return links_of([(read_toml(path), path) for path in files if path.is_file()])


def load_hardware(spec: str | Path, link: str | None = None) -> Hardware:
    """A hardware file by name/alias (``h200``) or path; ``link`` overrides the file's link (and
    drops the file's measured allreduce tables, which were measured over its own link)."""
    path = resolve("hardware", spec, skip=(LINKS_FILE,))
    return hardware_of(read_toml(path), path, load_links(), link)


def load_model_config(spec: str | Path) -> ModelConfig:
    """A model file by name/alias (``kimi-k2``) or path."""
    path = resolve("models", spec)
    return model_config_of(read_toml(path), path)


def published_drafters() -> tuple[dict[str, Any], ...]:
    """Every ``[[drafter]]`` entry of the drafter data files (``data/drafters/*.toml`` and the
    user's): the published accept lengths ``better_drafter`` reads."""
    return tuple(
        entry
        for path in sorted(set(catalogue("drafters").values()))
        for entry in read_toml(path).get("drafter", [])
    )
