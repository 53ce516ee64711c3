"""The one step assignment: which step every GPU op and every launch belongs to, on each nesting
level. The breakdown, the kernel tables, the timeline and the allreduce check all assign steps
here, so a step (the derived cycle windows included) is the same step in each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.attribution.steps import (
    Calls,
    GpuOps,
    Launches,
    assign_levels,
    find_steps,
    whole_trace_steps,
)
from verifyprof.trace.events import Trace


@dataclass
class Assignment:
    """The steps (one row each, ``level`` their nesting depth) and, per level in ascending
    order, each op's and each launch's step (NO_STEP outside that level's steps)."""

    steps: pd.DataFrame
    levels: list[tuple[np.ndarray, np.ndarray]]

    def by_level(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return dict(zip(np.unique(self.steps["level"].to_numpy()).tolist(), self.levels))


def assign_steps(
    trace: Trace,
    ops: GpuOps,
    calls: Calls,
    launch: Launches,
    op_launch: np.ndarray,
    regex: str | None,
) -> Assignment:
    """The ranges matching ``regex`` and the cycle windows derived between them, or (``regex``
    None: ``--whole-trace``) one step per device spanning all its GPU work."""
    if regex is None:
        return Assignment(*whole_trace_steps(ops, launch))
    steps = find_steps(trace, regex, cycles=True)
    return Assignment(steps, assign_levels(steps, launch, op_launch, calls))
