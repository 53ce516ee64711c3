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
from verifyprof.contracts.schema import COMM_COLUMNS, variants

# The verify step first: it is what the tool is about; then the rest of the cycle and the baseline.
GROUP_ORDER = (VERIFY, SPEC_STEP, DRAFT, ACCEPT, DRAFT_EXTEND, DECODE, PREFILL)


def _stats(values: np.ndarray) -> dict[str, int]:
    if len(values) == 0:
        return {"mean": 0, "p50": 0, "p90": 0}
    p50, p90 = np.percentile(values, [50, 90])
    return {
        "mean": int(round(float(values.mean()))),
        "p50": int(round(p50)),
        "p90": int(round(p90)),
    }


def _column_stats(matrix: np.ndarray) -> list[dict[str, int]]:
    """``_stats`` of every column at once (one percentile pass for all phases)."""
    if len(matrix) == 0:
        return [{"mean": 0, "p50": 0, "p90": 0} for _ in range(matrix.shape[1])]
    p50, p90 = np.percentile(matrix, [50, 90], axis=0)
    means = matrix.mean(axis=0)
    return [
        {"mean": int(round(float(m))), "p50": int(round(a)), "p90": int(round(b))}
        for m, a, b in zip(means, p50, p90)
    ]


def _group_order(names: list[str]) -> list[str]:
    known = [n for n in GROUP_ORDER if n in names]
    return known + sorted(n for n in names if n not in known)


MAX_VARIANTS = (
    12  # more distinct attribute sets than this (e.g. every batch size): group by name only
)


SCALARS = ("step", "device", "rank", "wall_ns", "cost_ns", "gpu_span_ns", "kernels", "launches")


