"""Column access for one Kineto file's events: name codes, tables of numpy columns, numeric
fields, and the split of events by category.

Events are split by ``cat`` once (a factorisation over the category strings), then each needed
category is gathered lazily (:class:`EventGroups`). Numeric fields are pulled column-wise into
numpy (``numbers``, ``ids``); a value of the wrong type reads as missing, never as an error.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.trace.events import NO_ID
from verifyprof.trace.kineto.decode import EventFields, KinetoFile

# ``cat`` (lower-cased; very old Kineto capitalised them) -> the role it plays here.
ROLES: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "cpu_op": "op",
}


@dataclass
class Names:
    """Per-row codes into ``uniques`` (-1: no name); interned into the trace's table later."""

    codes: np.ndarray
    uniques: list[str]

    @classmethod
    def of(cls, values: list) -> Names:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        return cls(
            codes.astype(np.int32, copy=False),
            [u if isinstance(u, str) else str(u) for u in uniques],
        )

    def take(self, keep: np.ndarray) -> Names:
        return Names(self.codes[keep], self.uniques)


@dataclass
class Table:
    """Columns of one event table (all the same length) and the rows' names."""

    columns: dict[str, np.ndarray]
    names: Names

    def __len__(self) -> int:
        return len(self.names.codes)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def numbers(values: list, bad: Counter | None = None, key: str = "") -> np.ndarray:
    """float64 column; NaN where a value is absent or not a number. Values present but not
    numbers (a list, an object) are counted in ``bad[key]``."""
    try:
        out = np.array(values, dtype=np.float64)
        if out.ndim == 1:  # one-element lists ([1]) make a 2-D array, not an error
            return out
    except (TypeError, ValueError):
        pass
    # Only malformed files get here (a list or text where a number belongs).
    out = np.array([v if _is_number(v) else np.nan for v in values], dtype=np.float64)
    if bad is not None:
        n = sum(1 for v in values if v is not None and not _is_number(v))
        if n:
            bad[key] += n
    return out


def ids(values: list, bad: Counter | None = None, key: str = "") -> np.ndarray:
    """int64 id column, exact for integers; -1 where absent, not a number or beyond int64
    (counted in ``bad[key]`` unless absent)."""
    try:
        out = np.array(values, dtype=np.int64)
        if out.ndim == 1:
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    as_float = numbers(values, bad, key)
    out = np.full(len(values), NO_ID, dtype=np.int64)
    finite = np.isfinite(as_float)
    ok = finite & (np.abs(as_float) < 2.0**63)
    out[ok] = as_float[ok].astype(np.int64)
    if bad is not None and (finite & ~ok).any():
        bad[key] += int((finite & ~ok).sum())
    return out


def number_field(rows: EventFields, items: list, key: str, label: str | None = None) -> np.ndarray:
    """``numbers`` of one field of ``items`` (events or their args), bad values counted on
    ``rows``."""
    return numbers(rows.column(items, key), rows.bad_values, label or key)


def id_field(rows: EventFields, items: list, key: str, label: str | None = None) -> np.ndarray:
    """``ids`` of one field of ``items``, bad values counted on ``rows``."""
    return ids(rows.column(items, key), rows.bad_values, label or key)


class EventGroups:
    """The file's events split by category, gathered lazily per role."""

    def __init__(self, decoded: KinetoFile):
        self.rows = decoded.rows
        self.events = decoded.events
        cats = self.rows.column(self.events, "cat")
        self.codes, uniques = pd.factorize(np.asarray(cats, dtype=object))
        self.uniques = list(uniques)
        counts = np.bincount(self.codes[self.codes >= 0], minlength=len(self.uniques))
        self.categories = {str(u): int(n) for u, n in zip(self.uniques, counts)}

    def _take(self, mask: np.ndarray) -> list:
        return list(map(self.events.__getitem__, np.flatnonzero(mask).tolist()))

    def role(self, role: str) -> list:
        """Complete (``ph: X``) events whose category plays ``role``."""
        wanted = [
            j
            for j, u in enumerate(self.uniques)
            if isinstance(u, str) and ROLES.get(u.lower()) == role
        ]
        if not wanted:
            return []
        mask = self.codes == wanted[0] if len(wanted) == 1 else np.isin(self.codes, wanted)
        events = self._take(mask)
        phases = self.rows.column(events, "ph")
        if phases.count("X") != len(phases):
            keep = np.asarray(phases, dtype=object) == "X"
            events = list(map(events.__getitem__, np.flatnonzero(keep).tolist()))
        return events

    def metadata(self, phase: str = "M") -> list:
        """``ph: M`` events (they carry no ``cat``); ``phase="i"``: the instant events without a
        ``cat`` (the profiler's window marks)."""
        events = self._take(self.codes < 0)
        phases = self.rows.column(events, "ph")
        return [e for e, ph in zip(events, phases) if ph == phase]  # a few dozen rows
