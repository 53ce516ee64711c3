"""What ``bench_cycle.py --run`` does on the GPU machine: the programs' captures (an eager and a
compiled trace of each) and their unprofiled measurements at every draft count and mode, each
command pinned to chosen CPUs where asked (``--cpus``), with its log. Also the run's settings
(the draft counts, the modes, the acceptance) that the predictions share, and the helpers
``bench_seed.py``, ``bench_load_campaign.py`` and ``host_spread.py`` use (``sh``, ``capture``,
``pin``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's verifyprof, before an installed one

K_TRACED = 3
KS = (1, 2, 3, 4, 6)
MODES = ("eager", "graph", "compile")
ALPHA = 0.7  # hf_chain's simulated i.i.d. acceptance; the workload's: solved from 2.0 at k=3
HF_HOOKS = [
    "hf_chain:ChainDecoder.cycle=spec_step;tokens=self.k+1",
    "hf_chain:ChainDecoder.propose=draft;tokens=self.k",
    "hf_chain:ChainDecoder.check=verify;tokens=arg0.shape[-1]+1",
    "hf_chain:ChainDecoder.take=accept",
]
HF = [sys.executable, "-W", "ignore", str(ROOT / "bench/programs/run_hf_chain.py")]
HF_STEPS = ["--steps", "40", "--warmup", "6"]
WL_STEPS = ["--steps", "30", "--widths", ""]
SMOKE = {  # --smoke: the same commands on the CPU, tiny, without a profiler (they run, that's all)
    "hf": [
        "--device",
        "cpu",
        "--layers",
        "2",
        "--hidden",
        "256",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--intermediate",
        "512",
        "--vocab",
        "1000",
        "--draft-hidden",
        "128",
    ],
    "workload": ["--preset", "tiny", "--device", "cpu"],
    "capture": ["--backend", "none"],
}


def workload_alpha() -> float:
    from verifyprof.workload.accept import solve_alpha

    return solve_alpha(2.0, K_TRACED)


def tau(alpha: float, k: int) -> float:
    return sum(alpha**i for i in range(k + 1))


# ---- --run: captures and measurements (GPU machine) ----------------------------------------


PIN: list[str] = []  # --cpus: every command under ``taskset -c CPUS``


def gpu_local_cpus(count: int) -> str:
    """The first ``count`` CPUs of the GPU's own NUMA node (sysfs ``local_cpulist`` of GPU 0): a
    host-bound launch loop on the far socket, or migrating between cores, runs slower and
    steadier measurements need the same cores for every process."""
    bus = subprocess.run(
        ["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
        capture_output=True, text=True, check=True,
    ).stdout.strip().lower()  # fmt: skip
    listed = Path(f"/sys/bus/pci/devices/{bus[-12:]}/local_cpulist").read_text().strip()
    cpus = []
    for part in listed.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return ",".join(map(str, cpus[:count]))


def pin(cpus: str) -> None:
    """Every later command under ``taskset -c CPUS`` (``local:N``: N CPUs local to the GPU)."""
    if cpus.startswith("local:"):
        cpus = gpu_local_cpus(int(cpus.removeprefix("local:")))
    PIN[:] = ["taskset", "-c", cpus]
    print(f"pinned to CPUs {cpus}", flush=True)


def sh(cmd: list[str], log: Path, timeout: float = 900) -> bool:
    started = time.monotonic()
    cmd = PIN + cmd
    with log.open("w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
    print(
        f"[{time.monotonic() - started:6.1f} s] {'ok' if code == 0 else f'FAILED {code}'}"
        f"  {log.name}",
        flush=True,
    )
    return code == 0


def capture(out: Path, program: list[str], extra: list[str], smoke: bool) -> list[str]:
    cli = [sys.executable, "-m", "verifyprof.cli", "capture", "--gzip", "--baseline-run"]
    cli += [] if smoke else ["--baseline-repeat", "3"]  # the median: processes differ by 30-40%
    return cli + (SMOKE["capture"] if smoke else []) + ["--out", str(out), *extra, "--", *program]


def run_workload(
    out: Path, smoke: bool = False, captures: bool = True, tag: str = "", measures: bool = True
) -> None:
    w = out / "workload"
    w.mkdir(parents=True, exist_ok=True)
    a = workload_alpha()
    wl = [sys.executable, "-m", "verifyprof.workload", *WL_STEPS]
    wl += SMOKE["workload"] if smoke else []
    for mode, decode in (("eager", "20"), ("compile", "0")) if captures else ():
        prog = wl + [
            "--mode",
            mode,
            "--num-draft",
            str(K_TRACED),
            "--accept-len",
            f"{tau(a, K_TRACED):.6f}",
            "--decode-steps",
            decode,
            "--out",
            str(w / mode / "workload.json"),
        ]
        sh(capture(w / mode, prog, [], smoke), w / f"capture-{mode}.log")
    for k in KS if measures else ():
        prog = wl + [
            "--no-ranges",
            "--mode",
            ",".join(MODES),
            "--num-draft",
            str(k),
            "--accept-len",
            f"{tau(a, k):.6f}",
            "--decode-steps",
            "20",
            "--out",
            str(w / f"measure-k{k}{tag}.json"),
        ]
        sh(prog, w / f"measure-k{k}{tag}.log")


def run_hf(out: Path, smoke: bool = False, parts: tuple[str, ...] = ("capture", *MODES)) -> None:
    h = out / "hf"
    h.mkdir(parents=True, exist_ok=True)
    hooks = [arg for hook in HF_HOOKS for arg in ("--hook", hook)]
    hf = HF + (SMOKE["hf"] if smoke else [])
    for mode in ("eager", "compile") if "capture" in parts else ():
        decode = " ".join(hf + ["--mode", mode, "--num-draft", "0", *HF_STEPS])
        prog = hf + ["--mode", mode, "--num-draft", str(K_TRACED), "--alpha", str(ALPHA), *HF_STEPS]
        sh(
            capture(h / mode, prog, hooks + ["--decode-cmd", decode], smoke),
            h / f"capture-{mode}.log",
        )
    for mode in [m for m in MODES if m in parts and (not smoke or m == "eager")]:
        # compile: one process per k (one process holding six compiled widths ran k=0 and k=3
        # 20-50% slower than processes holding one: bench/README); eager / graph: all k in
        # one process, in rounds (the host's speed drifts over seconds)
        groups = [[k] for k in (0, *KS)] if mode == "compile" else [[0, *KS]]
        for group in groups:
            tag = "" if len(groups) == 1 else f"-k{group[0]}"
            prog = hf + [
                "--mode", mode, "--num-draft", ",".join(map(str, group)), "--alpha", str(ALPHA),
                "--steps", "20", "--warmup", "4", "--rounds", "2" if len(group) == 1 else "3",
                "--out", str(h / f"measure-{mode}{tag}.json"),
            ]  # fmt: skip
            sh(prog, h / f"measure-{mode}{tag}.log", timeout=1200)
