"""Per step and per device: where the wall time went, phase by phase.

For every (step, device) pair: ``wall_ns`` runs from the range's start (or its first GPU op,
if earlier) to the later of the range's end and its last GPU op's end; ``gpu_span_ns`` from
first op start to last op end (nsys's GPU projection); ``phases`` split ``wall_ns`` exactly
(see :mod:`verifyprof.attribution.sweep`). Steps that launched nothing get one row with
``device = -1`` and all their time in ``host_wait``. The rows of one level and device group are
built in :mod:`verifyprof.attribution.step_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.attribution.assignment import AttributedSteps, attributed_steps
from verifyprof.attribution.context import busy_of, op_call_ends, queue_seams
from verifyprof.attribution.step_integrity import check_links, mark_steps
from verifyprof.attribution.step_rows import (
    LevelInputs,
    add_idle_steps,
    device_codes,
    device_groups,
    level_rows,
)
from verifyprof.attribution.steps import GpuOps
from verifyprof.attribution.summary import summarize
from verifyprof.attribution.syncs import SYNC_COLUMNS, sync_calls, sync_columns
from verifyprof.attribution.taxonomy import Taxonomy, load_taxonomy
from verifyprof.contracts import phases, ranges
from verifyprof.contracts.errors import TraceError
from verifyprof.contracts.schema import SCHEMA, BreakdownFrame, step_records
from verifyprof.trace.events import Trace
from verifyprof.trace.integrity import Problem


@dataclass
class Breakdown:
    trace: Trace
    steps: pd.DataFrame  # one row per (step, device); phase columns in ns
    options: dict[str, Any]
    linked_ops: int = 0
    unlinked_ops: int = 0
    collectives: pd.DataFrame | None = None
    # summary of every collective kernel (comm.summarize_kernels)
    collective_kernels: dict[str, Any] | None = None
    # the steps found (find_steps), the rows' step ids index it
    step_table: pd.DataFrame | None = None
    # every collective kernel (comm.collective_kernels) + step_<level>
    collective_ops: pd.DataFrame | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # the trace's integrity problems, each with the step rows it touches (its ``steps``)
    integrity: list[Problem] | None = None

    def step_records(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The JSON records of step rows ``start:stop`` (all by default)."""
        return step_records(self.steps.iloc[start:stop])

    def header(self) -> dict[str, Any]:
        """Everything of the JSON before ``steps``."""
        return {
            "schema": SCHEMA,
            "trace": self.trace_info(),
            "options": self.options,
            "phases": list(phases.ALL),
        }

    def summary(self) -> dict[str, Any]:
        return summarize(self.steps, self.collectives, self.collective_kernels)

    def trace_info(self) -> dict[str, Any]:
        info = self.trace.describe()
        info["linked_ops"] = self.linked_ops
        info["unlinked_ops"] = self.unlinked_ops
        if self.integrity:  # the trace's records, with the steps each touches
            info["integrity"] = self.integrity_records()
        return info

    def integrity_records(self) -> list[dict[str, Any]]:
        """The JSON records of the trace's integrity problems (``trace.integrity``)."""
        return [p.record() for p in self.integrity or []]

    def frame(self) -> BreakdownFrame:
        """What the model consumes: the steps frame and the trace description (no event tables)."""
        return BreakdownFrame(
            steps=self.steps, trace=self.trace_info(), options=self.options, summary=None
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.header(), "steps": self.step_records(), "summary": self.summary()}


