"""The records the manifest's writers (``capture/manifest_probes.py``,
``workload/write_manifest.py``) put in it: timestamps, ``versions``, the GPUs ``nvidia-smi`` sees,
``traces`` and ``dilation``. The schema, its keys and the reader:
:mod:`verifyprof.contracts.manifest`.
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def now_iso(timespec: str = "milliseconds") -> str:
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def versions_record(
    *,
    verifyprof: str | None,
    python: str,
    platform: str,
    nsys: str | None,
    torch: str | None,
    torch_cuda: str | None,
    server: str | None,
    gpus: list[dict],
    **extra: Any,
) -> dict[str, Any]:
    """``versions``: the fixed keys, with writer-specific ones (``extra``) after ``torch_cuda``."""
    return {
        "verifyprof": verifyprof,
        "python": python,
        "platform": platform,
        "nsys": nsys,
        "torch": torch,
        "torch_cuda": torch_cuda,
        **extra,
        "server": server,
        "gpus": gpus,
    }


# ------------------------------------------------------------------------------------------
# GPUs

NVIDIA_SMI_FIELDS = "index,name,driver_version,memory.total,pci.bus_id"


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def parse_nvidia_smi(text: str) -> list[dict]:
    """``nvidia-smi --query-gpu=NVIDIA_SMI_FIELDS --format=csv,noheader,nounits`` -> GPU records."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        index, name, driver, memory, bus = parts[:5]
        rows.append(
            {
                "index": int(index) if index.isdigit() else index,
                "name": name,
                "driver": driver,
                "memory_mib": _int(memory),
                "pci_bus_id": bus,
            }
        )
    return rows


def gpus(timeout: float = 15.0) -> list[dict]:
    """The GPUs ``nvidia-smi`` sees (empty without it, or when it fails or hangs)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={NVIDIA_SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(out.stdout) if out.returncode == 0 else []


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


def trace_record(path: Path, root: Path) -> dict[str, Any] | None:
    """``{path (relative to root), kind, bytes}`` of a trace file, None for other files."""
    kind = trace_kind(path)
    if kind is None:
        return None
    return {"path": path.relative_to(root).as_posix(), "kind": kind, "bytes": path.stat().st_size}


def dilation_record(
    profiled_tps: float | None,
    unprofiled_tps: float | None,
    source: str,
    basis: str = "tokens_per_s",
    **extra: Any,
) -> dict[str, Any]:
    """The manifest's ``dilation``: the factor when both rates are known and positive, else null."""
    ok = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
        for v in (profiled_tps, unprofiled_tps)
    )
    return {
        "factor": unprofiled_tps / profiled_tps if ok else None,
        "basis": basis,  # type: ignore[operator]
        "profiled_tokens_per_s": profiled_tps,
        "unprofiled_tokens_per_s": unprofiled_tps,
        "source": source,
        **extra,
    }
