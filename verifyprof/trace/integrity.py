"""Integrity problems of a trace: rows that cannot be taken at face value, counted and named.

A reader never passes such rows on silently. Each kind of problem in a table is one
:class:`Problem`: what it is (``kind``), where (``table``), how many rows (``count`` of
``rows``), one affected row in words (``example``), and the trace-clock times (and devices) of
the affected rows, by which the breakdown marks the steps they touch. Each problem is also one
line of ``Trace.warnings``; ``breakdown --json`` lists the records in the trace block
(``integrity``).

Kinds (see :data:`KINDS` for the words):

* ``duplicate_rows``: identical rows, every column equal (an export or merge that wrote them
  twice): one of each kept, the copies dropped;
* ``null_time`` / ``end_before_start`` / ``negative_duration`` / ``time_out_of_range``: rows
  without a usable interval, dropped (:mod:`verifyprof.trace.validation`);
* ``outside_capture``: GPU ops that start before the capture began or end after it stopped;
* ``no_launch_table``: GPU ops but no runtime/driver API call at all: no op links to a launch;
* ``null_correlation``: GPU ops without a correlation id: they cannot link to a launch;
* ``duplicate_correlation``: API calls sharing one (process, correlation id) with another: the
  ops of that id cannot tell which launched them;
* ``invalid_utf8``: NVTX texts that are not UTF-8 (read with U+FFFD in place of the bad bytes);
* ``unnamed``: kernels whose name id names nothing (NULL or dangling): named from the next name
  column (``shortName``, ``mangledName``) that resolves, the example says how many were.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from verifyprof.trace.events import MISSING_TIME, NO_ID, TIME_LIMIT_NS

if TYPE_CHECKING:  # pandas in annotations only (trace/events.py says why)
    import pandas as pd

KINDS: dict[str, str] = {
    "duplicate_rows": "are exact copies of another row (written twice): dropped, one of each kept",
    "null_time": "dropped: start or end missing (NULL, or a REAL no int64 holds)",
    "end_before_start": "dropped: end before start",
    "negative_duration": "dropped: negative dur",
    "time_out_of_range": "dropped: a timestamp beyond 2^62 ns",
    "outside_capture": (
        "lie outside the capture's window (start before it began or end after it stopped)"
    ),
    "no_launch_table": (
        "have no launching call: the trace holds no runtime/driver API calls (nsys"
        " CUPTI_ACTIVITY_KIND_RUNTIME, Kineto cuda_runtime), so no launch gap or step can be"
        " attributed"
    ),
    "null_correlation": "carry no correlation id: they cannot be tied to a launch",
    "duplicate_correlation": (
        "share their (process, correlation id) with another call: the GPU ops of that id are"
        " tied to the first"
    ),
    "invalid_utf8": "hold text that is not UTF-8: read with U+FFFD for the bad bytes",
    "unnamed": (
        "have a name id that names nothing (NULL, or absent from StringIds); another name"
        " column names them where it resolves"
    ),
}
EXAMPLE_NAME = 80  # characters of a name shown in an example


def _no_times() -> np.ndarray:
    return np.empty(0, np.int64)


@dataclass
class Problem:
    """One kind of problem in one table (see the module doc)."""

    kind: str
    table: str
    count: int
    rows: int  # rows of the table as read; 0 where the count is not of a table's rows
    example: str = ""
    at: np.ndarray = field(default_factory=_no_times, repr=False)  # ns of the affected rows
    device: np.ndarray = field(default_factory=_no_times, repr=False)  # per ``at``, -1 unknown
    steps: int = 0  # step rows the problem touches (the breakdown fills it in)

    def message(self) -> str:
        """The warning line."""
        head = (
            f"{self.count} of {self.rows} rows of {self.table}"
            if self.rows
            else f"{self.count} {self.table}"
        )
        example = f" (e.g. {self.example})" if self.example else ""
        return f"{head} {KINDS.get(self.kind, self.kind)}{example}"

    def record(self) -> dict[str, Any]:
        """The JSON record (``trace.integrity[]`` of the breakdown JSON)."""
        return {
            "kind": self.kind,
            "table": self.table,
            "count": int(self.count),
            "rows": int(self.rows),
            "example": self.example,
            "steps": int(self.steps),
            "message": self.message(),
        }

    def without_rows(self) -> Problem:
        """The record alone (no per-row times): what crosses a process boundary."""
        return replace(self, at=_no_times(), device=_no_times())


def times_of(frame: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(time, device) of ``rows`` of an event table: its start, else its end where the start is
    not usable; rows with neither are left out."""
    start = frame["start"].to_numpy()[rows]
    end = frame["end"].to_numpy()[rows]
    usable = lambda t: (t > -TIME_LIMIT_NS) & (t < TIME_LIMIT_NS)
    at = np.where(usable(start), start, end)
    ok = usable(at)
    device = (
        frame["device"].to_numpy()[rows]
        if "device" in frame.columns
        else np.full(len(rows), NO_ID, np.int64)
    )
    return at[ok].astype(np.int64), device[ok].astype(np.int64)


def example(strings: Any, table: str, frame: pd.DataFrame, row: int) -> str:
    """One row of an event table in words: its name, device or process, correlation, times."""
    values = {c: frame[c].iat[row] for c in frame.columns}
    parts = []
    if "name_id" in values and values["name_id"] >= 0:
        name = str(strings[int(values["name_id"])])
        if len(name) > EXAMPLE_NAME:
            name = name[: EXAMPLE_NAME - 1] + "…"
        parts.append(repr(name))
    elif "graph_id" in values and table == "graphs":
        parts.append(f"graph {int(values['graph_id'])}")
    if values.get("device", -1) >= 0:
        parts.append(f"device {int(values['device'])}")
    elif values.get("pid", -1) >= 0:
        parts.append(f"process {int(values['pid'])}")
    if "correlation" in values:
        corr = int(values["correlation"])
        parts.append(f"correlation {corr if corr >= 0 else 'none'}")
    parts += [f"{key} {_time_text(values[key])}" for key in ("start", "end") if key in values]
    return ", ".join(parts)


def _time_text(value: Any) -> str:
    value = int(value)
    if value == MISSING_TIME:
        return "NULL"
    return f"{value} ns" if abs(value) < TIME_LIMIT_NS else f"{value} (out of range)"


def merged(
    parts: list[list[Problem]],
    shifts: list[int] | None = None,
    rows_read: list[dict[str, int]] | None = None,
) -> list[Problem]:
    """The problems of several files (or shares of one) as one trace's: counts summed per
    (kind, table), the first example kept, times moved by each file's clock shift; ``rows`` the
    table's rows over every part (``rows_read``, one per part, where the parts say), else
    summed over the parts that have the problem."""
    out: dict[tuple[str, str], Problem] = {}
    for n, problems in enumerate(parts):
        shift = shifts[n] if shifts else 0
        for p in problems:
            key = (p.kind, p.table)
            mine = replace(p, at=p.at + shift) if shift and len(p.at) else p
            if key not in out:
                out[key] = replace(mine)
                continue
            have = out[key]
            have.count += mine.count
            have.rows += mine.rows
            have.steps += mine.steps
            have.example = have.example or mine.example
            have.at = np.concatenate([have.at, mine.at])
            have.device = np.concatenate([have.device, mine.device])
    if rows_read and all(rows_read):
        for (_, table), problem in out.items():
            if all(table in r for r in rows_read):
                problem.rows = sum(r[table] for r in rows_read)
    return list(out.values())