def breakdown(
    trace: Trace,
    step_regex: str | None = None,
    taxonomy: Taxonomy | None = None,
    whole_trace: bool = False,
    release: bool = False,
    match_collectives: bool = True,
    attributed: AttributedSteps | None = None,
) -> Breakdown:
    """``release=True`` lets the breakdown drop the trace's event tables once it has read them
    (``Trace.release_events``): for one-shot runs such as the CLI. ``step_regex`` None: the
    default ranges (read when first needed, not at import: a command that reads no trace never
    looks for the user's ranges file). ``match_collectives=False``: the collective kernels and
    their steps only (``collective_ops``), not matched into calls, summarised or counted per step
    (a map's part: the reduce does that across all parts). ``attributed``: the trace's
    attributed steps of these ranges, when a run holds them already (then never released)."""
    step_regex = ranges.DEFAULT_STEP_REGEX if step_regex is None else step_regex
    taxonomy = taxonomy or load_taxonomy()
    regex = None if whole_trace else step_regex
    if attributed is None or not attributed.matches(taxonomy, regex):
        attributed = attributed_steps(trace, taxonomy, regex)
    ops = attributed.ops
    where = trace.source[0] if trace.source else None
    if len(ops) == 0:
        raise TraceError(
            "no GPU activity in the trace (empty capture: no kernels, copies or graphs)", where
        )
    syncs = sync_calls(trace, ops.pid, ops.start, ops.device)  # before the events are released
    attributed.calls  # noqa: B018 - links the ops to their calls
    linked = int((ops.call >= 0).sum())
    if not whole_trace:
        check_links(linked, len(ops), trace.integrity, where)
    shared, levels = _level_inputs(attributed, release)
    rows = _step_rows(shared, levels, where)
    for column, values in sync_columns(syncs, rows).items():
        rows.insert(rows.columns.get_loc("mode") + 1 + SYNC_COLUMNS.index(column), column, values)
    rows["integrity"], problems = mark_steps(rows, trace.integrity)
    result = Breakdown(
        trace=trace,
        steps=rows,
        options={
            "range": None if whole_trace else step_regex,
            "whole_trace": whole_trace,
            "taxonomy": taxonomy.source,
        },
        linked_ops=linked,
        unlinked_ops=int(len(ops) - linked),
        integrity=problems,
    )
    _add_collectives(result, ops, shared.steps, levels, match_collectives)
    return result


def _level_inputs(
    attributed: AttributedSteps, release: bool
) -> tuple[LevelInputs, list[tuple[np.ndarray, np.ndarray]]]:
    """What the (level, device group) tasks share, and the levels: per nesting level, each op's
    and each launch's step."""
    trace, ops, calls = attributed.trace, attributed.ops, attributed.calls
    launch, op_launch = attributed.launch, attributed.op_launch
    seam = queue_seams(
        ops.device, ops.start, ops.end, op_call_ends(ops, calls)
    )  # before the calls are released
    if release:
        calls.start = calls.end = np.empty(0, np.int64)  # launches holds what is needed of them
        calls.tid = calls.tid.copy()
        trace.release_events()
    assigned = attributed.assigned
    steps, levels = assigned.steps, assigned.levels
    devices, device_code = device_codes(ops.device)
    shared = LevelInputs(
        trace,
        steps,
        ops,
        launch,
        op_launch,
        busy_of(ops, launch, seam),
        seam,
        devices,
        device_code,
        np.searchsorted(devices, launch.device).astype(device_code.dtype),
    )  # a launch's device is an op's
    return shared, levels


def _step_rows(
    shared: LevelInputs, levels: list[tuple[np.ndarray, np.ndarray]], where: Path | None
) -> pd.DataFrame:
    """Every level's rows and the idle steps', by step and device, with ``cost_ns``."""
    groups = device_groups(shared)
    try:
        parts = [
            level_rows(shared, op_step, launch_step, group)
            for op_step, launch_step in levels
            for group in groups
        ]
    except TraceError as err:  # the sweep's invariant broken: name the file
        raise TraceError(err.problem, err.path or where) from None
    rows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    rows = (
        add_idle_steps(rows, shared.steps)
        .sort_values(["step", "device"], kind="stable")
        .reset_index(drop=True)
    )
    rows.insert(
        rows.columns.get_loc("wall_ns") + 1, "cost_ns", rows["wall_ns"] - rows["other_work"]
    )  # what the step occupies
    return rows


def _add_collectives(
    result: Breakdown,
    ops: GpuOps,
    steps: pd.DataFrame,
    levels: list[tuple[np.ndarray, np.ndarray]],
    match: bool = True,
) -> None:
    """The step table, and the collective kernels and (``match``) calls (their steps, per
    level)."""
    from verifyprof.attribution.collective_waits import (
        collective_calls,
        collective_kernels,
        step_collectives,
        summarize_kernels,
    )

    trace = result.trace
    kernels = collective_kernels(trace, ops)
    result.step_table = steps
    if kernels is not None:
        op = kernels["op"].to_numpy()
        result.collective_ops = kernels.assign(
            **{f"step_{n}": op_step[op].astype(np.int64) for n, (op_step, _) in enumerate(levels)}
        )
    if not match:
        return
    result.collective_kernels = summarize_kernels(kernels) if kernels is not None else None
    collective = collective_calls(trace, ops, kernels)
    del kernels
    if collective is not None:
        result.collectives = step_collectives(
            collective, [op_step for op_step, _ in levels], result.steps
        )
