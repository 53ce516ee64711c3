"""The capture manifest (``manifest.json`` beside a trace): what whatif reads of it.

Understands ``verifyprof capture``'s manifest (schema ``verifyprof.capture/1``), the workload's
summary (``verifyprof.workload/1``) and, for other JSON, the first known key name found.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError

ACCEPT_KEYS = ("accept_len", "accept_length", "avg_accept_len", "mean_accept_len", "spec_accept_length")
BASELINE_TPS_KEYS = ("baseline_tokens_per_s", "baseline_tps", "baseline_tok_s")
DECODE_MS_KEYS = ("decode_ms", "baseline_decode_ms")
TPS_KEYS = ("tokens_per_s", "tok_s", "output_tokens_per_s")
SURVIVAL_KEYS = ("survival", "accept_survival")
NUM_DRAFT_KEYS = ("num_draft", "num_draft_tokens", "speculative_num_steps")


@dataclass
class Manifest:
    path: Path
    accept_len: float | None = None
    baseline_tps: float | None = None
    decode_ms: float | None = None
    tokens_per_s: float | None = None
    survival: tuple[float, ...] | None = None
    num_draft: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def _find(data: Any, keys: tuple[str, ...], depth: int = 0) -> Any:
    """First value under any of ``keys``, searching nested objects breadth-first (a few levels)."""
    if not isinstance(data, dict) or depth > 3:
        return None
    for key in keys:
        if key in data and data[key] is not None and not isinstance(data[key], dict):
            return data[key]
    for value in data.values():
        found = _find(value, keys, depth + 1)
        if found is not None:
            return found
    return None


def read_manifest(path: str | Path, mode: str | None = None) -> Manifest:
    """Accept length, baseline and survival recorded beside a capture.

    Understands ``verifyprof capture``'s ``manifest.json`` (schema ``verifyprof.capture/1``:
    ``results.accept_len``, ``results.tokens_per_s``), the workload's summary
    (``verifyprof.workload/1``: the spec and decode runs of ``mode``, the simulated survival
    curve) and, for other JSON, the first of the known key names found in nested objects.
    """
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
        if raw_bytes[:2] == b"\x1f\x8b":
            raw_bytes = gzip.decompress(raw_bytes)
        data = json.loads(raw_bytes)
    except FileNotFoundError:
        raise VerifyprofError("no such file", path) from None
    except (OSError, EOFError) as exc:
        raise VerifyprofError(f"cannot read manifest: {exc}", path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise VerifyprofError(f"manifest is not valid JSON: {exc}", path) from None
    if not isinstance(data, dict):
        raise VerifyprofError("manifest must be a JSON object", path)
    schema = str(data.get("schema", ""))
    if schema.startswith("verifyprof.workload/"):
        return _workload_summary(data, path, mode)
    if schema.startswith("verifyprof.capture/"):
        inner = data.get("workload_summary")
        if isinstance(inner, dict) and str(inner.get("schema", "")).startswith("verifyprof.workload/"):
            return _workload_summary(inner, path, mode)  # traces/capture_workload.sh manifests
        results = data.get("results") or {}
        data = {"results": results}  # options and workload settings are requests, not measurements

    def number(keys: tuple[str, ...]) -> float | None:
        value = _find(data, keys)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise VerifyprofError(f"manifest field {keys[0]!r} is not a number: {value!r}", path)
        return float(value)

    survival = _find(data, SURVIVAL_KEYS)
    if survival is not None and not (isinstance(survival, list) and all(isinstance(v, (int, float)) for v in survival)):
        raise VerifyprofError(f"manifest field 'survival' must be a list of numbers, got {survival!r}", path)
    num_draft = number(NUM_DRAFT_KEYS)
    return Manifest(
        path=path,
        accept_len=number(ACCEPT_KEYS),
        baseline_tps=number(BASELINE_TPS_KEYS),
        decode_ms=number(DECODE_MS_KEYS),
        tokens_per_s=number(TPS_KEYS),
        survival=tuple(float(v) for v in survival) if survival else None,
        num_draft=int(num_draft) if num_draft is not None else None,
        raw=data,
    )


def _workload_summary(data: dict[str, Any], path: Path, mode: str | None) -> Manifest:
    runs = [r for r in data.get("runs", []) if isinstance(r, dict)]
    modes = [r.get("mode") for r in runs if r.get("kind") == "spec"]
    if mode is None or mode not in modes:
        mode = modes[0] if modes else None
    spec = next((r for r in runs if r.get("kind") == "spec" and r.get("mode") == mode), None)
    decode = next((r for r in runs if r.get("kind") == "decode" and r.get("mode") == mode), None)
    config = data.get("config") or {}
    acceptance = config.get("simulated_acceptance") or {}
    survival = acceptance.get("survival")
    return Manifest(
        path=path,
        accept_len=float(spec["accept_len"]) if spec and spec.get("accept_len") is not None else None,
        decode_ms=float(decode["decode_ms"]["mean"]) if decode and decode.get("decode_ms", {}).get("n") else None,
        tokens_per_s=float(spec["tokens_per_s_per_request"]) if spec and spec.get("tokens_per_s_per_request") else None,
        survival=tuple(float(v) for v in survival) if survival else None,
        num_draft=int(config.get("run", {}).get("num_draft")) if config.get("run", {}).get("num_draft") else None,
        raw=data,
    )
