"""Issues 41 and 42's GPU proofs against their unprofiled truth, from what is committed.

For each program, the product's path on its capture folder as a user types it (``whatif DIR
--model M``: :func:`verifyprof.pipeline.open_run` of the folder's captures, every one in it),
then every measured (batch, k) of its sweeps against the load curve's prediction, and the issue's
targets with met / missed. Data: ``bench/results/external_h100`` (issue 41: program A),
``external_h100_b2`` (program B, captured at batch 1, 8 and 32; B's first lease, one capture, is
in git history), ``external_h100_b4`` (B again, captured at 1, 4, 16 and 64 on the sweep's own
workload, a noisy lease) and ``external_h100_b5`` (B4's design in a quiet lease, judged blind: no
model change between its lease and its verdict), programs the project did not write, and
``bench/results/moe_spec_h100`` (issue 42: the project's MoE; ``moe_spec_h100_2`` its
re-measurement, ``--moe-dir``).

    python bench/bench_external.py                  # A, B2, B4, B5, B6 and MoE
    python bench/bench_external.py --only A --json out.json
    python bench/bench_external.py --only MoE --moe-dir DIR   # another lease's MoE campaign
                                    # (bench_moe_campaign.py's run unpacked: captures/, measure-M*)

Targets, per program:

* issue 41 (A, B2, B4, B5): >= 90% of points within their band + 3% + their measured spread; median
  |error| <= 10%; at every batch the predicted best k's measured rate within 3% of the measured
  best;
* issue 42 (MoE): at every batch the predicted best (plain decoding is k = 0) measures within 5%
  of the measured best; >= 90% of points within their band (+ their measured spread, as
  ``bench_load.compare`` counts it); whatif's verdict agrees with the measured best today.

A point's spread is (max - min) / mean of its runs over both processes and every round. Exit
code 1 when a target is missed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_load  # noqa: E402 - compare, table, measured_files, summarised

from verifyprof.contracts.errors import VerifyprofError  # noqa: E402
from verifyprof.pipeline import WhatifOptions, open_run  # noqa: E402

EXT = ROOT / "bench" / "results" / "external_h100"
EXT_B2 = ROOT / "bench" / "results" / "external_h100_b2"  # B again: batches 1, 8 and 32
EXT_B4 = ROOT / "bench" / "results" / "external_h100_b4"  # B on the sweep's workload: 1, 4, 16, 64
EXT_B5 = ROOT / "bench" / "results" / "external_h100_b5"  # B4's design, a quiet lease, judged blind
EXT_B6 = ROOT / "bench" / "results" / "external_h100_b6"  # six samples an anchor, judged blind
EXT_B7 = ROOT / "bench" / "results" / "external_h100_b7"  # a short lease: batch 1-16, blind
EXT_B8 = ROOT / "bench" / "results" / "external_h100_b8"  # the whole grid, blind, six samples
MOE = ROOT / "bench" / "results" / "moe_spec_h100"
KS = (0, 1, 2, 3, 4, 5, 6)


@dataclass(frozen=True)
class Proof:
    """One program: its capture folder, model file, sweeps and the contexts it ran at (gpt-fast
    attends over its whole cache, prompt + max_new_tokens + k + 1 tokens; neither program says)."""

    name: str
    issue: int
    folder: Path
    model: Path
    sweeps: tuple[Path, ...]
    batches: tuple[int, ...]
    capture_context: float | None  # what --capture-context declares (None: the capture says)
    sweep_context: float
    load_options: tuple[tuple[str, str], ...] = ()  # what --load-option declares


def sweep_workload_b(key: str, how: str, folder: Path, sweeps=("sweepB1", "sweepB2")) -> Proof:
    """Program B on the sweep's own workload (B4's design, and B5's and B6's leases): its
    captures in ``folder/captures-b``, its sweeps beside them, every batch 1..64 swept at context
    56 (18 + 32 new + 4 + 1, rounded up to gpt-fast's multiple of 8), which it was captured at."""
    return Proof(
        f"{key}: phillip-kravtsov/gpt-fast generate.py 6f68835 (batched, eager), the sweep's"
        f" workload, {how}",
        41,
        folder / "captures-b",
        ROOT / "bench/models/gptfast-7b.toml",
        tuple(folder / f"{name}.json" for name in sweeps),
        (1, 2, 4, 8, 16, 32, 64),
        56.0,
        56.0,
    )


PROOFS = {
    "A": Proof(
        "A: pytorch-labs/gpt-fast generate.py bc04265 (batch 1, eager)",
        41,
        EXT / "captures-a",
        ROOT / "bench/models/gptfast-7b.toml",
        (EXT / "sweepA1.json", EXT / "sweepA2.json"),
        (1,),
        85.0,  # 18-token prompt + 64 new + k + 1
        120.0,  # 18 + 100 new + k + 1
    ),
    "B2": Proof(
        "B2: phillip-kravtsov/gpt-fast generate.py 6f68835 (batched, eager), captured at 1, 8, 32",
        41,
        EXT_B2 / "captures-b",
        ROOT / "bench/models/gptfast-7b.toml",
        (EXT_B2 / "sweepB1.json", EXT_B2 / "sweepB2.json"),
        (1, 2, 4, 8, 16, 32, 64),
        71.0,  # 18 + 48 new + 4 + 1
        56.0,  # 18 + 32 new + k + 1, rounded up to gpt-fast's multiple of 8
    ),
    "B4": sweep_workload_b(
        "B4", "captured at 1, 4, 16, 64", EXT_B4, ("sweepB1", "sweepB2", "sweepB2b")
    ),
    "B5": sweep_workload_b(
        "B5", "captured at 1, 4, 16, 64; blind (no model change after its lease)", EXT_B5
    ),
    "B6": sweep_workload_b(
        "B6",
        "six samples a run, captured at 1, 4, 16 (64 cut by the call's deadline); blind (the"
        " model as at 588b36d)",
        EXT_B6,
    ),
    "B7": replace(
        sweep_workload_b(
            "B7",
            "six samples a run, captured at 1 and 4, swept at 1-16 (a lease of 400 s); blind (the"
            " model as at 2d82dec: rate bands carry the anchor's standard error)",
            EXT_B7,
            ("sweepB1", "sweepB2", "sweepB1-8-16", "sweepB2-8-16"),
        ),
        batches=(1, 2, 4, 8, 16),
    ),
    "B8": replace(
        sweep_workload_b(
            "B8",
            "six samples a run, captured at 1, 4, 16 and 64 (64 by a second capture --batches"
            " into its own folder), swept at 1-64; blind (the model as at 02c8f6f)",
            EXT_B8,
            ("sweepB1", "sweepB2", "sweepB1-32-64", "sweepB2-32-64"),
        ),
        # the second capture's --prompts is its own folder's copy of the same file
        load_options=(("--prompts", "none"),),
    ),
    "MoE": Proof(
        "MoE: bench/programs/moe_spec.py (64 experts top-6, grouped GEMM, CUDA graphs)",
        42,
        MOE / "captures",
        ROOT / "bench/models/moe-spec-v2lite.toml",
        (MOE / "measure-Ma.json", MOE / "measure-Mb.json"),
        (1, 2, 4, 8, 16, 32, 64),
        None,  # the program reports its context (512)
        512.0,
    ),
}


def sweep_rates(paths: tuple[Path, ...], context: float) -> dict[tuple[float, int, int], list]:
    """Per (context, batch, k): every run's tokens/s per request, over both processes and every
    round: gptfast_sweep.py's JSON (``rows``), else hf_chain's (``runs``, bench_load reads it)."""
    if "runs" in json.loads(paths[0].read_text()):
        return bench_load.measured_files(list(paths))
    out: dict[tuple[float, int, int], list[float]] = {}
    for path in paths:
        for r in json.loads(path.read_text())["rows"]:
            key = (context, int(r["batch"]), int(r["k"]))
            out.setdefault(key, []).append(float(r["tok_s_per_request"]))
    return out


def predict(p: Proof) -> dict[str, Any]:
    """The load curve ``whatif FOLDER --model M [--capture-context N] --context SWEEP`` gives."""
    o = WhatifOptions(
        model=str(p.model),
        batches=p.batches,
        contexts=(p.sweep_context,),
        capture_contexts=((None, p.capture_context),) if p.capture_context else (),
        load_options=p.load_options,
    )
    # as the CLI does: a --batches / --num-drafts folder stands for its captures, today's first
    run = open_run([str(p.folder)], o, captures=True)
    prep = run.ranked(str(p.folder))  # of every capture's model (run.joined)
    load, why = run.load
    if load is None:
        raise VerifyprofError(why or "no load curve", p.folder)
    rows = {
        (curve.context, row.batch, pt["num_draft"]): pt
        for curve in load.curves
        for row in curve.rows
        for pt in row.points
        if pt["num_draft"] in KS
    }
    m = prep.scenario.measured
    captured = (
        sorted({(c.context, c.batch, c.num_draft) for c in m.captures})
        if m  # one capture (B: its batch-8 capture was lost): today's point
        else [(load.today_context, load.today_batch, load.current_k)]
    )
    return {"captured": captured, "accept_len": prep.scenario.accept_len, "rows": rows}


def verdict(p: Proof) -> list[str]:
    """whatif's first screen as a user sees it: its verdict lines (up to 'Today:')."""
    cmd = [sys.executable, "-m", "verifyprof.cli", "whatif", str(p.folder), "--model", str(p.model)]
    if p.capture_context:
        cmd += ["--capture-context", f"{p.capture_context:g}"]
    for name, axis in p.load_options:
        cmd += [f"--load-option={name}={axis}"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode:
        raise VerifyprofError(f"whatif exited {out.returncode}: {out.stderr.strip()}", p.folder)
    lines = out.stdout.splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("Today")), len(lines))
    return lines[:end]