def summarize(
    rows: pd.DataFrame,
    collectives: pd.DataFrame | None = None,
    kernel_stats: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Groups of comparable steps: same name and, unless a name has too many, same attributes.

    A verify at width 16 and one at width 4 are different measurements; averaging them hides
    exactly what a width sweep is for.
    """
    kinds_of = variants(rows["attrs"])
    names = rows["name"].to_numpy(object)
    columns = _Columns(rows)
    groups = []
    for name in _group_order(pd.unique(names).tolist()):  # a handful of step names
        in_name = names == name
        kinds = pd.unique(kinds_of[in_name])
        if len(kinds) > MAX_VARIANTS:
            groups.append(_group_summary(name, columns, np.flatnonzero(in_name), ""))
            continue
        for kind in sorted(kinds, key=lambda v: (_tokens(v), v)):
            at = np.flatnonzero(in_name & (kinds_of == kind))
            groups += [_group_summary(name, columns, part, kind) for part in _by_mode(columns, at)]
    # both keys always present (the documented form): null when there is nothing to report
    summary: dict[str, Any] = {
        "unit": "ns",
        "groups": groups,
        "collectives": None,
        "collective_kernels": kernel_stats,
    }
    if collectives is not None:
        from verifyprof.attribution.collective_waits import summarize_calls

        summary["collectives"] = summarize_calls(collectives)
    return summary


class _Columns:
    """The steps frame's columns as arrays, taken once: a group is a set of row positions."""

    def __init__(self, rows: pd.DataFrame) -> None:
        self.scalar = {c: rows[c].to_numpy(np.int64) for c in SCALARS}
        self.phases = rows[list(phases.ALL)].to_numpy(dtype=np.int64)
        self.totals = {p: rows[f"total_{p}"].to_numpy(np.int64) for p in phases.TOTALS}
        self.comm = (
            {c: rows[c].to_numpy(np.int64) for c in COMM_COLUMNS}
            if all(c in rows.columns for c in COMM_COLUMNS)
            else None
        )
        self.mode = rows["mode"].to_numpy(object)
        # step rows touched by the trace's integrity problems (absent from older JSON)
        self.integrity = rows["integrity"].to_numpy() if "integrity" in rows.columns else None


def _by_mode(columns: _Columns, at: np.ndarray) -> list[np.ndarray]:
    """Steps of one name and attributes that ran in several modes (untagged ranges around eager
    and graph steps): one group per mode, most steps first; an eager and a graph step are
    different measurements, never averaged into one row."""
    mode = columns.mode[at]
    known = mode != "none"
    kinds = pd.unique(mode[known])
    if len(kinds) <= 1:
        return [at]
    parts = [at[mode == m] for m in kinds]
    parts.sort(key=len, reverse=True)
    idle = at[~known]  # rows that launched nothing (device -1) join the largest group
    if len(idle):
        parts[0] = np.sort(np.concatenate([parts[0], idle]))
    return parts


def _tokens(kind: str) -> tuple[int, int]:
    """Sort key: the main loop's steps first, then sweeps by width."""
    attrs = dict(part.split("=", 1) for part in kind.split() if "=" in part)
    width = attrs.get("tokens", "0")
    return (1 if "sweep" in attrs else 0, int(width) if width.isdigit() else 0)


def _group_summary(name: str, columns: _Columns, at: np.ndarray, kind: str) -> dict[str, Any]:
    col = {c: v[at] for c, v in columns.scalar.items()}
    wall = col["wall_ns"]
    mean_wall = float(wall.mean()) if len(wall) else 0.0
    matrix = np.asfortranarray(columns.phases[at])  # columns contiguous: each reduced as alone
    phase_stats = {}
    for phase, stats, mean in zip(
        phases.ALL,
        _column_stats(matrix),
        matrix.mean(axis=0) if len(matrix) else np.zeros(len(phases.ALL)),
    ):
        stats["share"] = round(float(mean) / mean_wall, 6) if mean_wall > 0 else 0.0
        phase_stats[phase] = stats
    median = int(np.argmin(np.abs(wall - np.median(wall)))) if len(wall) else 0
    by_rank = {}
    ranks = col["rank"]
    for rank in np.unique(ranks):  # a handful of ranks
        mine = ranks == rank
        means = np.asfortranarray(matrix[mine]).mean(axis=0)
        by_rank[str(int(rank))] = {
            "steps": int(mine.sum()),
            "wall_ns": _stats(wall[mine]),
            "phases": {p: int(round(float(m))) for p, m in zip(phases.ALL, means)},
        }
    mode_codes, modes = pd.factorize(columns.mode[at])
    mode_counts = np.bincount(
        mode_codes[mode_codes >= 0], minlength=len(modes)
    )  # a missing mode: not counted
    by_count = np.argsort(
        -mode_counts, kind="stable"
    )  # as value_counts: most first, ties by first seen
    out: dict[str, Any] = {
        "name": name,
        "variant": kind,
        "steps": len(np.unique(col["step"])),
        "rows": len(at),
        "devices": np.unique(col["device"]).tolist(),
        "modes": {str(modes[i]): int(mode_counts[i]) for i in by_count},
        "mode": str(modes[by_count[0]]) if len(by_count) else "none",
        "wall_ns": _stats(wall),
        **{c: _stats(col[c]) for c in ("cost_ns", "gpu_span_ns", "kernels", "launches")},
        "phases": phase_stats,
        "totals": {p: _stats(v[at]) for p, v in columns.totals.items()},
        "median_step": {
            "index": int(col["step"][median]),
            "device": int(col["device"][median]),
            "rank": int(ranks[median]),
            "wall_ns": int(wall[median]),
            "phases": {p: int(v) for p, v in zip(phases.ALL, columns.phases[at[median]])},
        },
        "by_rank": by_rank,
    }
    if columns.comm is not None:
        out["comm"] = {c: _stats(v[at]) for c, v in columns.comm.items()}
    touched = 0 if columns.integrity is None else int(np.count_nonzero(columns.integrity[at]))
    if touched:  # only where there is something to say: a clean trace's groups stay as they were
        out["integrity_steps"] = touched
    return out
