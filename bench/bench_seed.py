"""The seed's situation and the load curve on the H200 (issues 26 and 28): three captures of
``bench/programs/hf_chain.py --preset 7b`` (a weight-bound 7B-class target, a 2 x 1024 drafter)
and unprofiled measurements of the configurations the model must predict, on one lease.

Captures (``verifyprof capture --gzip --baseline-run --baseline-repeat 3``, user hooks on
hf_chain's methods with ``bs=``, k = 4, alpha 0.7, 30 measured cycles, then the verify's width
sweep 1,2,3,5,7,9 x 6 inside the profiled window, tagged ``sweep=1``; no decode ranges and no
``--decode-cmd``: the model predicts plain decoding):

* C1 ``seed`` mode, batch 1: plain decoding and the drafter as CUDA graphs, the verify eager;
* C2 ``graph`` mode, batch 1: every forward a CUDA graph ("all compiled": CUDA graphs rather than
  torch.compile, whose first compile of each shape costs minutes of device time);
* C3 ``graph`` mode, batch 8.

Measurements (plain processes, no profiler, 40 cycles per configuration per round, the
configurations of a process in interleaved rounds; the set run twice; the order on the device is
C1 P1 C2 P2 C3 P3 P1' P2' P3', so that a lease cut short keeps each capture beside its truths):

* P1 seed, batch 1, k in {0, 4} (k = 0: plain decoding as the seed runs it, graphed), and the
  eager verify at the sweep widths;
* P2 graph, batch 1, k in {0, 1, 2, 3, 4, 6}, and the graphed verify at the sweep widths;
* P3 graph, batch in {1, 4, 16, 64} x k in {0, 1, 2, 4}.

    python bench/bench_seed.py --run OUT --cpus local:4   # GPU machine (nsys on PATH)
    python bench/bench_seed.py --run OUT --smoke          # the same commands, tiny, on the CPU
    python bench/bench_seed.py --pack OUT DEST            # tar what is finished, for $OUT
    python bench/bench_seed.py --table OUT                # the measured table (markdown)
    python bench/bench_seed.py --from OUT                 # predictions against the measurements
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cycle_runs  # noqa: E402 - bench_cycle's capture/sh/pinning helpers

K = 4
ALPHA = 0.7
SWEEP = "1,2,3,5,7,9"
HOOKS = [
    "hf_chain:ChainDecoder.cycle=spec_step;tokens=self.k+1;bs=self.batch",
    "hf_chain:ChainDecoder.propose=draft;tokens=self.k;bs=self.batch",
    "hf_chain:ChainDecoder.check=verify;tokens=arg0.shape[-1]+1;bs=self.batch",
    "hf_chain:ChainDecoder.take=accept;bs=self.batch",
    "hf_chain:ChainDecoder.sweep_check=verify;tokens=arg0;sweep=1;bs=self.batch",
]
CAPTURES = {  # name: (mode, batch)
    "C1": ("seed", 1),
    "C2": ("graph", 1),
    "C3": ("graph", 8),
}
MEASURES = {  # name: (mode, batches, ks, rounds, sweep)
    "P1": ("seed", "1", "0,4", 3, True),
    "P2": ("graph", "1", "0,1,2,3,4,6", 3, True),
    # one process holding every batch's graphs ran out of the H200's memory at batch 64
    # (2026-12-03): batch 64 measures in a process of its own
    "P3a": ("graph", "1,4,16", "0,1,2,4", 2, False),
    "P3b": ("graph", "64", "0,1,2,4", 2, False),
}
PRESET = ["--preset", "7b"]


def program(smoke: bool) -> list[str]:
    return cycle_runs.HF + (cycle_runs.SMOKE["hf"] if smoke else PRESET)


def run_captures(out: Path, smoke: bool, names: list[str]) -> None:
    hooks = [arg for hook in HOOKS for arg in ("--hook", hook)]
    for name in names:
        mode, batch = CAPTURES[name]
        prog = program(smoke) + [
            "--mode", mode, "--batch", str(batch), "--num-draft", str(K), "--alpha", str(ALPHA),
            "--steps", "30", "--warmup", "6", "--sweep-widths", SWEEP, "--sweep-steps", "6",
        ]  # fmt: skip
        cycle_runs.sh(
            cycle_runs.capture(out / name, prog, hooks, smoke), out / f"capture-{name}.log", 900
        )


def run_measures(out: Path, smoke: bool, tag: str, names: list[str]) -> None:
    for name in names:
        mode, batches, ks, rounds, sweep = MEASURES[name]
        prog = program(smoke) + [
            "--mode", mode, "--batch", batches, "--num-draft", ks, "--alpha", str(ALPHA),
            "--steps", "40", "--warmup", "6", "--rounds", str(rounds),
            "--out", str(out / f"measure-{name}{tag}.json"),
        ]  # fmt: skip
        prog += ["--sweep-widths", SWEEP, "--sweep-steps", "10"] if sweep else []
        cycle_runs.sh(prog, out / f"measure-{name}{tag}.log", 900)


def environment(out: Path) -> None:
    """What ran where: GPU, driver, nsys, torch, transformers (beside the traces)."""
    import subprocess

    lines = []
    for cmd in (
        ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv"],
        ["nsys", "--version"],
        [sys.executable, "-c", "import torch, transformers; print(torch.__version__,"
         " transformers.__version__)"],
        ["nproc"],
    ):  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            lines.append(f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}")
        except (OSError, subprocess.TimeoutExpired) as err:
            lines.append(f"$ {' '.join(cmd)}\n{err}")
    (out / "environment.txt").write_text("\n".join(lines))


def preflight(out: Path, smoke: bool) -> bool:
    """A short run of seed mode (graphs and eager forwards) at batch 2 with a sweep, also the
    lease's first, slow process, kept out of the measurements: a program that fails here would
    fail every capture."""
    prog = program(smoke) + ["--num-draft", "0,4", "--batch", "2", "--steps", "3"]
    prog += ["--warmup", "1", "--sweep-widths", "1,2", "--sweep-steps", "1"]
    return all(
        cycle_runs.sh(prog + ["--mode", mode], out / f"preflight-{mode}.log", 300)
        for mode in ("seed",)
    )


def run(out: Path, smoke: bool, only: set[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    started = time.monotonic()
    environment(out)
    if not preflight(out, smoke):
        print("preflight failed: no captures, no measurements", flush=True)
        (out / "DONE").write_text("preflight failed\n")
        return
    pairs = (("C1", ["P1"]), ("C2", ["P2"]), ("C3", ["P3a", "P3b"]))
    for capture, measures in pairs:  # C1 P1 C2 P2 C3 P3, then P1' P2' P3' (P3: a and b)
        if "captures" in only:  # each capture beside its truths, should the lease end early
            run_captures(out, smoke, [capture])
        if "measures" in only:
            run_measures(out, smoke, "", measures)
    if "measures" in only:
        run_measures(out, smoke, "-again", list(MEASURES))
    print(f"campaign done in {time.monotonic() - started:.0f} s", flush=True)
    (out / "DONE").write_text("done\n")


LIMIT = 15 * 2**20  # under $OUT's 16 MiB a file


def pack(src: Path, dest: Path, names: tuple[str, ...] = tuple(CAPTURES)) -> None:
    """Each finished capture as ``C?.tgz`` (not its .nsys-rep: the SQLite export is the trace),
    once per lease (a marker remembers); the measurements and logs as ``measures.tgz`` (again
    each time); a file over 15 MiB is split into ``.partN``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        folder, marker = src / name, src / f".packed-{name}"
        if not (folder / "manifest.json").exists() or marker.exists():
            continue
        tgz = dest / f"{name}.tgz"
        with tarfile.open(tgz, "w:gz") as tar:
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.name.endswith((".nsys-rep", ".qdstrm")):
                    tar.add(path, arcname=str(path.relative_to(src)))
        marker.write_text("packed\n")
        split(tgz)
    with tarfile.open(dest / "measures.tgz", "w:gz") as tar:
        for path in sorted(src.iterdir()):
            if path.is_file() and not path.name.startswith(".packed"):
                tar.add(path, arcname=path.name)
    split(dest / "measures.tgz")


