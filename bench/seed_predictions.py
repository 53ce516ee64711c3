"""Predictions of ``bench_seed.py``'s captures against its measured processes (issue 26): from one
trace of the seed's configuration (plain decode and drafter graphed, verify eager) and one of the
all-graphed configuration, predict today's rate, plain decoding as the program runs it, the
verdict, the fix that moves the seed's setup to the graphed one, and k in {1, 2, 3, 4, 6} graphed;
compare with the unprofiled measurements of the same lease.

Predictions come only from each capture's breakdown and manifest (its anchor: the median of the
capture's own unprofiled baseline runs); the measured JSONs are read after, for the table.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import bench_cycle as bc

KS = (0, 1, 2, 3, 4, 6)
TODAY_PCT, K_PCT, SPREAD_PCT, BEST_PCT = 5.0, 10.0, 5.0, 3.0
TRACES = {  # capture: (its mode, the fixes that reach graph mode from it)
    "C1": ("seed", ("cuda_graph_verify",)),
    "C2": ("graph", ()),
}


def measured(root: Path, batch: int = 1) -> dict[tuple[str, int], dict]:
    """Per (mode, k) at ``batch``: every round's tok/s per request over every process, their
    mean, cycle and spread (max - min over mean)."""
    rounds: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    for path in sorted(root.glob("measure-P*.json")):
        for r in json.loads(path.read_text())["runs"]:
            if r.get("batch", 1) != batch:
                continue
            key = (r["mode"], r["num_draft"])
            for cyc, acc in zip(r["round_cycle_ms"], r["round_accept_len"]):
                rounds.setdefault(key, []).append((acc / cyc * 1e3, cyc, acc))
    out = {}
    for key, values in rounds.items():
        rates = [v[0] for v in values]
        mean = statistics.mean(rates)
        out[key] = {
            "tokens_per_s": mean,
            "cycle_ms": statistics.mean(v[1] for v in values),
            "accept_len": statistics.mean(v[2] for v in values),
            "spread_pct": 100 * (max(rates) - min(rates)) / mean if len(rates) > 1 else None,
            "rounds": len(rates),
        }
    return out


def verdict_of(run) -> dict:
    """The verdict the tool prints for a capture's run: its decision and plain decoding."""
    ranking = run.ranking
    plain = ranking.plain
    return {
        "decision": ranking.verdict.decision,
        "speculate": None
        if plain is None or plain.unmeasured_flip
        else not plain.speculation_loses,
        "plain_tokens_per_s": plain.tokens_per_s if plain else None,
        "plain_source": plain.source if plain else None,
        "current_tokens_per_s": ranking.current.tokens_per_s,
    }


def rows(root: Path) -> tuple[list[dict], list[dict]]:
    """(prediction rows, verdict rows) of both captures against the measurements."""
    truth = measured(root)
    out, verdicts = [], []
    for name, (mode, fixes) in TRACES.items():
        folder = root / name
        if not (folder / "manifest.json").exists():
            continue
        run = bc.run_of(folder)
        prep = run.prepared
        v = verdict_of(run)
        m_spec, m_plain = truth.get((mode, 4)), truth.get((mode, 0))
        if m_spec and m_plain:
            truly = m_spec["tokens_per_s"] > m_plain["tokens_per_s"]
            right = v["speculate"] == truly  # a verdict led by an assumption decides nothing
            verdicts.append({"trace": name, **v, "measured_speculate": truly, "right": right})
        for target_mode, applied in ((mode, ()), ("graph", fixes)) if fixes else ((mode, ()),):
            for k in KS if target_mode == "graph" else (0, 4):
                m = truth.get((target_mode, k))
                if m is None:
                    continue
                cycle, rate, acc, note = bc.predict(prep, applied, k)
                out.append(
                    {
                        "trace": name,
                        "mode": target_mode,
                        "num_draft": k,
                        "fixes": list(applied),
                        "predicted_tokens_per_s": rate,
                        "measured_tokens_per_s": m["tokens_per_s"],
                        "error_pct": 100 * (rate / m["tokens_per_s"] - 1),
                        "predicted_cycle_ms": cycle,
                        "measured_cycle_ms": m["cycle_ms"],
                        "predicted_accept_len": acc,
                        "measured_accept_len": m["accept_len"],
                        "spread_pct": m["spread_pct"],
                        "note": note,
                    }
                )
    return out, verdicts


def best_checks(table: list[dict]) -> list[dict]:
    """Per trace, graph mode: the predicted best k against the measured best (within 3%)."""
    out = []
    for name in sorted({r["trace"] for r in table}):
        mine = [r for r in table if r["trace"] == name and r["mode"] == "graph"]
        if not mine:
            continue
        pred = max(mine, key=lambda r: r["predicted_tokens_per_s"])
        meas = max(mine, key=lambda r: r["measured_tokens_per_s"])
        gap = 100 * (1 - pred["measured_tokens_per_s"] / meas["measured_tokens_per_s"])
        out.append(
            {
                "trace": name,
                "predicted_best_k": pred["num_draft"],
                "measured_best_k": meas["num_draft"],
                "gap_pct": gap,
                "ok": gap <= BEST_PCT,
            }
        )
    return out


def report(root: Path) -> tuple[str, dict]:
    """The table as text and the JSON of every row and check."""
    table, verdicts = rows(root)
    best = best_checks(table)
    lines = [
        "trace mode   k  fixes              predicted  measured   error  spread",
    ]
    for r in table:
        spread = f"{r['spread_pct']:.1f}%" if r["spread_pct"] is not None else "-"
        lines.append(
            f"{r['trace']:<5} {r['mode']:<6} {r['num_draft']:>2}  {'+'.join(r['fixes']) or '-':<18}"
            f" {r['predicted_tokens_per_s']:9.1f} {r['measured_tokens_per_s']:9.1f}"
            f" {r['error_pct']:+6.1f}%  {spread}"
        )
    today = [r for r in table if not r["fixes"] and r["num_draft"] == 4]
    held = [r for r in table if r["spread_pct"] is not None and r["spread_pct"] < SPREAD_PCT]
    checks = {
        "verdicts_right": all(v["right"] for v in verdicts) and bool(verdicts),
        "today_within_5pct": all(abs(r["error_pct"]) <= TODAY_PCT for r in today) and bool(today),
        "k_within_10pct_where_spread_under_5pct": all(abs(r["error_pct"]) <= K_PCT for r in held),
        "best_k": all(b["ok"] for b in best) and bool(best),
    }
    for v in verdicts:
        lines.append(
            f"verdict {v['trace']}: {'speculate' if v['speculate'] else 'plain decoding'}"
            f" (plain {v['plain_tokens_per_s']:.1f} tok/s: {v['plain_source']}):"
            f" {'right' if v['right'] else 'WRONG'}"
        )
    for b in best:
        lines.append(
            f"best k {b['trace']}: predicted {b['predicted_best_k']}, measured"
            f" {b['measured_best_k']} ({b['gap_pct']:.1f}% below the best): "
            + ("ok" if b["ok"] else "MISSED")
        )
    lines += [f"{k}: {'yes' if v else 'NO'}" for k, v in checks.items()]
    return "\n".join(lines), {"rows": table, "verdicts": verdicts, "best": best, "checks": checks}
