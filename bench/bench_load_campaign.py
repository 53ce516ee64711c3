"""The load and draft-count curves measured on the H200 (issue 32, item 6): captures of a batched
chain-speculative program with full multi-head attention at two batches, two contexts and two
draft counts, and unprofiled measurements of every (context, batch, k) the model must predict,
on one lease. Data only: the predictions are the lead's bench.

The program: ``bench/programs/hf_chain.py --preset 7b-mha`` (a Llama-2-7B-like target with
kv_heads = heads = 32, a static KV cache read whole every forward, a 2 x 1024 drafter; graph
mode: every forward a CUDA graph; one host sync per cycle; i.i.d. acceptance alpha 0.7).

Captures (``verifyprof capture --gzip --baseline-run --baseline-repeat 3``, bench_seed's user
hooks with ``bs=``, 30 measured cycles, then the verify's width sweep 1,2,3,5,7,9 inside the
window; ``--decode-cmd``: the same program at k = 0, unprofiled, for plain decoding's step at that
load): C1 batch 1, k = 4, context 512; C8 batch 8, k = 4, context 512; C8L batch 8, k = 4,
context 2048; C1L batch 1, k = 4, context 2048; C1k1 batch 1, k = 1, context 512. The second
campaign (bench/results/load_mha_h200_2) ran C1, C8, C8L, C1L with ``--decode-cmd``; the first
(load_mha_h200) C1, C8, C1L, C1k1 without it.

Measurements (plain processes, no profiler): batch {1, 2, 4, 8, 16, 32, 64} x k {0..6} at context
512 and 2048; one process per context holds every batch in turn (a batch's caches and graphs
freed before the next), the batch's k in interleaved rounds; each context in two processes (a,
b), ordered M512a M2048a M512b M2048b after the captures.

    python bench/bench_load_campaign.py --run OUT --cpus local:4   # GPU (nsys on PATH)
    python bench/bench_load_campaign.py --run OUT --smoke          # the same, tiny, on the CPU
    python bench/bench_load_campaign.py --run OUT --only preflight # batch 1 and 64, context 2048
    python bench/bench_load_campaign.py --pack OUT DEST            # tarballs for $OUT
    python bench/bench_load_campaign.py --table DIR                # the measured tables

``measured(DIR)`` gives {(context, batch, k): (mean tok/s per request, spread %)} for other
benches; ``rows(DIR)`` every statistic of each configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_seed as bs  # noqa: E402 - the user hooks, environment, pack
import cycle_runs  # noqa: E402 - sh, capture, pinning (bench_cycle's)

ALPHA = 0.7
SWEEP = "1,2,3,5,7,9"
PRESET = ["--preset", "7b-mha"]
BATCHES = "1,2,4,8,16,32,64"
KS = "0,1,2,3,4,5,6"
CONTEXTS = (512, 2048)
CAPTURES = {  # name: (batch, k, context)
    "C1": (1, 4, 512),
    "C8": (8, 4, 512),
    "C8L": (8, 4, 2048),
    "C1L": (1, 4, 2048),
    "C1k1": (1, 1, 512),
    "C64": (64, 4, 512),  # the capture the console names past batch 8 (third campaign)
}
MEASURES = {f"M{c}{p}": c for p in "ab" for c in CONTEXTS}  # M512a M2048a M512b M2048b
DECODE = True  # every capture also measures plain decoding unprofiled (capture --decode-cmd)
STEPS = {"steps": "20", "warmup": "4", "rounds": "2"}  # per configuration and round
SMOKE = {  # --smoke: every command, tiny, on the CPU (kv heads = heads, as the preset)
    "batches": "1,2",
    "ks": "0,1,2",
    "contexts": {512: 48, 2048: 96},
    "steps": {"steps": "2", "warmup": "1", "rounds": "2"},
}


def program(smoke: bool) -> list[str]:
    return (
        cycle_runs.HF
        + (cycle_runs.SMOKE["hf"] + ["--kv-heads", "4"] if smoke else PRESET)
        + ["--mode", "graph"]
    )


def context_of(context: int, smoke: bool) -> int:
    return SMOKE["contexts"][context] if smoke else context


def run_captures(out: Path, smoke: bool, names: list[str]) -> None:
    hooks = [arg for hook in bs.HOOKS for arg in ("--hook", hook)]
    for name in names:
        batch, k, context = CAPTURES[name]
        prog = program(smoke) + [
            "--batch", str(batch), "--num-draft", str(k), "--alpha", str(ALPHA),
            "--context", str(context_of(context, smoke)), "--steps", "30", "--warmup", "6",
            "--sweep-widths", SWEEP, "--sweep-steps", "6",
        ]  # fmt: skip
        plain = program(smoke) + [
            "--batch", str(batch), "--num-draft", "0", "--alpha", str(ALPHA),
            "--context", str(context_of(context, smoke)), "--steps", "30", "--warmup", "6",
        ]  # fmt: skip
        decode = ["--decode-cmd", shlex.join(plain)] if DECODE else []  # pinned as its parent
        run(
            cycle_runs.capture(out / name, prog, hooks + decode, smoke), out / f"capture-{name}.log"
        )


def run_measures(out: Path, smoke: bool, names: list[str]) -> None:
    steps = SMOKE["steps"] if smoke else STEPS
    for name in names:
        prog = program(smoke) + [
            "--batch", SMOKE["batches"] if smoke else BATCHES,
            "--num-draft", SMOKE["ks"] if smoke else KS, "--alpha", str(ALPHA),
            "--context", str(context_of(MEASURES[name], smoke)),
            *(arg for key, value in steps.items() for arg in (f"--{key}", value)),
            "--out", str(out / f"measure-{name}.json"),
        ]  # fmt: skip
        run(prog, out / f"measure-{name}.log")


def preflight(out: Path, smoke: bool) -> bool:
    """Batch 1 and 64 at context 2048, k 0 and 6 (the largest caches and graphs), a few cycles:
    memory and cycle times before the lease's long calls."""
    prog = program(smoke) + ["--batch", "1,2" if smoke else "1,64", "--num-draft", "0,6"]
    prog += ["--context", str(context_of(2048, smoke)), "--steps", "4", "--warmup", "1"]
    return run(prog + ["--out", str(out / "preflight.json")], out / "preflight.log")