def split(path: Path) -> None:
    if path.stat().st_size <= LIMIT:
        return
    data = path.read_bytes()
    for i in range(0, len(data), LIMIT):
        path.with_name(f"{path.name}.part{i // LIMIT}").write_bytes(data[i : i + LIMIT])
    path.unlink()


def spread_pct(values: list[float]) -> float:
    return 100 * (max(values) - min(values)) / statistics.mean(values)


def table(src: Path) -> str:
    """Per configuration: tok/s (all rows) per round of each process, the mean over every
    round, the spread (max - min over mean) and the per-request rate (the mean over batch)."""
    rows: dict[tuple, list[float]] = {}
    for path in sorted(src.glob("measure-P*.json")):
        name = path.stem.removeprefix("measure-")
        doc = json.loads(path.read_text())
        for r in doc["runs"]:
            key = (name.split("-")[0], r["mode"], r["batch"], r["num_draft"])
            rows.setdefault(key, []).extend(r["round_tokens_per_s"])
    out = [
        "| process | mode | batch | k | tok/s per round (both processes) | mean | spread |"
        " tok/s per request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(rows):
        values = rows[key]
        mean = statistics.mean(values)
        each = ", ".join(f"{v:.1f}" for v in values)
        req = mean / key[2]  # every row in lockstep
        out.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {each} | {mean:.1f} |"
            f" {spread_pct(values):.1f}% | {req:.1f} |"
        )
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, help="GPU: capture and measure into this folder")
    p.add_argument("--only", default="captures,measures", help="captures, measures (a,b)")
    p.add_argument("--smoke", action="store_true", help="--run's commands, tiny, on the CPU")
    p.add_argument("--cpus", help="pin every command (taskset -c), or 'local:N' (bench_cycle)")
    p.add_argument("--pack", nargs=2, type=Path, metavar=("SRC", "DEST"))
    p.add_argument("--table", type=Path, help="the measured table of a --run folder")
    p.add_argument("--from", dest="source", type=Path, help="predictions against measurements")
    p.add_argument("--json", type=Path, help="with --from: every row and check as JSON")
    args = p.parse_args()
    if args.cpus:
        cycle_runs.pin(args.cpus)
    if args.run:
        run(args.run, args.smoke, set(args.only.split(",")))
        return 0
    if args.pack:
        pack(*args.pack)
        return 0
    if args.table:
        print(table(args.table))
        return 0
    if args.source:
        import seed_predictions

        text, doc = seed_predictions.report(args.source)
        print(text)
        if args.json:
            args.json.write_text(json.dumps(doc, indent=1) + "\n")
        return 0 if all(doc["checks"].values()) else 1
    p.error("give --run OUT, --pack SRC DEST, --table OUT or --from OUT")
    return 2


if __name__ == "__main__":
    sys.exit(main())
