"""The host's process-to-process spread, pinned and not (issue 20's host-bound rows).

Runs the workload's eager k = 3 configuration (the traced one) as separate processes,
alternating unpinned and pinned to the GPU's NUMA-local CPUs, and prints each process's cycle and
the spread (max - min over mean) of each group. A prediction of a host-bound mode cannot be
checked closer than this spread.

    python bench/host_spread.py --repeat 3 --cpus local:4 --out OUT   # GPU machine
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from cycle_runs import K_TRACED, gpu_local_cpus, tau, workload_alpha  # noqa: E402


def cycles(path: Path) -> dict[str, float]:
    """Per run kind (spec, decode): ms per step from the workload's summary."""
    out = {}
    for r in json.loads(path.read_text())["runs"]:
        if r["kind"] in ("spec", "decode"):
            acc = r["accept_len"] if r["kind"] == "spec" else 1.0
            out[r["kind"]] = acc / r["tokens_per_s_per_request"] * 1e3
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cpus", default="local:4")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", default="60")
    args = p.parse_args()
    cpus = args.cpus
    if cpus.startswith("local:"):
        cpus = gpu_local_cpus(int(cpus.removeprefix("local:")))
    args.out.mkdir(parents=True, exist_ok=True)
    prog = [
        sys.executable, "-m", "verifyprof.workload", "--no-ranges", "--mode", "eager",
        "--num-draft", str(K_TRACED), "--accept-len", f"{tau(workload_alpha(), K_TRACED):.6f}",
        "--steps", args.steps, "--decode-steps", "20", "--widths", "",
    ]  # fmt: skip
    got: dict[str, list[dict[str, float]]] = {"unpinned": [], "pinned": []}
    for i in range(args.repeat):
        for group, prefix in (("unpinned", []), ("pinned", ["taskset", "-c", cpus])):
            out = args.out / f"{group}-{i}.json"
            subprocess.run(prefix + prog + ["--out", str(out)], check=True, capture_output=True)
            got[group].append(cycles(out))
            print(
                f"{group:8} {i}: "
                + "  ".join(f"{k} {v:7.3f} ms" for k, v in got[group][-1].items())
            )
    print(f"pinned to CPUs {cpus}")
    for group, runs in got.items():
        for kind in ("spec", "decode"):
            vals = [r[kind] for r in runs]
            mean = sum(vals) / len(vals)
            spread = 100 * (max(vals) - min(vals)) / mean
            print(f"{group:8} {kind:6} mean {mean:7.3f} ms  spread {spread:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
