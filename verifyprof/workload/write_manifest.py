"""``python -m verifyprof.workload.write_manifest DIR --target-from N -- ARGV...``: the manifest
of one trace.

Written by ``traces/capture_workload.sh`` beside each captured trace, after the SQLite export is
gzipped. It follows ``verifyprof.capture/1`` (:mod:`verifyprof.contracts.manifest`: its keys;
:mod:`verifyprof.contracts.manifest_records`: versions and GPU records) and adds the workload's
own summary under ``workload_summary``.
``ARGV`` is the whole profiler command; its part from index N on is the workload command. Needs no
torch: versions come from the summary, ``nvidia-smi`` and ``nsys``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from verifyprof.contracts.manifest import MANIFEST, document
from verifyprof.contracts.manifest_records import gpus, now_iso, trace_record, versions_record
from verifyprof.contracts.plumbing import outputs

MAX_GZ_BYTES = 16 * 2**20


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _verifyprof_version() -> str | None:
    try:
        import verifyprof

        return verifyprof.__version__
    except Exception:
        return None


def _results(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The headline numbers: the first speculative run's, else the first pipelined verify run's
    (no accept length there: those steps accept nothing)."""
    spec = next((r for r in runs if r["kind"] == "spec"), None)
    if spec is not None:
        return {
            "accept_len": spec["accept_len"],
            "accept_len_target": spec["accept_len_target"],
            "tokens_per_s": spec["tokens_per_s"],
            "tokens_per_s_per_request": spec["tokens_per_s_per_request"],
            "verify_ms_median": spec["verify_ms"]["median"],
            "mode": spec["mode"],
            "spec_verify_ct": spec["steps"],
        }
    pipelined = next((r for r in runs if r["kind"] == "verify_pipelined"), None)
    if pipelined is not None:
        return {
            "verify_ms_median": pipelined["verify_ms"]["median"],
            "mode": pipelined["mode"],
            "pipelined_verify_ct": pipelined["steps"],
        }
    return None


def build(
    directory: Path,
    argv: list[str],
    target_from: int,
    status: str,
    script: str = "traces/capture_workload.sh",
) -> dict[str, Any]:
    summary_path = directory / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    env = (summary or {}).get("env", {})
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name != MANIFEST)
    traces = [r for r in (trace_record(p, directory) for p in files) if r is not None]
    warnings = [
        f"{t['path']} is {t['bytes'] / 2**20:.1f} MiB gzipped, over 16 MiB: capture fewer steps"
        for t in traces
        if t["path"].endswith(".gz") and t["bytes"] > MAX_GZ_BYTES
    ]
    nsys_version = _run(["nsys", "--version"])
    return document(
        name=directory.name,
        status=status,
        error=None,
        mode="program",
        backend="nsys",
        started_at=None,
        finished_at=now_iso("seconds"),
        command={
            "verifyprof": None,
            "target": argv[target_from:],
            "profiler": argv,
            "script": script,
        },
        options=(summary or {}).get("config", {}).get("run"),
        versions=versions_record(
            verifyprof=_verifyprof_version(),
            python=env.get("python", platform.python_version()),
            platform=platform.platform(),
            nsys=nsys_version,
            torch=env.get("torch"),
            torch_cuda=env.get("cuda"),
            nccl=env.get("nccl"),
            nvtx_backend=env.get("nvtx_backend"),
            server=None,
            gpus=gpus(60.0),
        ),
        hooks=None,
        workload=None,
        results=_results((summary or {}).get("runs", [])),
        window={"kind": "cudaProfilerApi"},
        traces=traces,
        files=[{"path": p.name, "bytes": p.stat().st_size} for p in files],
        warnings=warnings,
        workload_summary=summary,
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own, command = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    p = argparse.ArgumentParser(prog="python -m verifyprof.workload.write_manifest")
    p.add_argument("directory", type=Path)
    p.add_argument("--target-from", type=int, default=0)
    p.add_argument("--status", default="ok")
    p.add_argument(
        "--script", default="traces/capture_workload.sh", help="the capture script, as recorded"
    )
    args = p.parse_args(own)
    manifest = build(args.directory, command, args.target_from, args.status, args.script)
    outputs.write_json(args.directory / MANIFEST, manifest, indent=1)
    for warning in manifest["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 1 if manifest["warnings"] else 0


if __name__ == "__main__":
    sys.exit(main())
