"""The speculative cycle around the modelled verify steps: the spec_step ranges containing them
and the draft / accept / draft-extend ranges inside each, with the time each adds to its cycle
(the CUDA-event definition: from the later of its start and the previous phase's end)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.contracts.ranges import ACCEPT, DRAFT, DRAFT_EXTEND, SPEC_STEP, VERIFY
from verifyprof.model.inputs.step_group import StepGroup

NS_PER_MS = 1e6
CYCLE_PHASES = (DRAFT, ACCEPT, DRAFT_EXTEND)


@dataclass
class CycleParts:
    cycles: pd.DataFrame | None  # the spec_step steps containing the modelled verify steps
    members: pd.DataFrame  # draft / accept / draft-extend steps counted per cycle
    exclusive_ms: dict[str, float]  # per phase key, the time each adds to its cycle (summed)
    count: int

    def per_cycle(self, name: str) -> float | None:
        key = name.removeprefix("verifyprof.")
        if key in self.exclusive_ms:
            return self.exclusive_ms[key] / self.count
        rows = self.members[self.members["name"] == name]
        return float(rows["cost_ns"].sum()) / self.count / NS_PER_MS if len(rows) else None


def _cycle(
    steps: pd.DataFrame,
    here: pd.Series,
    main_here: pd.DataFrame,
    critical: StepGroup,
    notes: list[str],
) -> CycleParts:
    """The spec_step ranges containing the modelled verify steps, and the draft / accept /
    draft-extend ranges inside them (by start time, on the same device)."""
    specs = steps[(steps["name"] == SPEC_STEP) & here]
    cycles = _containing(specs, main_here)
    if cycles is None:
        return CycleParts(None, steps.iloc[0:0], {}, critical.steps)
    candidates = pd.concat([steps[steps["name"].isin(CYCLE_PHASES) & here], main_here])
    members = _in_windows(cycles, candidates)
    exclusive = _exclusive_ms(cycles, members)
    n_cycles = len(cycles)
    overlap = critical.wall_ms - exclusive.get("verify", critical.wall_ms * n_cycles) / n_cycles
    if overlap > 1e-6:
        _trim_idle(critical, overlap)
        notes.append(
            "verify ranges start while the GPU still runs the previous phase (host ahead):"
            f" {overlap:.3f} ms per step of their windows is that phase's work; modelled as the"
            f" verify's own {critical.wall_ms:.3f} ms (idle time trimmed)"
        )
    return CycleParts(cycles, members[members["name"] != VERIFY], exclusive, n_cycles)


def _containing(outer: pd.DataFrame, inner: pd.DataFrame) -> pd.DataFrame | None:
    """The ``outer`` steps (sorted by start) whose window contains the start of some ``inner``
    step."""
    if outer.empty or inner.empty:
        return None
    outer = outer.sort_values("start_ns", kind="stable")
    slot = _slots(outer, inner["start_ns"].to_numpy(np.int64))
    hit = np.unique(slot[slot >= 0])
    return outer.iloc[hit] if len(hit) else None


def _slots(windows: pd.DataFrame, points: np.ndarray) -> np.ndarray:
    """Per point, the index of the (sorted, disjoint) window holding it, or -1."""
    starts = windows["start_ns"].to_numpy(np.int64)
    ends = windows["end_ns"].to_numpy(np.int64)
    slot = np.searchsorted(starts, points, side="right") - 1
    ok = (slot >= 0) & (points < ends[np.clip(slot, 0, None)])
    return np.where(ok, slot, -1)


def _in_windows(windows: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The ``steps`` starting inside one of the ``windows``, each tagged with its window
    (``_cycle``)."""
    slot = _slots(windows, steps["start_ns"].to_numpy(np.int64))
    inside = steps[slot >= 0].copy()
    inside["_cycle"] = slot[slot >= 0]
    return inside


def _exclusive_ms(windows: pd.DataFrame, members: pd.DataFrame) -> dict[str, float]:
    """Per phase, the summed time each step adds to its cycle: from the later of its start and the
    previous phase's end to its own end (the CUDA-event definition). Windows of a host running
    ahead overlap the previous phase's GPU work; this counts that work once."""
    if members.empty:
        return {}
    rows = members.sort_values(["_cycle", "start_ns"], kind="stable")
    cycle = rows["_cycle"].to_numpy()
    end = rows["end_ns"].to_numpy(np.int64)
    reach = pd.Series(end).groupby(cycle).cummax().to_numpy()  # latest end so far in the cycle
    previous = np.empty_like(end)
    previous[:] = windows["start_ns"].to_numpy(np.int64)[cycle]
    same = np.r_[False, cycle[1:] == cycle[:-1]]
    previous[same] = np.maximum(previous[same], reach[:-1][same[1:]])
    own = np.maximum(end - np.maximum(rows["start_ns"].to_numpy(np.int64), previous), 0)
    keys = rows["name"].str.removeprefix("verifyprof.").to_numpy()
    sums = pd.Series(own / NS_PER_MS).groupby(keys, sort=False).sum()
    return {str(k): float(v) for k, v in sums.items()}


def _trim_idle(group: StepGroup, overlap_ms: float) -> None:
    """Take ``overlap_ms`` out of a step's idle phases (launch gap first), keeping phases summing to
    wall."""
    left = overlap_ms
    for phase in phases.IDLE:
        take = min(group.phases_ms.get(phase, 0.0), left)
        group.phases_ms[phase] = group.phases_ms.get(phase, 0.0) - take
        left -= take
    group.wall_ms -= overlap_ms - left
