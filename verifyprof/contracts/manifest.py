"""The capture manifest (``manifest.json`` beside a trace): its schema, keys and records, defined
once for both writers (``verifyprof capture``: ``capture/session.py``; the workload's traces:
``workload/write_manifest.py``) and the reader (``whatif --manifest``).

Schema ``verifyprof.capture/1`` (every key in ``KEYS`` present; values null when unknown)::

    schema, status ("running" | "ok" | "interrupted" | "failed"), error,
    mode ("server" | "program"), backend ("nsys" | "torch" | "none"),
    started_at, finished_at (ISO 8601 UTC),
    command {verifyprof: argv, target: argv, profiler: argv (the full command started), inputs:
             [{arg: index in target, bytes, digest}] (the files the target names), cwd (the
             directory the target ran in)},
    options {...the capture options...},
    versions {verifyprof, python, platform, nsys, torch, torch_cuda, [nccl, nvtx_backend,] server,
              gpus: [{index, name, driver, memory_mib, pci_bus_id}]},
    hooks {presets, targets, env: [names], processes: [{pid, argv, patched, pending, missing}]},
    workload {...} (server mode),
    results {accept_len, tokens_per_s, baseline_tokens_per_s, decode_ms, survival, num_draft, ...},
    window {start_unix_ns, end_unix_ns, duration_ns, start_reply, stop_reply},
    traces [{path (relative to the manifest), kind, bytes}], files [what the directory holds],
    and optionally name, target {exit_code, stopped_by, leftover_pids, log}, warnings,
    workload_summary (a ``verifyprof.workload/1`` summary),
    dilation {factor (profiled cycle / unprofiled cycle = unprofiled / profiled tok/s; > 1: the
    profiler slowed the program), basis ("tokens_per_s", or "tokens_per_s_per_request" for a
    server), profiled_tokens_per_s, unprofiled_tokens_per_s,
    source ("requests after the window" | "program results" | "baseline run"), ...; with
    ``--baseline-repeat N`` also ``baseline_runs_tokens_per_s``, the unprofiled rate their median}
    (null factor when no unprofiled rate was measured),
    load (what the capture knows of its load: ``capture --batches/--num-drafts/--contexts`` and
    ``--program-context``; absent where it knows nothing) {template: the program's argv before
    the values were put in (null: nothing swept), decode_template: --decode-cmd before them,
    axes: {batch | num_draft | context: {value, placeholder ("{batch}", or null),
    option (the program option the placeholder sat in: ``--bs {batch}``/``--bs={batch}``; null
    where it sat elsewhere), source ("template" | "declared")}}}

The ``load`` record extends schema 1 (an optional key, issue 41): readers of older manifests
find none and read the load from the trace, the results and the command line as before.

``hooks`` also holds ``fired`` {source: ranges}, ``never_fired`` [{source, phase, targets, state,
detail}], ``idle_processes`` (processes that installed hooks and opened none, not listed),
``program_folder`` and ``trace_ranges`` (verifyprof ranges in the nsys export). ``results`` may
hold ``accept_len_convention`` ("tokens_per_verify": ``accept_len`` is always tokens per verify
step, bonus included) and ``accept_len_reported`` / ``accept_len_reported_convention`` (what the
program reported, before conversion).

``results`` keys in ``RESULT_KEYS`` are what ``whatif`` reads. Other JSON (no ``schema``) is read
by searching nested objects for the first of a few known key names. The records the writers put
in it (versions, GPUs, traces, dilation): :mod:`verifyprof.contracts.manifest_records`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyprof.contracts.bounds import check_probabilities, manifest_number
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.manifest_checks import check_kept
from verifyprof.contracts.manifest_dilation import with_dilation
from verifyprof.contracts.plumbing.inputs import MANIFEST_LIMIT, parse_json, read_bytes

SCHEMA = "verifyprof.capture/1"
WORKLOAD_SCHEMA = "verifyprof.workload/1"  # the workload's summary.json, also read as a manifest
MANIFEST = "manifest.json"

KEYS = (
    "status",
    "error",
    "mode",
    "backend",
    "started_at",
    "finished_at",
    "command",
    "options",
    "versions",
    "hooks",
    "workload",
    "results",
    "window",
    "traces",
    "files",
)
OPTIONAL_KEYS = ("name", "target", "warnings", "workload_summary", "dilation", "load")
# accepted_drafts + 1 bonus token = tokens_per_verify
ACCEPT_CONVENTIONS = ("tokens_per_verify", "accepted_drafts")
# Manifest field -> its key under ``results`` (what the reader takes from a schema'd manifest).
RESULT_KEYS = {
    "accept_len": "accept_len",
    "tokens_per_s": "tokens_per_s",
    "baseline_tps": "baseline_tokens_per_s",
    "decode_ms": "decode_ms",
    "survival": "survival",
    "num_draft": "num_draft",
}


def document(**fields: Any) -> dict[str, Any]:
    """A manifest: ``schema`` first, then ``fields`` in the writer's order (every key of ``KEYS``,
    optional keys from ``OPTIONAL_KEYS``); a missing or unknown key is a bug in the writer."""
    missing = [k for k in KEYS if k not in fields]
    unknown = [k for k in fields if k not in KEYS and k not in OPTIONAL_KEYS]
    if missing or unknown:
        raise ValueError(f"manifest keys: missing {missing}, unknown {unknown}")
    return {"schema": SCHEMA, **fields}


# ------------------------------------------------------------------------------------------
# reading (whatif --manifest)

# Key names searched, in this order, in JSON that has no verifyprof schema.
ACCEPT_KEYS = (
    "accept_len",
    "accept_length",
    "avg_accept_len",
    "mean_accept_len",
    "spec_accept_length",
)
BASELINE_TPS_KEYS = ("baseline_tokens_per_s", "baseline_tps", "baseline_tok_s")
DECODE_MS_KEYS = ("decode_ms", "baseline_decode_ms")
TPS_KEYS = ("tokens_per_s", "tok_s", "output_tokens_per_s")
SURVIVAL_KEYS = ("survival", "accept_survival")
NUM_DRAFT_KEYS = ("num_draft", "num_draft_tokens", "speculative_num_steps")
ALIASES = {
    "accept_len": ACCEPT_KEYS,
    "baseline_tps": BASELINE_TPS_KEYS,
    "decode_ms": DECODE_MS_KEYS,
    "tokens_per_s": TPS_KEYS,
    "survival": SURVIVAL_KEYS,
    "num_draft": NUM_DRAFT_KEYS,
}


@dataclass
class Manifest:
    path: Path
    accept_len: float | None = None
    baseline_tps: float | None = None
    decode_ms: float | None = None
    tokens_per_s: float | None = None
    survival: tuple[float, ...] | None = None
    num_draft: int | None = None
    # profiled cycle / unprofiled cycle (manifest ``dilation.factor``)
    dilation: float | None = None
    # the rate without the profiler (``dilation.unprofiled_tokens_per_s``)
    unprofiled_tps: float | None = None
    dilation_source: str | None = None
    # the rate under the profiler the factor divides (``dilation.profiled_tokens_per_s``), and
    # every unprofiled run's rate (``--baseline-repeat``: their median is the anchor)
    profiled_tps: float | None = None
    dilation_runs: tuple[float, ...] = ()
    # plain decoding in the unprofiled run (``dilation.unprofiled_baseline_tokens_per_s``, or the
    # baseline run's results.json beside the manifest): the rate to race at the unprofiled rate
    unprofiled_baseline_tps: float | None = None
    # per-request rate / the rate the dilation record holds: below 1 where a batched program's
    # ``tokens_per_s`` is its aggregate and it also reported ``tokens_per_s_per_request``
    # (the model's anchor is a request's rate; the factor, a ratio, is the same either way)
    rate_scale: float = 1.0
    # the program's per-sample rates (``--result tokens_per_s_samples``) whose medians the
    # dilation's rates are: (profiled, unprofiled), as printed
    dilation_samples: tuple[tuple[float, ...], tuple[float, ...]] | None = None
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


def manifest_json(path: str | Path) -> dict[str, Any]:
    """A manifest file's JSON object, read and checked once (a run hands it to every reader
    below, so that one command opens ``manifest.json`` once)."""
    data = _load(Path(path))
    if data.get("schema") == SCHEMA:
        check_kept(data, Path(path))  # what is read of it before read_manifest
    return data


def _load(path: Path) -> dict[str, Any]:
    raw_bytes = read_bytes(path, "manifest", MANIFEST_LIMIT, gunzip=True)  # a regular file
    try:
        data = parse_json(raw_bytes, "manifest", path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise VerifyprofError(f"manifest is not valid JSON: {exc}", path) from None
    if not isinstance(data, dict):
        raise VerifyprofError("manifest must be a JSON object", path)
    return data


def unfinished(data: dict[str, Any] | None) -> str | None:
    """Why a capture's numbers may be partial: its manifest's status is not "ok" (it failed, was
    interrupted, or never finished); None for a finished capture or another kind of manifest."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("status") == "ok":
        return None
    status, error = data.get("status"), data.get("error")
    said = {"failed": "failed", "interrupted": "was interrupted", "running": "never finished"}
    how = said.get(status, f"ended with status {status!r:.40}") if isinstance(status, str) else None
    why = f" ({' '.join(error.split())[:200]})" if isinstance(error, str) and error else ""
    return (
        f"its manifest says the capture {how or 'has no status'}{why}: its numbers are what it"
        " measured before it stopped"
    )


