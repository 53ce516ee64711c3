"""What every step of a breakdown read back must satisfy before the model sees it: the rules the
attribution asserts when it makes a breakdown (``README.md``, "Steps"), checked again on a
breakdown JSON, which may have been edited, truncated or written by something else.

* ``wall_ns`` > 0: a step's window has a length (a zero wall makes every share a division by 0);
* ``end_ns`` >= ``start_ns`` where both are known (-1 is unknown);
* the phases sum to ``wall_ns``, within 1 ns per phase (the attribution's rounding).

A violation is one line naming the step (its position in ``steps``) and the field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.contracts.errors import VerifyprofError

PHASE_TOLERANCE_NS = 1  # per phase: each phase is rounded to whole nanoseconds once
_SAFE_SUM = 1 << 58  # below this, the int64 sum of every phase cannot overflow


def check_steps(steps: pd.DataFrame, path: str | Path | None = None) -> None:
    """VerifyprofError for the first step (in file order) that breaks a rule."""
    wall = steps["wall_ns"].to_numpy(np.int64)
    for i in np.flatnonzero(wall <= 0)[:1]:
        raise VerifyprofError(
            f"breakdown step {i}: 'wall_ns' is {wall[i]}: a step's window has a length (every"
            " phase share divides by it)",
            path,
        )
    start, end = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
    for i in np.flatnonzero((start >= 0) & (end >= 0) & (end < start))[:1]:
        raise VerifyprofError(
            f"breakdown step {i}: 'end_ns' {end[i]} is before 'start_ns' {start[i]}", path
        )
    names = list(phases.ALL)
    matrix = steps[names].to_numpy(np.int64)
    big = matrix.max(initial=0) >= _SAFE_SUM or wall.max(initial=0) >= _SAFE_SUM
    total = matrix.astype(object).sum(axis=1) if big else matrix.sum(axis=1)
    tolerance = PHASE_TOLERANCE_NS * len(names)
    off = np.abs(np.asarray(total - wall.astype(object) if big else total - wall, dtype=float))
    for i in np.flatnonzero(off > tolerance)[:1]:
        raise VerifyprofError(
            f"breakdown step {i}: 'phases' sum to {int(total[i])} ns, not its 'wall_ns'"
            f" {wall[i]} (the phases of a step sum to its wall, within {PHASE_TOLERANCE_NS} ns"
            " per phase)",
            path,
        )