def run(cmd: list[str], log: Path) -> bool:
    print("$ " + " ".join(cycle_runs.PIN + cmd), flush=True)
    return cycle_runs.sh(cmd, log, 900)


def campaign(out: Path, smoke: bool, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    started = time.monotonic()
    if not (out / "environment.txt").exists():
        bs.environment(out)
    if "preflight" in only and not preflight(out, smoke):
        print("preflight failed", flush=True)
    run_captures(out, smoke, [name for name in CAPTURES if name in only])
    run_measures(out, smoke, [name for name in MEASURES if name in only])
    print(f"done in {time.monotonic() - started:.0f} s: {','.join(only)}", flush=True)


# ---- --table and measured(): the measurements ----------------------------------------------


def rows(folder: Path) -> list[dict]:
    """Each (context, batch, k) measured: tok/s per request per round of each process, their
    mean, tok/s of all rows, cycle ms, accept length, and the spreads ((max - min) / mean) of all
    rounds, of the rounds within a process (the larger), and between the processes' means."""
    runs: dict[tuple[int, int, int], dict[str, dict]] = {}
    for path in sorted(folder.glob("measure-M*.json")):
        proc = path.stem.removeprefix("measure-")
        for r in json.loads(path.read_text())["runs"]:
            runs.setdefault((r["context"], r["batch"], r["num_draft"]), {})[proc] = r
    out = []
    for (context, batch, k), procs in sorted(runs.items()):
        per_proc = {p: [t / batch for t in r["round_tokens_per_s"]] for p, r in procs.items()}
        every = [v for values in per_proc.values() for v in values]
        means = [statistics.mean(values) for values in per_proc.values()]
        cycles = [c for r in procs.values() for c in r["round_cycle_ms"]]
        accepts = [a for r in procs.values() for a in r["round_accept_len"]]
        out.append(
            {
                "context": context,
                "batch": batch,
                "k": k,
                "processes": sorted(procs),
                "tok_s_per_request_rounds": per_proc,
                "tok_s_per_request": statistics.mean(every),
                "tok_s": statistics.mean(every) * batch,
                "cycle_ms": statistics.mean(cycles),
                "accept_len": statistics.mean(accepts),
                "spread_pct": bs.spread_pct(every),
                "rounds_spread_pct": max(bs.spread_pct(v) for v in per_proc.values()),
                "process_spread_pct": bs.spread_pct(means),
            }
        )
    return out


def measured(folder: Path) -> dict[tuple[int, int, int], tuple[float, float]]:
    """{(context, batch, k): (mean tok/s per request over every round of both processes, the
    spread of those rounds in %)}."""
    return {
        (r["context"], r["batch"], r["k"]): (r["tok_s_per_request"], r["spread_pct"])
        for r in rows(folder)
    }


def best_ks(points: dict[tuple[int, int, int], tuple[float, float]], context: int, batch: int):
    """The measured best k at (context, batch) and every k within 3% of it."""
    rates = {k: v[0] for (c, b, k), v in points.items() if (c, b) == (context, batch)}
    best = max(rates, key=rates.get)
    return best, sorted(k for k, v in rates.items() if v >= 0.97 * rates[best])


def table(folder: Path) -> str:
    """Per context: tok/s per request (spread of every round of both processes) per batch x k,
    the best k and the k within 3% of it; then every configuration's statistics."""
    points, details = measured(folder), rows(folder)
    ks = sorted({k for _, _, k in points})
    lines = []
    for context in sorted({c for c, _, _ in points}):
        lines += [
            f"context {context} (tok/s per request, spread of all rounds of both processes):",
            "",
            "| batch | " + " | ".join(f"k = {k}" for k in ks) + " | best k | within 3% |",
            "|---" * (len(ks) + 3) + "|",
        ]
        for batch in sorted({b for c, b, _ in points if c == context}):
            cells = [
                f"{points[key][0]:.1f} ({points[key][1]:.1f}%)" if key in points else ""
                for key in ((context, batch, k) for k in ks)
            ]
            best, near = best_ks(points, context, batch)
            lines.append(
                f"| {batch} | " + " | ".join(cells) + f" | {best} | {','.join(map(str, near))} |"
            )
        lines.append("")
    lines += [
        "| context | batch | k | tok/s per request | tok/s | cycle ms | accept | spread |"
        " rounds | a vs b |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in details:
        lines.append(
            f"| {r['context']} | {r['batch']} | {r['k']} | {r['tok_s_per_request']:.1f} |"
            f" {r['tok_s']:.0f} | {r['cycle_ms']:.2f} | {r['accept_len']:.2f} |"
            f" {r['spread_pct']:.1f}% | {r['rounds_spread_pct']:.1f}% |"
            f" {r['process_spread_pct']:.1f}% |"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, help="GPU: capture and measure into this folder")
    names = ["preflight", *CAPTURES, *MEASURES]
    p.add_argument("--only", default=",".join(names[1:]), help=f"some of {','.join(names)}")
    p.add_argument("--smoke", action="store_true", help="--run's commands, tiny, on the CPU")
    p.add_argument("--cpus", help="pin every command (taskset -c), or 'local:N' (bench_cycle)")
    p.add_argument("--pack", nargs=2, type=Path, metavar=("SRC", "DEST"))
    p.add_argument("--table", type=Path, help="the measured tables of a --run folder")
    args = p.parse_args()
    if args.cpus:
        cycle_runs.pin(args.cpus)
    if args.run:
        only = args.only.split(",")
        if unknown := sorted(set(only) - set(names)):
            p.error(f"--only: unknown {','.join(unknown)} (known: {','.join(names)})")
        campaign(args.run, args.smoke, only)
        return 0
    if args.pack:
        bs.pack(*args.pack, names=tuple(CAPTURES))
        return 0
    if args.table:
        print(table(args.table))
        return 0
    p.error("give --run OUT, --pack SRC DEST or --table DIR")
    return 2


if __name__ == "__main__":
    sys.exit(main())
