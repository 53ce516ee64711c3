"""The attributed steps, made once per trace: every GPU op, the calls that launched them, the
launches, which step every op and launch belongs to on each nesting level, and each step's mode.
The breakdown, the kernel tables, the timeline and the allreduce check all take them from here
(:func:`attributed_steps`), so a step (the derived cycle windows included) is the same step in
each, and a run that needs several of them assigns its steps once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from verifyprof.attribution.steps import (
    NO_STEP,
    Calls,
    GpuOps,
    Launches,
    assign_levels,
    find_steps,
    gpu_ops,
    launches,
    link_calls,
    whole_trace_steps,
)
from verifyprof.attribution.taxonomy import Taxonomy
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


def step_modes(kernels: np.ndarray, graph_kernels: np.ndarray) -> np.ndarray:
    """The one rule of a step's mode: "graph" when at least half its kernels came from graph
    launches, else "eager"; "none" without kernels."""
    return np.where(kernels == 0, "none", np.where(graph_kernels * 2 >= kernels, "graph", "eager"))


@dataclass
class AttributedSteps:
    """One trace's steps as attributed (``regex`` None: one whole-trace step per device). Each
    part is made when first asked for and once: a caller checks the ops before they are linked
    (an empty trace says so first) and may drop the trace's events before the steps are
    assigned (the breakdown's ``release``)."""

    trace: Trace
    taxonomy: Taxonomy
    regex: str | None

    @cached_property
    def ops(self) -> GpuOps:
        return gpu_ops(self.trace, self.taxonomy)

    @cached_property
    def calls(self) -> Calls:
        return link_calls(self.trace, self.ops)

    @cached_property
    def _launches(self) -> tuple[Launches, np.ndarray]:
        return launches(self.ops, self.calls)

    @property
    def launch(self) -> Launches:
        return self._launches[0]

    @property
    def op_launch(self) -> np.ndarray:
        """Every op's row in ``launch`` (-1 when unlinked)."""
        return self._launches[1]

    @cached_property
    def assigned(self) -> Assignment:
        return assign_steps(
            self.trace, self.ops, self.calls, self.launch, self.op_launch, self.regex
        )

    @cached_property
    def modes(self) -> np.ndarray:
        """Each step's mode (:func:`step_modes`) over all its devices' kernels."""
        ops, n = self.ops, len(self.assigned.steps)
        graphed_op = ops.is_kernel & (self.op_launch >= 0)
        graphed_op[graphed_op] = self.launch.graph_launch[self.op_launch[graphed_op]]
        kernels, graphed = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for op_step, _ in self.assigned.levels:  # a step's ids are its own on every level
            kernel = ops.is_kernel & (op_step != NO_STEP)
            kernels += np.bincount(op_step[kernel], minlength=n)
            graphed += np.bincount(op_step[kernel & graphed_op], minlength=n)
        return step_modes(kernels, graphed)

    def matches(self, taxonomy: Taxonomy, regex: str | None) -> bool:
        """Whether these are the steps of ``regex`` under ``taxonomy`` (what a caller asks)."""
        return self.regex == regex and self.taxonomy.source == taxonomy.source


def attributed_steps(trace: Trace, taxonomy: Taxonomy, regex: str | None) -> AttributedSteps:
    """The trace's attributed steps of ``regex`` (None: the whole trace, a step per device)."""
    return AttributedSteps(trace, taxonomy, regex)
