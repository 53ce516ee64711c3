"""The check every reader runs on its tables before handing a :class:`Trace` on.

Readers turn a missing number into a sentinel (``MISSING_TIME`` for timestamps) rather than
guessing; this layer decides what a bad row means, the same way for every format, and names
each problem in ``Trace.integrity`` (and a warning line; :mod:`verifyprof.trace.integrity`):

* a row whose ``start`` or ``end`` is missing, beyond ``TIME_LIMIT_NS`` (2^62 ns, 146 years:
  sums of such values overflow int64) or has ``end < start`` (Kineto: a negative ``dur``) is
  dropped and counted, per table and kind;
* a table of GPU work (kernels, copies, graphs) in which no row is left is an error naming the
  file, never an empty analysis;
* rows of GPU work, API calls or ranges identical to another row in every column (a range's
  nesting depth aside: a twin nests inside its twin, and the depths are recomputed without it)
  are dropped once and counted; when most of a table's rows are such copies, the file is
  refused: its numbers cannot be trusted;
* GPU ops outside the capture's window (``meta["capture_window_ns"]``, where the reader knows
  it), without a correlation id, with no API call in the trace at all, or whose correlation id
  two API calls share, are kept and counted.

``collective_args.kernel`` points at kernel rows, so it is renumbered after kernels are dropped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import MISSING_TIME, TIME_LIMIT_NS, Trace
from verifyprof.trace.integrity import Problem, example, times_of
from verifyprof.trace.nesting import nesting_depth

EVENT_TABLES = ("kernels", "copies", "graphs", "api", "ranges")
GPU_TABLES = ("kernels", "copies", "graphs")
DEDUPLICATED = ("kernels", "copies", "graphs", "api", "ranges")
# columns a copy may differ in: a range written twice nests inside its twin, so its depth differs
NOT_COMPARED = {"ranges": ("depth",)}
LINKED = ("kernels", "copies")  # GPU ops that carry the correlation of their launching call


def bad_times(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Rows whose interval is not a real one: missing, out of bounds, or ending before it starts."""
    out_of_range = (
        (start <= -TIME_LIMIT_NS)
        | (start >= TIME_LIMIT_NS)
        | (end <= -TIME_LIMIT_NS)
        | (end >= TIME_LIMIT_NS)
    )
    return out_of_range | (end < start)  # MISSING_TIME is below -TIME_LIMIT_NS


def checked(trace: Trace) -> Trace:
    """Every check of the module doc, in order (bad times, copies, window, links); returns
    ``trace`` (changed in place). ``meta["rows_read"]``: each table's rows as the reader gave
    them (what the problems of several shares of one file are counted out of)."""
    trace.meta["rows_read"] = {t: len(getattr(trace, t)) for t in EVENT_TABLES}
    drop_bad_times(trace)
    drop_duplicates(trace)
    flag_outside_capture(trace)
    flag_links(trace)
    return trace


def drop_bad_times(trace: Trace) -> Trace:
    """Drop and count rows with unusable timestamps (see the module doc); raise when GPU work
    tables had rows and none is left. Returns ``trace`` (changed in place)."""
    had_gpu_rows = any(len(getattr(trace, t)) for t in GPU_TABLES)
    for table in EVENT_TABLES:
        frame: pd.DataFrame = getattr(trace, table)
        if not len(frame):
            continue
        start, end = frame["start"].to_numpy(), frame["end"].to_numpy()
        bad = bad_times(start, end)
        if not bad.any():
            continue
        missing = (start == MISSING_TIME) | (end == MISSING_TIME)
        beyond = ~missing & bad_times(start, np.maximum(start, end))  # a time beyond 2^62 ns
        kinds = {
            "null_time": missing,
            "time_out_of_range": beyond,
            "negative_duration" if trace.format == "kineto" else "end_before_start": (
                bad & ~missing & ~beyond
            ),
        }
        for kind, rows in kinds.items():
            _report_rows(trace, kind, table, frame, np.flatnonzero(rows))
        setattr(trace, table, frame.loc[~bad].reset_index(drop=True))
        if table == "kernels":
            _renumber_collective_args(trace, bad)
    if had_gpu_rows and not any(len(getattr(trace, t)) for t in GPU_TABLES):
        raise TraceError(
            "no GPU activity row has valid timestamps (start/end NULL, missing, or end before"
            " start)",
            _source(trace),
        )
    return trace


def _report_rows(
    trace: Trace, kind: str, table: str, frame: pd.DataFrame, rows: np.ndarray
) -> None:
    """One problem of ``kind``: ``rows`` of ``frame`` (nothing when there are none)."""
    if not len(rows):
        return
    at, device = times_of(frame, rows)
    trace.report(
        Problem(
            kind,
            table,
            int(len(rows)),
            len(frame),
            example(trace.strings, table, frame, int(rows[0])),
            at,
            device,
        )
    )


