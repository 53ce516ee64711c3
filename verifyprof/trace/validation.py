"""The check every reader runs on its tables before handing a :class:`Trace` on.

Readers turn a missing number into a sentinel (``MISSING_TIME`` for timestamps) rather than
guessing; this layer decides what a bad row means, the same way for every format:

* a row whose ``start`` or ``end`` is missing, beyond ``TIME_LIMIT_NS`` (2^62 ns, 146 years:
  sums of such values overflow int64) or has ``end < start`` is dropped and counted in one
  warning per table;
* a table of GPU work (kernels, copies, graphs) in which no row is left is an error naming the
  file, never an empty analysis.

``collective_args.kernel`` points at kernel rows, so it is renumbered after kernels are dropped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import Trace

TIME_LIMIT_NS = 1 << 62
MISSING_TIME = np.iinfo(np.int64).min  # what a reader puts where a timestamp is NULL / absent
EVENT_TABLES = ("kernels", "copies", "graphs", "api", "ranges")
GPU_TABLES = ("kernels", "copies", "graphs")


def bad_times(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Rows whose interval is not a real one: missing, out of bounds, or ending before it starts."""
    out_of_range = (
        (start <= -TIME_LIMIT_NS)
        | (start >= TIME_LIMIT_NS)
        | (end <= -TIME_LIMIT_NS)
        | (end >= TIME_LIMIT_NS)
    )
    return out_of_range | (end < start)  # MISSING_TIME is below -TIME_LIMIT_NS


def drop_bad_times(trace: Trace) -> Trace:
    """Drop and count rows with unusable timestamps (see the module doc); raise when GPU work
    tables had rows and none is left. Returns ``trace`` (changed in place)."""
    had_gpu_rows = any(len(getattr(trace, t)) for t in GPU_TABLES)
    for table in EVENT_TABLES:
        frame: pd.DataFrame = getattr(trace, table)
        if not len(frame):
            continue
        bad = bad_times(frame["start"].to_numpy(), frame["end"].to_numpy())
        if not bad.any():
            continue
        n = int(bad.sum())
        kept = frame.loc[~bad].reset_index(drop=True)
        setattr(trace, table, kept)
        if table == "kernels":
            _renumber_collective_args(trace, bad)
        trace.warnings.append(
            f"{n} of {len(frame)} rows of {table} dropped: missing or invalid timestamps "
            "(NULL start/end, end before start, or beyond 2^62 ns)"
        )
    if had_gpu_rows and not any(len(getattr(trace, t)) for t in GPU_TABLES):
        raise TraceError(
            "no GPU activity row has valid timestamps (start/end NULL, missing, or end before"
            " start)",
            _source(trace),
        )
    return trace


def _renumber_collective_args(trace: Trace, dropped: np.ndarray) -> None:
    args = trace.collective_args
    if not len(args):
        return
    new_row = np.cumsum(~dropped) - 1
    rows = args["kernel"].to_numpy()
    keep = ~dropped[rows]
    args = args.loc[keep].reset_index(drop=True)
    args["kernel"] = new_row[rows[keep]].astype(args["kernel"].dtype)
    trace.collective_args = args


def _source(trace: Trace):
    return trace.source[0] if len(trace.source) == 1 else ", ".join(map(str, trace.source))
