"""Statistics across steps: per step name, mean / p50 / p90 of wall time and of every phase,
the median step, and per-rank means. This is the ``summary`` of the breakdown JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.contracts.ranges import (
    ACCEPT,
    DECODE,
    DRAFT,
    DRAFT_EXTEND,
    PREFILL,
    SPEC_STEP,
    VERIFY,
)
from verifyprof.contracts.schema import COMM_COLUMNS, variant

# The verify step first: it is what the tool is about; then the rest of the cycle and the baseline.
GROUP_ORDER = (VERIFY, SPEC_STEP, DRAFT, ACCEPT, DRAFT_EXTEND, DECODE, PREFILL)



def _stats(values: np.ndarray) -> dict[str, int]:
    if len(values) == 0:
        return {"mean": 0, "p50": 0, "p90": 0}
    p50, p90 = np.percentile(values, [50, 90])
    return {"mean": int(round(float(values.mean()))), "p50": int(round(p50)), "p90": int(round(p90))}


def _column_stats(matrix: np.ndarray) -> list[dict[str, int]]:
    """``_stats`` of every column at once (one percentile pass for all phases)."""
    if len(matrix) == 0:
        return [{"mean": 0, "p50": 0, "p90": 0} for _ in range(matrix.shape[1])]
    p50, p90 = np.percentile(matrix, [50, 90], axis=0)
    means = matrix.mean(axis=0)
    return [{"mean": int(round(float(m))), "p50": int(round(a)), "p90": int(round(b))} for m, a, b in zip(means, p50, p90)]


def _group_order(names: list[str]) -> list[str]:
    known = [n for n in GROUP_ORDER if n in names]
    return known + sorted(n for n in names if n not in known)


MAX_VARIANTS = 12  # more distinct attribute sets than this (e.g. every batch size): group by name only


def summarize(rows: pd.DataFrame, collectives: pd.DataFrame | None = None, kernel_stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """Groups of comparable steps: same name and, unless a name has too many, same attributes.

    A verify at width 16 and one at width 4 are different measurements; averaging them hides
    exactly what a width sweep is for.
    """
    variants = pd.Series([variant(a) for a in rows["attrs"]], index=rows.index, dtype=object)
    groups = []
    for name in _group_order(rows["name"].unique().tolist()):  # a handful of step names
        in_name = rows["name"].to_numpy() == name
        kinds = pd.unique(variants[in_name])
        if len(kinds) > MAX_VARIANTS:
            groups.append(_group_summary(name, rows[in_name], ""))
            continue
        for kind in sorted(kinds, key=lambda v: (_tokens(v), v)):
            groups.append(_group_summary(name, rows[in_name & (variants.to_numpy() == kind)], kind))
    # both keys always present (the documented form): null when there is nothing to report
    summary: dict[str, Any] = {"unit": "ns", "groups": groups, "collectives": None, "collective_kernels": kernel_stats}
    if collectives is not None:
        from verifyprof.attribution.comm import summarize_calls

        summary["collectives"] = summarize_calls(collectives)
    return summary


def _tokens(kind: str) -> tuple[int, int]:
    """Sort key: the main loop's steps first, then sweeps by width."""
    attrs = dict(part.split("=", 1) for part in kind.split() if "=" in part)
    width = attrs.get("tokens", "0")
    return (1 if "sweep" in attrs else 0, int(width) if width.isdigit() else 0)


def _group_summary(name: str, group: pd.DataFrame, kind: str) -> dict[str, Any]:
    wall = group["wall_ns"].to_numpy()
    mean_wall = float(wall.mean()) if len(wall) else 0.0
    matrix = np.asfortranarray(group[list(phases.ALL)].to_numpy(dtype=np.int64))  # columns contiguous: each reduced as alone
    phase_stats = {}
    for phase, stats, mean in zip(phases.ALL, _column_stats(matrix), matrix.mean(axis=0) if len(matrix) else np.zeros(len(phases.ALL))):
        stats["share"] = round(float(mean) / mean_wall, 6) if mean_wall > 0 else 0.0
        phase_stats[phase] = stats
    median_pos = int(np.argmin(np.abs(wall - np.median(wall)))) if len(wall) else 0
    median = group.iloc[median_pos]
    by_rank = {}
    ranks = group["rank"].to_numpy()
    for rank in np.unique(ranks):  # a handful of ranks
        mine = ranks == rank
        means = np.asfortranarray(matrix[mine]).mean(axis=0)
        by_rank[str(int(rank))] = {
            "steps": int(mine.sum()),
            "wall_ns": _stats(wall[mine]),
            "phases": {p: int(round(float(m))) for p, m in zip(phases.ALL, means)},
        }
    out: dict[str, Any] = {
        "name": name,
        "variant": kind,
        "steps": int(group["step"].nunique()),
        "rows": int(len(group)),
        "devices": sorted(int(d) for d in group["device"].unique()),
        "modes": {str(k): int(v) for k, v in group["mode"].value_counts().items()},
        "wall_ns": _stats(wall),
        "cost_ns": _stats(group["cost_ns"].to_numpy()),
        "gpu_span_ns": _stats(group["gpu_span_ns"].to_numpy()),
        "kernels": _stats(group["kernels"].to_numpy()),
        "launches": _stats(group["launches"].to_numpy()),
        "phases": phase_stats,
        "totals": {p: _stats(group[f"total_{p}"].to_numpy()) for p in phases.TOTALS},
        "median_step": {
            "index": int(median["step"]),
            "device": int(median["device"]),
            "rank": int(median["rank"]),
            "wall_ns": int(median["wall_ns"]),
            "phases": {p: int(median[p]) for p in phases.ALL},
        },
        "by_rank": by_rank,
    }
    if all(c in group.columns for c in COMM_COLUMNS):
        out["comm"] = {c: _stats(group[c].to_numpy()) for c in COMM_COLUMNS}
    return out
