"""What ``verifyprof capture`` records in its ``manifest.json`` that only a capture can probe:
versions of the tools around it, the traces and files the run left, and the writes (atomic,
fsynced: a reader never sees half a manifest). The schema and its keys are
:mod:`verifyprof.contracts.manifest`'s, the version, GPU and trace records
:mod:`verifyprof.contracts.manifest_records`'."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import platform
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import verifyprof
from verifyprof.contracts.manifest import MANIFEST
from verifyprof.contracts.manifest_records import gpus, trace_record, versions_record
from verifyprof.contracts.plumbing import outputs


def write(out: Path, doc: dict) -> None:
    outputs.write_json(out / MANIFEST, doc, default=str)


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    outputs.write_text(path, "".join(json.dumps(row, default=str) + "\n" for row in rows))


def torch_versions() -> dict[str, str | None]:
    """torch and its CUDA version without importing torch (seconds, and maybe a GPU context)."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return {"torch": None, "torch_cuda": None}
    cuda = None
    with contextlib.suppress(Exception):
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.origin:
            text = (Path(spec.origin).parent / "version.py").read_text()
            match = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
            cuda = match.group(1) if match else None
    return {"torch": version, "torch_cuda": cuda}


def versions(nsys_version: str | None = None, server_version: str | None = None) -> dict:
    return versions_record(
        verifyprof=verifyprof.__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        nsys=nsys_version,
        **torch_versions(),
        server=server_version,
        gpus=gpus(),
    )


def list_traces(root: Path) -> list[dict]:
    """Every trace file under ``root`` (recursively), paths relative to it, largest last."""
    rows = (
        trace_record(p, root)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    )
    return [row for row in rows if row is not None]


def list_files(root: Path) -> list[str]:
    """Every file the capture left (the program's own outputs included), relative to ``root``."""
    return [
        p.relative_to(root).as_posix()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    ]
