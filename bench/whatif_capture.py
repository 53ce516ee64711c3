"""The workloads ``bench_whatif.py --run`` captures on the GPU machine (dense, and MoE), each in one
process that runs eager then graph mode under nsys, exported to a gzipped SQLite beside its
workload summary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NUM_DRAFT = 3
WIDTHS = "1,2,3,4,5,6,8,16"
WORKLOAD = [
    "--steps",
    "40",
    "--warmup",
    "5",
    "--decode-steps",
    "20",
    "--num-draft",
    str(NUM_DRAFT),
    "--accept-len",
    "2.0",
    "--widths",
    WIDTHS,
    "--sweep-steps",
    "10",
    "--batch",
    "1",
    "--context",
    "512",
]
MOE = [
    "--moe-experts",
    "64",
    "--moe-topk",
    "4",
    "--moe-intermediate",
    "1024",
    "--steps",
    "30",
    "--sweep-steps",
    "8",
]


def capture(out: Path, label: str, extra: list[str]) -> tuple[Path, Path]:
    """One workload process, eager then graph, under nsys; returns (gzipped SQLite, summary)."""
    if shutil.which("nsys") is None:
        raise SystemExit(
            "nsys not found: on the GPU machine run `source .device/nsys-env.sh` first"
        )
    out.mkdir(parents=True, exist_ok=True)
    rep, summary = out / f"{label}.nsys-rep", out / f"{label}.summary.json"
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    profile = [
        "nsys",
        "profile",
        "-t",
        "cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--cuda-graph-trace=node",
        "-f",
        "true",
        "-o",
        str(rep.with_suffix("")),
    ]
    workload = [
        sys.executable,
        "-m",
        "verifyprof.workload",
        "--mode",
        "eager,graph",
        *WORKLOAD,
        *extra,
        "--out",
        str(summary),
    ]
    started = time.time()
    with (out / f"{label}.log").open("w") as log:
        subprocess.run(
            profile + workload, check=True, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        sqlite = out / f"{label}.sqlite"
        subprocess.run(
            ["nsys", "export", "--type", "sqlite", "-f", "true", "-o", str(sqlite), str(rep)],
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    subprocess.run(["gzip", "-9", "-f", str(sqlite)], check=True)
    rep.unlink(missing_ok=True)
    print(f"[{label}] captured in {time.time() - started:.0f} s: {sqlite}.gz")
    return Path(f"{sqlite}.gz"), summary