def duplicate_rows(frame: pd.DataFrame, ignore: tuple[str, ...] = ()) -> tuple[np.ndarray, int]:
    """(mask of the rows that repeat an earlier row in every column but ``ignore``, rows that
    have a twin).

    Twins share their start, and tables are sorted by start: only rows in runs of one start
    value are compared (a table without such runs costs one comparison per row)."""
    n = len(frame)
    none = np.zeros(n, bool)
    if n < 2:
        return none, 0
    start = frame["start"].to_numpy()
    if (start[1:] >= start[:-1]).all():
        same = start[1:] == start[:-1]
        candidate = np.r_[same, False] | np.r_[False, same]
    else:
        candidate = pd.Series(start).duplicated(keep=False).to_numpy()
    if not candidate.any():
        return none, 0
    rows = np.flatnonzero(candidate)
    subset = frame.iloc[rows].drop(columns=list(ignore))
    repeats = none.copy()
    repeats[rows[subset.duplicated(keep="first").to_numpy()]] = True
    return repeats, int(subset.duplicated(keep=False).sum())


def drop_duplicates(trace: Trace) -> None:
    """Drop rows identical to an earlier row (see the module doc), counted; TraceError when
    most rows of a table have a twin."""
    for table in DEDUPLICATED:
        frame: pd.DataFrame = getattr(trace, table)
        repeats, twins = duplicate_rows(frame, NOT_COMPARED.get(table, ()))
        if not twins:
            continue
        if 2 * twins > len(frame):
            raise TraceError(
                f"{twins} of {len(frame)} rows of {table} are exact copies of another row: most of"
                " the table was written twice (a merged or re-exported file?), its numbers cannot"
                " be trusted",
                _source(trace),
            )
        _report_rows(trace, "duplicate_rows", table, frame, np.flatnonzero(repeats))
        setattr(trace, table, frame.loc[~repeats].reset_index(drop=True))
        if table == "kernels":
            _renumber_collective_args(trace, repeats)
        if table == "ranges":
            trace.ranges["depth"] = _depth_without(trace.ranges, frame.loc[repeats])


def _depth_without(kept: pd.DataFrame, dropped: pd.DataFrame) -> np.ndarray:
    """The readers' nesting depths of ``kept`` less the ``dropped`` twins open around each: the
    twins' share is the depth over both minus the depth over ``kept`` alone, per (process,
    thread, kind, device) (the reader's own grouping, whatever it was, is kept for the rest)."""
    both = pd.concat([kept, dropped], ignore_index=True)
    keys = ["pid", "tid", "kind", "device"]
    group = both.groupby(keys, sort=False).ngroup().to_numpy()
    start, end = both["start"].to_numpy(), both["end"].to_numpy()
    n = len(kept)
    around = nesting_depth(group, start, end)[:n].astype(np.int64)
    around -= nesting_depth(group[:n], start[:n], end[:n])
    depth = kept["depth"].to_numpy().astype(np.int64) - around
    return np.clip(depth, 0, None).astype(kept["depth"].dtype)


def flag_outside_capture(trace: Trace) -> None:
    """Count GPU ops outside ``meta["capture_window_ns"]`` (start, end on the trace clock)."""
    window = trace.meta.get("capture_window_ns")
    if not window:
        return
    lo, hi = window
    for table in GPU_TABLES:
        frame: pd.DataFrame = getattr(trace, table)
        if len(frame):
            outside = (frame["start"].to_numpy() < lo) | (frame["end"].to_numpy() > hi)
            _report_rows(trace, "outside_capture", table, frame, np.flatnonzero(outside))


def flag_links(trace: Trace) -> None:
    """Count GPU ops that cannot link to their launch: no correlation id, no API calls at all,
    or a correlation id two API calls share."""
    ops = [(t, getattr(trace, t)) for t in LINKED if len(getattr(trace, t))]
    for table, frame in ops:
        rows = np.flatnonzero(frame["correlation"].to_numpy() < 0)
        _report_rows(trace, "null_correlation", table, frame, rows)
    api = trace.api
    if not len(api):
        for table, frame in ops:
            _report_rows(trace, "no_launch_table", table, frame, np.arange(len(frame)))
        return
    pid, corr = api["pid"].to_numpy(), api["correlation"].to_numpy()
    keys = pd.Series(_key(pid, corr))
    shared = (keys.duplicated(keep=False) & (corr >= 0)).to_numpy()
    if not shared.any():
        return
    rows = np.flatnonzero(shared)
    trace.report(
        Problem(
            "duplicate_correlation",
            "api",
            int(len(rows)),
            len(api),
            example(trace.strings, "api", api, int(rows[0])),
            *_ops_of(ops, keys[shared].to_numpy()),
        )
    )


def _key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    return pid.astype(np.int64) * (np.int64(1) << np.int64(40)) + corr.astype(np.int64)


def _op_keys(frame: pd.DataFrame) -> np.ndarray:
    return _key(frame["pid"].to_numpy(), frame["correlation"].to_numpy())


def _ops_of(ops: list[tuple[str, pd.DataFrame]], keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """(times, devices) of the GPU ops whose (pid, correlation) is among ``keys``."""
    found = [times_of(frame, np.flatnonzero(np.isin(_op_keys(frame), keys))) for _, frame in ops]
    if not found:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return tuple(np.concatenate(parts) for parts in zip(*found))


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