def verdict_k(lines: list[str]) -> int | None:
    """The draft count the verdict tells today (0: plain decoding), None if it says neither."""
    first = " ".join(lines).split("With the plan")[0]
    if "speculation off" in first.lower():
        return 0
    m = re.search(r"with k=(\d+)", first)
    return int(m.group(1)) if m else None


def targets(p: Proof, rows: list[dict], told: int | None, today_batch: int) -> dict[str, Any]:
    """The issue's targets on the compared rows: each with its number and met / missed."""
    pad = 0.03 if p.issue == 41 else 0.0
    inside = [abs(r["error"]) <= r["band"] + pad + r["spread"] for r in rows]
    short = {}
    for b in sorted({r["batch"] for r in rows}):
        here = [r for r in rows if r["batch"] == b]
        best = max(here, key=lambda r: r["measured"])
        chosen = max(here, key=lambda r: r["predicted"])
        short[b] = (chosen["k"], best["k"], 1 - chosen["measured"] / best["measured"])
    best_within = 0.03 if p.issue == 41 else 0.05
    out: dict[str, Any] = {
        "within_band": (sum(inside), len(inside), sum(inside) >= 0.9 * len(inside)),
        "best_k": (short, all(s <= best_within for _, _, s in short.values())),
    }
    if p.issue == 41:
        med = statistics.median(abs(r["error"]) for r in rows)
        out["median_error"] = (med, med <= 0.10)
    else:
        today = max((r for r in rows if r["batch"] == today_batch), key=lambda r: r["measured"])
        out["verdict"] = (told, today["k"], told == today["k"])
    return out


