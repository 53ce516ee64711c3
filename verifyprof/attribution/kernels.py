"""Top kernels by GPU time with their phase: the view for checking and fixing taxonomy rules.

Per kernel (name and phase) as ``nsys stats -r cuda_gpu_kern_sum`` gives it: calls (Instances),
total, and one call's spread (Avg, Med, Min, Max), in int ns; and, inside steps, calls per step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.attribution.assignment import AttributedSteps, attributed_steps
from verifyprof.attribution.kernel_names import short_names
from verifyprof.attribution.step_integrity import check_links
from verifyprof.attribution.steps import NO_STEP, GpuOps, find_steps, gpu_ops
from verifyprof.attribution.taxonomy import Taxonomy
from verifyprof.contracts import phases, ranges
from verifyprof.contracts.errors import TraceError
from verifyprof.contracts.ranges import CYCLE_WINDOW
from verifyprof.contracts.schema import variants
from verifyprof.trace.events import Trace
from verifyprof.trace.nesting import nesting_depth

COLUMNS = (
    "name", "short_name", "phase", "count", "calls_per_step", "total_ns", "mean_ns", "median_ns",
    "min_ns", "max_ns", "share",
)  # fmt: skip


@dataclass
class KernelTable:
    table: pd.DataFrame  # COLUMNS, sorted by total_ns
    total_ns: int
    taxonomy: str
    scope: str
    warnings: list[str] = field(default_factory=list)  # the trace's
    integrity: list[dict[str, Any]] = field(default_factory=list)  # its records
    steps: int = 0  # the steps in scope (calls_per_step is per one of them); 0: whole trace
    group: dict[str, Any] | None = None  # the step group, when the scope is one

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        rows = self.table if top is None else self.table.head(top)
        # only where there is something to say: a clean trace's JSON stays as it was
        said = {"warnings": self.warnings} if self.warnings else {}
        said |= {"integrity": self.integrity} if self.integrity else {}
        said |= {"group": self.group} if self.group else {}
        return {
            "taxonomy": self.taxonomy,
            "scope": self.scope,
            "step_count": self.steps,  # what calls_per_step is per; 0: whole trace
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


def kernel_table(
    trace: Trace,
    taxonomy: Taxonomy,
    step_regex: str | None = None,
    mode: str | None = None,
    group: tuple[str, str] | None = None,
    attributed: AttributedSteps | None = None,
) -> KernelTable:
    """The kernels of the whole trace, or of those launched inside ranges matching
    ``step_regex``; of those, ``group`` (name, variant): only the steps of that group, as the
    breakdown names and groups steps; ``mode``: only steps run in that mode, "eager" or "graph",
    as the breakdown tells a step's mode (graph when at least half its kernels came from graph
    launches). ``attributed``: the trace's attributed steps when a run holds them already, used
    where they are of ``step_regex`` or hold every range it matches (:func:`_steps_for`)."""
    attributed, select = _steps_for(trace, taxonomy, step_regex, attributed)
    ops = gpu_ops(trace, taxonomy) if attributed is None else attributed.ops
    selected = ops.is_kernel.copy()
    if not selected.any():
        raise TraceError("no kernels in the trace", trace.source[0] if trace.source else None)
    scope, n_steps = "whole trace", 0
    if step_regex is not None:
        assert attributed is not None
        inside, n_steps = _inside_steps(attributed, mode, group, select, step_regex)
        selected &= inside
        scope = f"kernels launched inside ranges matching '{step_regex}'"
        scope += f", steps {group[0]} [{group[1]}]" if group else ""
        scope += f", {mode} steps" if mode else ""
    table = _per_kernel(ops, selected, n_steps)
    table["name"] = trace.strings.lookup(table["name_id"].to_numpy())
    table["short_name"] = short_names(table["name"])
    table["phase"] = np.asarray(phases.ALL, dtype=object)[table["phase"].to_numpy()]
    total = int(table["total_ns"].sum())
    table["share"] = (table["total_ns"] / total).round(6) if total else 0.0
    table = table.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
    return KernelTable(
        table[list(COLUMNS)],
        total,
        taxonomy.source,
        scope,
        list(trace.warnings),
        [p.record() for p in trace.integrity],
        steps=n_steps,
    )


def _steps_for(
    trace: Trace, taxonomy: Taxonomy, regex: str | None, held: AttributedSteps | None
) -> tuple[AttributedSteps | None, np.ndarray | None]:
    """The attributed steps a table of ``regex`` reads, and which of them it selects (None: all).
    The steps held when they are of ``regex``, or when they hold every range ``regex`` matches
    and those ranges derive no cycle window of their own (the default ranges hold the verify
    ranges: a range matched by both is the same step, on its own nesting level); else the
    trace's steps of ``regex``, assigned here."""
    if held is not None and held.taxonomy.source != taxonomy.source:
        held = None
    if regex is None or (held is not None and held.regex == regex):
        return held, None
    if held is not None and held.regex is not None and len(trace.strings) and _valid(regex):
        wanted = trace.strings.matching(regex)
        if not (wanted & ~trace.strings.matching(held.regex)).any():
            steps = held.assigned.steps
            matching = re.compile(regex)
            texts = steps["text"].to_numpy()
            keep = np.fromiter((matching.search(t) is not None for t in texts), bool, len(texts))
            keep &= steps["name"].to_numpy() != CYCLE_WINDOW
            if len({ranges.phase_of(n) for n in steps["name"][keep].unique()} - {None}) < 2:
                return held, keep
    return attributed_steps(trace, taxonomy, regex), None


