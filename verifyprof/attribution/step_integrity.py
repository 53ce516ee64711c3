"""The trace's integrity problems (:mod:`verifyprof.trace.integrity`) in a breakdown: which steps
each one touches, and when the numbers cannot be trusted at all.

* A step row is touched by a problem when one of the problem's rows lies in the row's window
  (``start_ns`` .. ``end_ns``) on the row's device (rows or problems of no known device match
  any): the steps frame's ``integrity`` column counts them, each problem's ``steps`` the rows
  it touches.
* Steps from ranges need GPU ops linked to their launching calls; when none is, every step
  would read "0 kernels, 100% host_wait" while the trace's GPU work goes unaccounted: an error,
  not a table.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.integrity import Problem

NO_LINKS = (
    "none of the {n} GPU ops links to a launching API call (same process and correlation id)"
    ": {why}; every step would read 0 kernels and 100% host_wait, so the numbers cannot be"
    " trusted (--whole-trace breaks the GPU work down without launches)"
)


def mark_steps(rows: pd.DataFrame, problems: list[Problem]) -> tuple[np.ndarray, list[Problem]]:
    """(per step row, the affected rows inside it; the problems with ``steps`` filled in)."""
    total = np.zeros(len(rows), np.int64)
    if not problems or not len(rows):
        return total, list(problems)
    start = rows["start_ns"].to_numpy(np.int64)
    end = rows["end_ns"].to_numpy(np.int64)
    device = rows["device"].to_numpy(np.int64)
    marked = []
    for problem in problems:
        hits = _hits(start, end, device, problem.at, problem.device)
        total += hits
        marked.append(replace(problem, steps=int(np.count_nonzero(hits))))
    return total, marked


def _hits(
    start: np.ndarray, end: np.ndarray, device: np.ndarray, at: np.ndarray, at_device: np.ndarray
) -> np.ndarray:
    """Per window (start, end, device), the points ``at`` inside it on its device."""
    out = np.zeros(len(start), np.int64)
    if not len(at):
        return out
    for d in np.unique(device):  # a handful of devices
        rows = np.flatnonzero(device == d)
        points = np.sort(at if d < 0 else at[(at_device == d) | (at_device < 0)])
        out[rows] = np.searchsorted(points, end[rows], "right") - np.searchsorted(
            points, start[rows], "left"
        )
    return out


def check_links(linked: int, ops: int, problems: list[Problem], where: object) -> None:
    """TraceError when there are GPU ops and none links to a launch (see the module doc)."""
    if linked or not ops:
        return
    kinds = {p.kind for p in problems}
    why = (
        "the trace holds no runtime/driver API calls"
        if "no_launch_table" in kinds
        else "no op carries a correlation id"
        if "null_correlation" in kinds
        and all(p.count == p.rows for p in problems if p.kind == "null_correlation")
        else "the API calls' correlation ids match none of the ops'"
    )
    raise TraceError(NO_LINKS.format(n=ops, why=why), where)