def report(p: Proof, pred: dict, res: dict, lines: list[str], t: dict) -> None:
    pad = "+ 3% " if p.issue == 41 else ""
    print(f"\n## {p.name} (issue {p.issue})")
    print(
        "captures: "
        + ", ".join(f"context {c:g} batch {b} k {k}" for c, b, k in pred["captured"])
        + f"; accept length {pred['accept_len']:.3f}; sweeps at context {p.sweep_context:g}"
    )
    print("whatif: " + "\n        ".join(lines))
    print(bench_load.table(res))
    n_in, n, ok = t["within_band"]
    print(
        f"target: within band {pad}+ spread: {n_in} of {n} ({100 * n_in / n:.1f}%, >= 90%):"
        f" {'met' if ok else 'MISSED'}"
    )
    if "median_error" in t:
        med, ok = t["median_error"]
        print(f"target: median |error| {100 * med:.1f}% (<= 10%): {'met' if ok else 'MISSED'}")
    short, ok = t["best_k"]
    within = "3%" if p.issue == 41 else "5%"
    parts = [f"batch {b}: k={c} vs k={m} {100 * s:.1f}%" for b, (c, m, s) in short.items()]
    print(
        f"target: predicted best within {within} of the measured best:"
        f" {'met' if ok else 'MISSED'} ({'; '.join(parts)})"
    )
    told = verdict_k(lines)
    today_best = short[min(short)][1]
    if "verdict" in t:
        told, best, ok = t["verdict"]
        print(
            f"target: verdict k={told} vs measured best today k={best}: {'met' if ok else 'MISSED'}"
        )
    else:
        print(f"verdict (not a target of issue 41): k={told}; measured best today k={today_best}")


def run(key: str) -> dict[str, Any]:
    p = PROOFS[key]
    pred = predict(p)
    meas = bench_load.summarised(sweep_rates(p.sweeps, p.sweep_context))
    res = bench_load.compare(pred, meas)
    lines = verdict(p)
    today_batch = pred["captured"][0][1] if pred["captured"] else 1
    t = targets(p, res["rows"], verdict_k(lines), today_batch)
    report(p, pred, res, lines, t)
    missed = [name for name, v in t.items() if v[-1] is False]
    return {"verdict": lines, "rows": res["rows"], "targets": t, "missed": missed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="A,B2,B4,B5,B6,B7,B8,MoE", help="programs: A, B2, B4-B8, MoE")
    ap.add_argument("--json", type=Path, help="write every table and target here")
    ap.add_argument("--moe-dir", type=Path, help="the MoE's captures/ and measure-M*.json here")
    a = ap.parse_args()
    if a.moe_dir is not None:  # another lease of the same campaign: its own captures and sweeps
        sweeps = tuple(sorted(a.moe_dir.glob("measure-M*.json")))
        PROOFS["MoE"] = replace(PROOFS["MoE"], folder=a.moe_dir / "captures", sweeps=sweeps)
    keys = [k for k in a.only.split(",") if k]
    if not keys or set(keys) - set(PROOFS):
        print(f"bench_external: --only takes {', '.join(PROOFS)}", file=sys.stderr)
        return 2
    out = {}
    try:
        for key in keys:
            out[key] = run(key)
    except (VerifyprofError, OSError, KeyError, ValueError) as err:
        print(f"bench_external: {err}", file=sys.stderr)
        return 2
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str) + "\n")
    missed = {k: v["missed"] for k, v in out.items() if v["missed"]}
    print("\nmissed: " + (json.dumps(missed) if missed else "none"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
