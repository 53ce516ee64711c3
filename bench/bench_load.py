"""The load curve against the H200, out of sample (issue 28 item 5).

From captures of one chain program in CUDA-graph mode at batch 1 (and, when there is one, at
batch 8), predict tokens/s at other batches and draft counts, and compare with unprofiled
measurements of the same program that the prediction never saw
(``bench/bench_seed.py``: ``measure-P3*.json``, batch {1, 4, 16, 64} x k {0, 1, 2, 4}).

How the captures are used (``verifyprof.model.decision.load``): the batch-1 capture is today's
cycle (its manifest's accept length, its width sweep); the batch-8 capture adds its width sweep
to the measured verify over tokens per forward (batch x width, pooled with batch 1's) and, per
part of the cycle (draft, accept, ...), the GPU time one more request adds. Past the last
measured tokens the verify moves by the roofline (``--model``, ``--hardware``).

    python bench/bench_load.py --from DIR             # DIR: capture folders + measure-*.json
    python bench/bench_load.py --from DIR --measured M1.json M2.json --json OUT.json
    python bench/bench_load.py --from traces/workload-dense-graph --model workload \\
        --batches 1,4,16,64 --ks 0,1,2,4                # predictions only (no measurements)

Targets: at each measured batch the predicted best k is the measured best or within 3% of it;
the batch from which plain decoding wins is within one listed batch of the measured one; rates
within 10% where the measured spread (max - min over the mean of the rounds) is under 5%.
Exit code 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from verifyprof.contracts.errors import VerifyprofError  # noqa: E402
from verifyprof.model.cycle.width_fit import fit_widths  # noqa: E402
from verifyprof.model.decision.load import load_curve  # noqa: E402
from verifyprof.model.decision.whatif import WhatifOptions  # noqa: E402
from verifyprof.model.fixes.batch import busy_by_part, slopes_between  # noqa: E402
from verifyprof.model.inputs.hardware import load_hardware  # noqa: E402
from verifyprof.model.inputs.model_config import load_model_config  # noqa: E402
from verifyprof.pipeline import (
    breakdown_frame,  # noqa: E402
    prepared_of,  # noqa: E402
)

MODEL = ROOT / "bench" / "models" / "hf-chain-7b.toml"
CONTEXT = 256  # hf_chain.py's --context default
TRACE_NAMES = ("trace.sqlite.gz", "capture.sqlite.gz", "trace.sqlite", "breakdown.json")
BEST_WITHIN, RATE_WITHIN, SPREAD_UNDER = 0.03, 0.10, 0.05


def captures(folder: Path) -> list[Path]:
    """Capture folders (a manifest and a trace or breakdown JSON): ``folder`` or its children."""
    found = [d for d in [folder, *sorted(folder.iterdir())] if d.is_dir() and _trace(d)]
    if not found:
        raise VerifyprofError("no capture folder (manifest.json and a trace) in it", folder)
    return found


def _trace(folder: Path) -> Path | None:
    if not (folder / "manifest.json").is_file():
        return None
    return next((folder / n for n in TRACE_NAMES if (folder / n).is_file()), None)


def prepared(folder: Path, context: float | None):
    frame = breakdown_frame(str(_trace(folder)))
    o = WhatifOptions(manifest=folder / "manifest.json", context=context)
    return prepared_of(frame, o)


def program_context(folder: Path) -> float:
    """The program's ``--context`` from its manifest's command (else hf_chain's default)."""
    raw = json.loads((folder / "manifest.json").read_text())
    target = (raw.get("command") or {}).get("target") or []
    if "--context" in target:
        return float(target[target.index("--context") + 1])
    run = ((raw.get("workload_summary") or {}).get("config") or {}).get("run") or {}
    return float(run.get("context") or CONTEXT)


def predict(
    folders: list[Path],
    model: str,
    batches: tuple[int, ...],
    ks: tuple[int, ...],
    hardware: str | None,
    mode: str | None = "graph",
) -> dict[str, Any]:
    """The load curve from the captures whose verify runs in ``mode`` (CUDA graphs, as servers
    decode; None: all): the smallest batch is today's, a larger one gives the part slopes and
    more measured tokens."""
    context = program_context(folders[0])
    runs = [prepared(f, context) for f in folders]
    runs = sorted(
        (r for r in runs if mode is None or r.profile.verify.mode == mode),
        key=lambda p: p.profile.batch or 1,
    )
    if not runs:
        raise VerifyprofError(f"no capture's verify runs in {mode} mode", folders[0].parent)
    base = runs[0]
    s = replace(base.scenario, model=load_model_config(model), context=context)
    if hardware:
        s = replace(s, hardware=load_hardware(hardware))
    tokens: dict[int, float] = {}
    for run in runs:
        b = run.profile.batch or 1
        tokens.update({b * w: t for w, t in run.profile.width_times.items()})
    slopes = ()
    if len(runs) > 1:
        top = runs[-1]
        slopes = slopes_between(
            (base.profile.batch or 1, busy_by_part(base.scenario)),
            (top.profile.batch or 1, busy_by_part(top.scenario)),
        )
    load = load_curve(base.profile, s, batches, (context,), ks, slopes, fit_widths(tokens))
    (curve,) = load.curves
    return {
        "captures": [str(f) for f in folders],
        "captured_batches": [r.profile.batch for r in runs],
        "context": context,
        "accept_len": base.scenario.accept_len,
        "num_draft": load.current_k,
        "notes": load.notes,
        "rows": {
            row.batch: {p["num_draft"]: p["tokens_per_s"] for p in row.points} for row in curve.rows
        },
        "stops_paying_at": curve.stops_paying_at,
    }


def measured(paths: list[Path]) -> dict[tuple[int, int], list[float]]:
    """Per (batch, k): every round's tokens/s per request, over every measurement file."""
    out: dict[tuple[int, int], list[float]] = {}
    for path in paths:
        for r in json.loads(path.read_text())["runs"]:
            rounds = r.get("round_tokens_per_s") or [r["tokens_per_s"]]
            batch = int(r.get("batch") or 1)  # hf_chain before --batch: one request
            out.setdefault((batch, int(r["num_draft"])), []).extend(v / batch for v in rounds)
    return out


def stop_batch(rates: dict[int, dict[int, float]]) -> int | None:
    """The first batch from which k = 0 is best at every larger batch (None: never)."""
    at = None
    for b in sorted(rates, reverse=True):
        if max(rates[b], key=rates[b].get) != 0:
            break
        at = b
    return at


def compare(pred: dict[str, Any], meas: dict[tuple[int, int], list[float]]) -> dict[str, Any]:
    batches = sorted({b for b, _ in meas})
    ks = sorted({k for _, k in meas})
    rows, checks = [], {"best_k": [], "rate": []}
    m_rates = {b: {k: statistics.mean(meas[b, k]) for k in ks if (b, k) in meas} for b in batches}
    p_rates = {b: {k: pred["rows"][b][k] for k in ks} for b in batches if b in pred["rows"]}
    for b in p_rates:
        m_best = max(m_rates[b], key=m_rates[b].get)
        p_best = max(p_rates[b], key=p_rates[b].get)
        shortfall = 1 - m_rates[b][p_best] / m_rates[b][m_best]
        checks["best_k"].append(shortfall <= BEST_WITHIN)
        for k in ks:
            vals = meas.get((b, k))
            if not vals:
                continue
            mean = statistics.mean(vals)
            spread = (max(vals) - min(vals)) / mean
            err = p_rates[b][k] / mean - 1
            if spread < SPREAD_UNDER:
                checks["rate"].append(abs(err) <= RATE_WITHIN)
            rows.append(
                {
                    "batch": b,
                    "k": k,
                    "predicted": p_rates[b][k],
                    "measured": mean,
                    "spread": spread,
                    "error": err,
                    "best": [k == p_best, k == m_best],
                }
            )
    stops = (stop_batch(p_rates), stop_batch(m_rates))
    index = {b: i for i, b in enumerate([*batches, None])}  # None: past the last batch
    stop_ok = abs(index[stops[0]] - index[stops[1]]) <= 1
    return {
        "rows": rows,
        "stops_paying_at": {"predicted": stops[0], "measured": stops[1]},
        "targets": {
            "best_k": all(checks["best_k"]),
            "stop_batch": stop_ok,
            "rates": all(checks["rate"]) if checks["rate"] else None,
            "rates_checked": len(checks["rate"]),
        },
    }


def table(result: dict[str, Any]) -> str:
    out = [
        "| batch | k | predicted tok/s per request | measured | spread | error | best |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        marks = ", ".join(w for w, on in zip(("pred", "meas"), r["best"]) if on)
        out.append(
            f"| {r['batch']} | {r['k']} | {r['predicted']:.1f} | {r['measured']:.1f} |"
            f" {100 * r['spread']:.1f}% | {100 * r['error']:+.1f}% | {marks} |"
        )
    return "\n".join(out)


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="src", type=Path, required=True, help="capture folder(s)")
    p.add_argument("--measured", type=Path, nargs="*", help="default: DIR/measure-P3*.json")
    p.add_argument("--model", default=str(MODEL), help="the target's model file")
    p.add_argument("--hardware", help="default: from the trace's GPU name")
    p.add_argument("--batches", default="1,4,16,64")
    p.add_argument("--ks", default="0,1,2,4")
    p.add_argument("--mode", default="graph", help="captures whose verify runs so (all: any)")
    p.add_argument("--json", type=Path, help="write predictions, comparison and targets here")
    args = p.parse_args()
    try:
        mode = None if args.mode == "all" else args.mode
        pred = predict(
            captures(args.src), args.model, ints(args.batches), ints(args.ks), args.hardware, mode
        )
    except VerifyprofError as err:
        print(f"bench_load: {err}", file=sys.stderr)
        return 2
    files = (
        args.measured if args.measured is not None else sorted(args.src.glob("measure-P3*.json"))
    )
    print(
        f"captures at batch {pred['captured_batches']}, context {pred['context']:g},"
        f" accept length {pred['accept_len']:.3f} at k = {pred['num_draft']}"
    )
    for b, rates in pred["rows"].items():
        best = max(rates, key=rates.get)
        print(
            f"  batch {b}: "
            + ", ".join(f"k={k} {v:.1f}" for k, v in rates.items())
            + f"  best k={best}"
        )
    print(f"  predicted: plain decoding wins from batch {pred['stops_paying_at']}")
    result: dict[str, Any] = {"prediction": pred}
    if files:
        result["comparison"] = cmp = compare(pred, measured(files))
        print(table(cmp))
        print(f"stops paying at: {cmp['stops_paying_at']}")
        print(f"targets: {cmp['targets']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if not files:
        return 0
    targets = result["comparison"]["targets"]
    return 0 if all(targets[k] is not False for k in ("best_k", "stop_batch", "rates")) else 1


if __name__ == "__main__":
    sys.exit(main())
