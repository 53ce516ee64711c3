"""Kernel families between two runs: a kernel name without its template arguments, signature
and numbers (what stays when a tile size changes), and the families that appeared, vanished or
changed, from kernel tables the caller passes (name, phase, count, total_ns)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

FAMILY_ROWS = 12  # appeared / vanished / changed families listed at most
_TEMPLATE = re.compile(r"[<(\[].*$")
_ANONYMOUS = re.compile(r"\(anonymous namespace\)::")
_DIGITS = re.compile(r"\d+")


def kernel_family(name: str) -> str:
    """A kernel name without template arguments, signature and numbers: what stays when a tile size
    changes."""
    name = _ANONYMOUS.sub("", name.removeprefix("void ").strip())
    return _DIGITS.sub("N", _TEMPLATE.sub("", name)).strip() or name


def family_changes(before: pd.DataFrame | None, after: pd.DataFrame | None) -> dict[str, Any]:
    """Kernel families (from kernel tables: name, phase, count, total_ns) that appeared, vanished or
    changed."""
    if before is None or after is None:
        return {
            "available": False,
            "reason": "kernel names need traces on both sides (a breakdown JSON has none)",
        }

    def families(
        table: pd.DataFrame,
    ) -> pd.DataFrame:  # per (family, phase): a context rule can split a name
        grouped = table.assign(family=[kernel_family(n) for n in table["name"]])
        return grouped.groupby(["family", "phase"]).agg(
            count=("count", "sum"), total_ns=("total_ns", "sum")
        )

    b, a = families(before), families(after)
    joined = b.add_suffix("_before").join(a.add_suffix("_after"), how="outer")
    for col in ("count_before", "count_after", "total_ns_before", "total_ns_after"):
        joined[col] = joined[col].fillna(0).astype(np.int64)
    joined["delta_ns"] = joined["total_ns_after"] - joined["total_ns_before"]

    def rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
        return [
            {
                "family": str(f),
                "phase": str(phase),
                "count_before": int(r.count_before),
                "count_after": int(r.count_after),
                "before_ms": r.total_ns_before / 1e6,
                "after_ms": r.total_ns_after / 1e6,
                "delta_ms": r.delta_ns / 1e6,
            }
            for (f, phase), r in frame.head(FAMILY_ROWS).iterrows()
        ]  # FAMILY_ROWS rows: output assembly

    appeared = joined[joined["count_before"] == 0].sort_values("total_ns_after", ascending=False)
    vanished = joined[joined["count_after"] == 0].sort_values("total_ns_before", ascending=False)
    both = joined[(joined["count_before"] > 0) & (joined["count_after"] > 0)]
    changed = both.reindex(both["delta_ns"].abs().sort_values(ascending=False).index)
    return {
        "available": True,
        "families_before": int(b.index.get_level_values(0).nunique()),
        "families_after": int(a.index.get_level_values(0).nunique()),
        "appeared": rows(appeared),
        "vanished": rows(vanished),
        "changed": rows(changed),
        "appeared_count": int(len(appeared)),
        "vanished_count": int(len(vanished)),
    }
