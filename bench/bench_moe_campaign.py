"""Issue 42's GPU proof, the device half: captures of an MoE speculative program of the project's
own (``bench/programs/moe_spec.py``: 64 routed experts top-6 as one grouped GEMM, a shared
expert, a dense drafter, CUDA graphs, random weights) at two batches, and its unprofiled truths
at batch 1..64 x k 0..6 in two processes. Data only: the predictions are the lead's.

Parts, each one device command of a few minutes (``--only``), each packing its files into
``--pack DEST`` (``$OUT``: at most 8 files of 15 MiB, a larger one split into ``.partN``):

* ``captures``: ``verifyprof capture --batches 1,8 --gzip --baseline-run --baseline-repeat 3``
  with the user hooks below (``bs=``, ``tokens=``), k = 4, 30 measured cycles after 30 unprofiled
  ones in the same process (the program's ``unprofiled_tokens_per_s``), then the verify at widths
  1,2,3,5,7 x 6 inside the window (``sweep=1``); ``--decode-cmd``: the program at k = 0, same
  batch, unprofiled. Folders ``captures/batch-1`` and ``captures/batch-8``.
* ``sweep-a``, ``sweep-b`` (``sweeps``: both): one process each, every (batch, k) of
  {1,2,4,8,16,32,64} x {0..6}, a batch at a time (its graphs freed before the next), its k in
  2 interleaved rounds of 24 cycles: ``measure-Ma.json``, ``measure-Mb.json`` (hf_chain's format:
  ``bench_load_campaign.table`` reads them).
* ``preflight``: batch 1, 8 and 64 at k 0..6, a few cycles: memory, graphs, cycle times;
  ``--alphas DIR/preflight.json`` then prints, for each candidate ``--alpha``, every batch's best k
  and k = 4 against plain decoding (a cycle's cost does not depend on the simulated acceptance);
  ``--alpha auto`` after it in the same run folder uses the alpha that makes k = 1 or 2 win and
  k = 4 lose at the most batches (``moe_alpha.py``), and writes it to ``alpha.txt``.

Three device calls (``.device`` = /work/shared/device, carried), each within 9 minutes:

    source .device/nsys-env.sh >/dev/null; python3 bench/bench_moe_campaign.py --run /tmp/moe \
        --only preflight,sweep-a --alpha auto --cpus local:8 --pack $OUT   # prints "alpha: A"
    ... --only captures --alpha A ...
    ... --only sweep-b --alpha A ...
    python bench/bench_moe_campaign.py --run OUT --only captures,sweeps --smoke   # CPU, tiny
    python bench/bench_moe_campaign.py --table DIR      # the measured table of the sweeps
    python bench/bench_moe_campaign.py --alphas DIR/preflight.json  # which --alpha to use
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_load_campaign as blc  # noqa: E402 - the sweep table (hf_chain's format)
import bench_seed as bs  # noqa: E402 - environment, split
import cycle_runs  # noqa: E402 - sh, capture, pinning
import moe_alpha  # noqa: E402 - the acceptance rate from measured cycle times

ALPHA = 0.5  # without a preflight (--alpha auto): k = 4 loses only at low rates (moe_alpha)
K = 4
BATCHES = "1,8"
SWEEP_SEQS = "1,2,4,8,16,32,64"
SWEEP_KS = "0,1,2,3,4,5,6"
WIDTHS = "1,2,3,5,7"
PROMPT = 512
PROGRAM = [sys.executable, "-W", "ignore", str(HERE / "programs/run_moe_spec.py")]
HOOKS = [
    "moe_spec:SpecLoop.cycle=spec_step;tokens=self.k+1;bs=self.rows",
    "moe_spec:SpecLoop.propose=draft;tokens=self.k;bs=self.rows",
    "moe_spec:SpecLoop.check=verify;tokens=arg0.shape[-1]+1;bs=self.rows",
    "moe_spec:SpecLoop.take=accept;bs=self.rows",
    "moe_spec:SpecLoop.sweep_check=verify;tokens=arg0;sweep=1;bs=self.rows",
]
SMOKE = {
    "program": ["--preset", "tiny", "--device", "cpu"],
    "prompt": 32,
    "seqs": "1,2",
    "ks": "0,1,2",
    "cycles": ["--cycles", "2", "--warmup-cycles", "1"],
}
RUN: dict[str, float | None] = {"alpha": ALPHA}  # --alpha (None: auto)
PARTS = ("preflight", "captures", "sweep-a", "sweep-b")


def program(smoke: bool, *args: str) -> list[str]:
    prompt = SMOKE["prompt"] if smoke else PROMPT
    alpha = ALPHA if RUN["alpha"] is None else RUN["alpha"]  # a preflight's: any will do
    common = ["--alpha", str(alpha), "--prompt-len", str(prompt)]
    return PROGRAM + (SMOKE["program"] if smoke else []) + common + list(args)


def captures(out: Path, smoke: bool) -> bool:
    cycles = SMOKE["cycles"] if smoke else ["--cycles", "30", "--warmup-cycles", "4"]
    spec = program(
        smoke, "--num-seqs", "{batch}", "--draft-len", str(K), *cycles,
        "--unprofiled-cycles", cycles[1], "--verify-widths", WIDTHS, "--verify-reps", "6",
    )  # fmt: skip
    plain = program(smoke, "--num-seqs", "{batch}", "--draft-len", "0", *cycles)
    extra = [arg for hook in HOOKS for arg in ("--hook", hook)]
    extra += ["--batches", BATCHES, "--decode-cmd", shlex.join(plain)]
    return run(cycle_runs.capture(out / "captures", spec, extra, smoke), out / "capture.log")


def sweep(out: Path, smoke: bool, name: str) -> bool:
    prog = program(
        smoke, "--num-seqs", SMOKE["seqs"] if smoke else SWEEP_SEQS,
        "--draft-len", SMOKE["ks"] if smoke else SWEEP_KS, "--rounds", "2",
        *(SMOKE["cycles"] if smoke else ["--cycles", "24", "--warmup-cycles", "4"]),
        "--out", str(out / f"measure-{name}.json"),
    )  # fmt: skip
    return run(prog, out / f"measure-{name}.log")


def preflight(out: Path, smoke: bool) -> bool:
    """Batch 1, 8 and 64 at every k, a few cycles: memory, graphs, and the cycle times that
    ``--alphas`` turns into the candidate acceptance rates."""
    prog = program(
        smoke, "--num-seqs", "1,2" if smoke else "1,8,64",
        "--draft-len", SMOKE["ks"] if smoke else SWEEP_KS,
        "--cycles", "12", "--warmup-cycles", "3", "--out", str(out / "preflight.json"),
    )  # fmt: skip
    return run(prog, out / "preflight.log")


def run(cmd: list[str], log: Path) -> bool:
    """One command with its log; past 530 s it is stopped (a device command ends at 600 s, and
    the part still packs what it has)."""
    print("$ " + shlex.join(cycle_runs.PIN + cmd), flush=True)
    try:
        return cycle_runs.sh(cmd, log, 530)
    except subprocess.TimeoutExpired:
        print(f"TIMEOUT after 530 s: {log.name}", flush=True)
        return False


def campaign(out: Path, smoke: bool, parts: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if not (out / "environment.txt").exists():
        bs.environment(out)
    for part in parts:
        started = time.monotonic()
        if RUN["alpha"] is None and part != "preflight":
            RUN["alpha"] = auto_alpha(out)
        if part == "preflight":
            ok = preflight(out, smoke)
        elif part == "captures":
            ok = captures(out, smoke)
        else:
            ok = sweep(out, smoke, "M" + part[-1])
        print(f"{part}: {'ok' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s")


def auto_alpha(out: Path) -> float:
    """``--alpha auto``: chosen from this run folder's preflight (moe_alpha), written beside it
    (``alpha.txt``) so that a later part on the same machine uses the same."""
    chosen = out / "alpha.txt"
    if chosen.exists():
        alpha = float(chosen.read_text())
    elif (out / "preflight.json").exists():
        text, alpha = moe_alpha.report(out / "preflight.json")
        print(text, flush=True)
        (out / "alpha-choice.txt").write_text(text + "\n")
        chosen.write_text(f"{alpha}\n")
    else:
        alpha = ALPHA
        print(f"--alpha auto: no preflight in {out}; alpha {alpha}", flush=True)
    print(f"alpha: {alpha} (--alpha auto)", flush=True)
    return alpha


def pack(src: Path, dest: Path) -> list[Path]:
    """Each capture folder as ``batch-N.tgz`` (its SQLite export, not the .nsys-rep), the rest
    (logs, sweeps, environment) as ``measures.tgz``; a file over 15 MiB split into parts."""
    dest.mkdir(parents=True, exist_ok=True)
    made = []
    for folder in sorted((src / "captures").glob("batch-*")):
        tgz = dest / f"{folder.name}.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.name.endswith((".nsys-rep", ".qdstrm")):
                    tar.add(path, arcname=str(path.relative_to(src)))
        made.append(tgz)
    tgz = dest / "measures.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        for path in sorted(src.iterdir()):
            if path.is_file():
                tar.add(path, arcname=path.name)
    made.append(tgz)
    for path in made:
        bs.split(path)
    return made


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, help="run the parts into this folder")
    p.add_argument("--only", default="captures,sweeps", help=f"some of {','.join(PARTS)},sweeps")
    p.add_argument("--smoke", action="store_true", help="the same commands, tiny, on the CPU")
    p.add_argument("--cpus", help="pin every command (taskset -c), or 'local:N' (bench_cycle)")
    p.add_argument("--pack", type=Path, metavar="DEST", help="after --run: tarballs into DEST")
    p.add_argument("--table", type=Path, help="the measured table of a run folder's sweeps")
    p.add_argument("--alpha", default=str(ALPHA), help="acceptance rate, or auto (preflight's)")
    p.add_argument("--alphas", type=Path, help="a preflight's or sweep's JSON: alphas that fit")
    args = p.parse_args()
    if args.alphas:
        print(moe_alpha.report(args.alphas)[0])
        return 0
    if args.table:
        print(blc.table(args.table))
        return 0
    if not args.run:
        p.error("give --run DIR (with --only, --pack) or --table DIR")
    parts = args.only.replace("sweeps", "sweep-a,sweep-b").split(",")
    if unknown := sorted(set(parts) - set(PARTS)):
        p.error(f"--only: unknown {','.join(unknown)} (known: {','.join(PARTS)},sweeps)")
    if args.cpus:
        cycle_runs.pin(args.cpus)
    RUN["alpha"] = None if args.alpha == "auto" else float(args.alpha)
    started = time.monotonic()
    campaign(args.run, args.smoke, parts)
    if args.pack:
        for path in pack(args.run, args.pack):
            print(f"packed {path.name}")
    print(f"done in {time.monotonic() - started:.0f} s: {','.join(parts)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