def _valid(regex: str) -> bool:
    try:
        re.compile(regex)
    except re.error:  # find_steps says so, in its own words
        return False
    return True


def _inside_steps(
    attributed: AttributedSteps,
    mode: str | None,
    group: tuple[str, str] | None,
    select: np.ndarray | None = None,
    regex: str | None = None,
) -> tuple[np.ndarray, int]:
    """Which ops were launched inside a matching range (of ``group`` and ``mode``; ``select``:
    the steps of ``regex`` among more), and how many such ranges (without a group, the
    outermost: a step holding nested matches counts once)."""
    trace, ops = attributed.trace, attributed.ops
    attributed.calls  # noqa: B018 - links the ops to their calls
    where = trace.source[0] if trace.source else None
    check_links(int((ops.call >= 0).sum()), len(ops), trace.integrity, where)
    steps, levels = attributed.assigned.steps, attributed.assigned.levels
    n = len(steps)
    keep = np.ones(n, dtype=bool) if select is None else select.copy()
    if select is not None and not keep.any():
        find_steps(trace, regex or "")  # no range matches: its own line (NoStepsError)
    if group is not None:
        keep &= (steps["name"].to_numpy() == group[0]) & (variants(steps["attrs"]) == group[1])
    if mode is not None:  # a step without kernels is in neither mode
        keep &= attributed.modes == ("graph" if mode == "graph" else "eager")
    inside = np.zeros(len(ops), dtype=bool)
    for op_step, _ in levels:
        inside |= (op_step != NO_STEP) & keep[np.maximum(op_step, 0)]
    if group is not None:
        return inside, int(keep.sum())
    if select is not None:  # the outermost of the ranges selected
        kept = steps[keep]
        depth = nesting_depth(*(kept[c].to_numpy() for c in ("tid", "start", "end")))
        return inside, int((depth == 0).sum())
    outermost = steps["level"].to_numpy() == steps["level"].min()
    return inside, int((outermost & keep).sum())


def _per_kernel(ops: GpuOps, selected: np.ndarray, n_steps: int) -> pd.DataFrame:
    """Calls, total and one call's spread per (name, phase): a context rule can book one kernel
    name to two phases (a row each)."""
    frame = pd.DataFrame(
        {
            "name_id": ops.name_id[selected],
            "phase": ops.phase[selected],
            "ns": (ops.end[selected] - ops.start[selected]).astype(np.int64),
        }
    )
    table = (
        frame.groupby(["name_id", "phase"], sort=False)["ns"]
        .agg(count="size", total_ns="sum", median_ns="median", min_ns="min", max_ns="max")
        .reset_index()
    )
    count = table["count"].clip(lower=1)
    table["mean_ns"] = (table["total_ns"] / count).round().astype(np.int64)
    table["median_ns"] = table["median_ns"].round().astype(np.int64)  # half a ns: even counts
    table["calls_per_step"] = (table["count"] / n_steps).round(3) if n_steps else None
    return table