def run_results(path: str | Path, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A capture manifest's ``results`` as recorded (its measured run: mode, tokens_per_s);
    empty for other manifests. ``data``: the file's JSON already read (:func:`manifest_json`)."""
    data = _load(Path(path)) if data is None else data
    results = data.get("results") if data.get("schema") == SCHEMA else None
    return results if isinstance(results, dict) else {}


def read_manifest(
    path: str | Path, mode: str | None = None, data: dict[str, Any] | None = None
) -> Manifest:
    """Accept length, baseline and survival recorded beside a capture.

    A ``verifyprof.capture/1`` manifest is read at its documented keys (``results`` keys of
    ``RESULT_KEYS``; options and workload settings are requests, not measurements), or at its
    ``workload_summary`` when it carries one; a ``verifyprof.workload/1`` summary at the spec and
    decode runs of ``mode`` and its simulated survival curve. Only JSON without a verifyprof
    schema is searched for the first of the known key names (``ALIASES``) in nested objects.
    """
    path = Path(path)
    data = _load(path) if data is None else data  # ``data``: the JSON already read
    schema = data.get("schema")
    if schema == WORKLOAD_SCHEMA:
        return _manifest(path, _workload_values(data, mode), data)
    if schema == SCHEMA:
        inner = data.get("workload_summary")
        if isinstance(inner, dict) and inner.get("schema") == WORKLOAD_SCHEMA:
            # traces/capture_workload.sh
            return with_dilation(
                _manifest(path, _workload_values(inner, mode), inner), data.get("dilation")
            )
        results = data.get("results") or {}
        if not isinstance(results, dict):
            raise VerifyprofError(
                f"manifest field 'results' must be an object, got {results!r}", path
            )
        values = {name: results.get(key) for name, key in RESULT_KEYS.items()}
        # what ran (a server's: driven by which workload), at which loads, when and where:
        # several captures are one program's (model.decision.captures), a --concurrency list
        # splits one trace into measured points
        what = ("command", "loads", "load", "started_at", "versions", "workload")
        kept = {"results": results} | {k: data[k] for k in what if k in data}
        check_kept(kept, path)
        return with_dilation(_manifest(path, values, kept), data.get("dilation"))
    if isinstance(schema, str) and schema.startswith("verifyprof."):
        raise VerifyprofError(
            f"unsupported manifest schema {schema!r}: this verifyprof reads {SCHEMA} and"
            f" {WORKLOAD_SCHEMA}",
            path,
        )
    return _manifest(path, {name: _find(data, keys) for name, keys in ALIASES.items()}, data)


def _manifest(path: Path, values: dict[str, Any], raw: dict[str, Any]) -> Manifest:
    """Check the types of what was found and build the record (one line naming the field if
    wrong)."""

    def number(name: str) -> float | None:
        value = values.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise VerifyprofError(f"manifest field {name!r} is not a number: {value!r}", path)
        return float(manifest_number(name, value, path, RESULT_KEYS.get(name)))  # in range

    survival = values.get("survival")
    if survival is not None and not (
        isinstance(survival, list)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in survival)
    ):
        raise VerifyprofError(
            f"manifest field 'survival' must be a list of numbers, got {survival!r}", path
        )
    if survival is not None:
        check_probabilities("manifest field 'survival'", survival, path)
    num_draft = number("num_draft")
    return Manifest(
        path=path,
        accept_len=number("accept_len"),
        baseline_tps=number("baseline_tps"),
        decode_ms=number("decode_ms"),
        tokens_per_s=number("tokens_per_s"),
        survival=tuple(float(v) for v in survival) if survival else None,
        num_draft=int(num_draft) if num_draft is not None else None,
        raw=raw,
    )


