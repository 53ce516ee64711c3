"""Top kernels by GPU time with their phase: the view for checking and fixing taxonomy rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.attribution.integrity import check_links
from verifyprof.attribution.steps import (
    NO_STEP,
    assign_levels,
    find_steps,
    gpu_ops,
    launches,
    link_calls,
)
from verifyprof.attribution.taxonomy import Taxonomy
from verifyprof.contracts import phases
from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import Trace


@dataclass
class KernelTable:
    table: pd.DataFrame  # name, phase, count, total_ns, mean_ns, share; sorted by total_ns
    total_ns: int
    taxonomy: str
    scope: str
    warnings: list[str] = field(default_factory=list)  # the trace's
    integrity: list[dict[str, Any]] = field(default_factory=list)  # its records

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        rows = self.table if top is None else self.table.head(top)
        # only where there is something to say: a clean trace's JSON stays as it was
        said = {"warnings": self.warnings} if self.warnings else {}
        said |= {"integrity": self.integrity} if self.integrity else {}
        return {
            "taxonomy": self.taxonomy,
            "scope": self.scope,
            "total_kernel_ns": self.total_ns,
            "distinct_kernels": int(
                self.table["name"].nunique()
            ),  # names: a context rule can list one twice
            "kernels": [
                {k: v.item() if hasattr(v, "item") else v for k, v in row.items()}
                for row in rows.to_dict("records")
            ],
            "by_phase": {
                str(k): int(v)
                for k, v in (
                    self.table.groupby("phase")["total_ns"]
                    .sum()
                    .sort_values(ascending=False)
                    .items()
                )
            },
            **said,
        }


def kernel_table(trace: Trace, taxonomy: Taxonomy, step_regex: str | None = None) -> KernelTable:
    ops = gpu_ops(trace, taxonomy)
    selected = ops.is_kernel.copy()
    if not selected.any():
        raise TraceError("no kernels in the trace", trace.source[0] if trace.source else None)
    scope = "whole trace"
    if step_regex is not None:
        calls = link_calls(trace, ops)
        where = trace.source[0] if trace.source else None
        check_links(int((ops.call >= 0).sum()), len(ops), trace.integrity, where)
        launch, op_launch = launches(ops, calls)
        levels = assign_levels(find_steps(trace, step_regex), launch, op_launch, calls)
        inside = np.zeros(len(ops), dtype=bool)
        for op_step, _ in levels:
            inside |= op_step != NO_STEP
        selected &= inside
        scope = f"kernels launched inside ranges matching '{step_regex}'"
    frame = pd.DataFrame(
        {
            "name_id": ops.name_id[selected],
            "phase": ops.phase[selected],
            "ns": ops.end[selected] - ops.start[selected],
        }
    )
    # by (name, phase): a context rule can book one kernel name to two phases (a row each)
    table = (
        frame.groupby(["name_id", "phase"], sort=False)
        .agg(count=("ns", "size"), total_ns=("ns", "sum"))
        .reset_index()
    )
    table["name"] = trace.strings.lookup(table["name_id"].to_numpy())
    table["phase"] = np.asarray(phases.ALL, dtype=object)[table["phase"].to_numpy()]
    table["mean_ns"] = (table["total_ns"] / table["count"].clip(lower=1)).round().astype(np.int64)
    total = int(table["total_ns"].sum())
    table["share"] = (table["total_ns"] / total).round(6) if total else 0.0
    table = table.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
    return KernelTable(
        table[["name", "phase", "count", "total_ns", "mean_ns", "share"]],
        total,
        taxonomy.source,
        scope,
        list(trace.warnings),
        [p.record() for p in trace.integrity],
    )
