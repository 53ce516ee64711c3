"""Column access for one Kineto file's events: name codes, tables of numpy columns, numeric
fields, and the split of events by category.

Events are split by ``cat`` once (a factorisation over the category strings), then each needed
category is gathered lazily (:class:`EventGroups`). Numeric fields are pulled column-wise into
numpy (``numbers``, ``ids``); a value of the wrong type reads as missing, never as an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.trace.events import NO_ID
from verifyprof.trace.kineto.decode import KinetoFile


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
        return cls(codes.astype(np.int32, copy=False), [u if isinstance(u, str) else str(u) for u in uniques])

    def take(self, keep: np.ndarray) -> Names:
        return Names(self.codes[keep], self.uniques)


@dataclass
class Table:
    """Columns of one event table (all the same length) and the rows' names."""

    columns: dict[str, np.ndarray]
    names: Names

    def __len__(self) -> int:
        return len(self.names.codes)


def numbers(values: list) -> np.ndarray:
    """float64 column; NaN where a value is absent or not a number."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        # Only malformed files get here (a list or text where a number belongs).
        return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values])


def ids(values: list) -> np.ndarray:
    """int64 id column, exact for integers; -1 where absent or not a number."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        as_float = numbers(values)
        out = np.full(len(values), NO_ID, dtype=np.int64)
        ok = np.isfinite(as_float)
        out[ok] = as_float[ok].astype(np.int64)
        return out


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
        wanted = [j for j, u in enumerate(self.uniques) if isinstance(u, str) and ROLES.get(u.lower()) == role]
        if not wanted:
            return []
        mask = self.codes == wanted[0] if len(wanted) == 1 else np.isin(self.codes, wanted)
        events = self._take(mask)
        phases = self.rows.column(events, "ph")
        if phases.count("X") != len(phases):
            keep = np.asarray(phases, dtype=object) == "X"
            events = list(map(events.__getitem__, np.flatnonzero(keep).tolist()))
        return events

    def metadata(self) -> list:
        """``ph: M`` events (they carry no ``cat``)."""
        events = self._take(self.codes < 0)
        phases = self.rows.column(events, "ph")
        return [e for e, ph in zip(events, phases) if ph == "M"]  # a few dozen rows