def to_tokens_per_verify(value: float, convention: str) -> float:
    """An accept length in ``convention`` as verifyprof's (tokens per verify step, bonus
    included)."""
    if convention not in ACCEPT_CONVENTIONS:
        raise ValueError(
            f"accept length convention must be one of {', '.join(ACCEPT_CONVENTIONS)}, not"
            f" {convention!r}"
        )
    return value + 1.0 if convention == "accepted_drafts" else value


def _workload_values(data: dict[str, Any], mode: str | None) -> dict[str, Any]:
    """The spec and decode runs of ``mode`` (else the first spec run's) in a workload summary."""
    runs = [r for r in data.get("runs", []) if isinstance(r, dict)]
    modes = [r.get("mode") for r in runs if r.get("kind") == "spec"]
    if mode is None or mode not in modes:
        mode = modes[0] if modes else None
    spec = next((r for r in runs if r.get("kind") == "spec" and r.get("mode") == mode), {})
    decode = next((r for r in runs if r.get("kind") == "decode" and r.get("mode") == mode), {})
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    acceptance = config.get("simulated_acceptance") or {}
    run = config.get("run") or {}
    decode_ms = decode.get("decode_ms") if isinstance(decode.get("decode_ms"), dict) else {}
    return {
        "accept_len": spec.get("accept_len"),
        "decode_ms": decode_ms.get("mean") if decode_ms.get("n") else None,
        "tokens_per_s": spec.get("tokens_per_s_per_request") or None,
        "survival": acceptance.get("survival") if isinstance(acceptance, dict) else None,
        "num_draft": (run.get("num_draft") or None) if isinstance(run, dict) else None,
    }
