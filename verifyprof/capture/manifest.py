"""``manifest.json``: what was run, on what, and what it measured, beside the trace.

Schema ``verifyprof.capture/1`` (keys always present; values null when unknown)::

    schema, status ("running" | "ok" | "interrupted" | "failed"), error, mode ("server" | "program"),
    backend ("nsys" | "torch" | "none"), started_at, finished_at (ISO 8601 UTC),
    command {verifyprof: argv, target: argv, profiler: argv (the full command started)},
    options {...the capture options...}, versions {verifyprof, python, platform, nsys, torch,
    torch_cuda, server, gpus: [{index, name, driver, memory_mib, pci_bus_id}]},
    hooks {presets, targets, env: [names], processes: [{pid, argv, patched, pending, missing}]},
    workload {...} (server mode),
    results {accept_len, accept_rate, server_avg_spec_accept_length, tokens_per_s,
             tokens_per_s_per_request, completion_tokens, prompt_tokens, spec_verify_ct,
             requests_ok, requests_failed, wall_s, latency_s {mean, p50, p90}},
    window {start_unix_ns, end_unix_ns, duration_ns, start_reply, stop_reply},
    traces [{path (relative to the manifest), kind, bytes}], files [every file in the directory],
    target {exit_code, stopped_by, leftover_pids, log}

``results.accept_len`` (tokens per verify step, SGLang's definition) and ``results.tokens_per_s``
are what ``whatif`` reads. Written atomically: a reader never sees half a manifest.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

import verifyprof

SCHEMA = "verifyprof.capture/1"
MANIFEST = "manifest.json"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj: object) -> None:
    write_atomic(path, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    write_atomic(path, "".join(json.dumps(row, default=str) + "\n" for row in rows).encode())


def read_manifest(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------
# versions


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


def gpus(timeout: float = 15.0) -> list[dict]:
    """The GPUs ``nvidia-smi`` sees (empty without it)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    fields = "index,name,driver_version,memory.total,pci.bus_id"
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(out.stdout) if out.returncode == 0 else []


def parse_nvidia_smi(text: str) -> list[dict]:
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        index, name, driver, memory, bus = parts[:5]
        rows.append({
            "index": int(index) if index.isdigit() else index,
            "name": name,
            "driver": driver,
            "memory_mib": int(memory) if memory.isdigit() else None,
            "pci_bus_id": bus,
        })
    return rows


def versions(nsys_version: str | None = None, server_version: str | None = None) -> dict:
    return {
        "verifyprof": verifyprof.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "nsys": nsys_version,
        **torch_versions(),
        "server": server_version,
        "gpus": gpus(),
    }


# ------------------------------------------------------------------------------------------
# traces


def trace_kind(path: Path) -> str | None:
    name = path.name
    if name.endswith(".nsys-rep"):
        return "nsys-rep"
    if name.endswith((".sqlite", ".sqlite.gz")):
        return "nsys-sqlite"
    if name.endswith(".qdstrm"):
        return "nsys-qdstrm"
    if name.endswith((".trace.json.gz", ".trace.json", ".pt.trace.json", ".pt.trace.json.gz")):
        return "kineto"
    return None


def list_traces(root: Path) -> list[dict]:
    """Every trace file under ``root`` (recursively), paths relative to it, largest last."""
    rows = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        kind = trace_kind(path)
        if kind is not None:
            rows.append({"path": path.relative_to(root).as_posix(), "kind": kind, "bytes": path.stat().st_size})
    return rows


def list_files(root: Path) -> list[str]:
    """Every file the capture left (the program's own outputs included), relative to ``root``."""
    return [p.relative_to(root).as_posix() for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")]
