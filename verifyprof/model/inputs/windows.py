"""The speculative cycle around the modelled verify steps: the spec_step ranges containing them
and the draft / accept / draft-extend ranges inside each, with the time each adds to its cycle
(the CUDA-event definition: from the later of its start and the previous phase's end)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.model.inputs.step_group import StepGroup

NS_PER_MS = 1e6
CYCLE_PHASES = ("draft", "accept", "draft_extend")  # phases (data/ranges.toml), not range names


@dataclass
class CycleParts:
    cycles: pd.DataFrame | None  # the spec_step steps (or derived cycle windows) containing
    # the modelled verify steps
    members: pd.DataFrame  # draft / accept / draft-extend steps counted per cycle
    exclusive_ms: dict[str, float]  # per phase, the time each adds to its cycle (summed)
    count: int
    derived: bool = False  # the cycles are derived windows: no range spans the program's cycle

    def per_cycle(self, phase: str) -> float | None:
        if phase in self.exclusive_ms:
            return self.exclusive_ms[phase] / self.count
        rows = self.members[self.members["_phase"] == phase]
        return float(rows["cost_ns"].sum()) / self.count / NS_PER_MS if len(rows) else None


def _cycle(
    steps: pd.DataFrame,
    here: pd.Series,
    main_here: pd.DataFrame,
    critical: StepGroup,
    notes: list[str],
) -> CycleParts:
    """The spec_step ranges containing the modelled verify steps (else the derived cycle
    windows), and the draft / accept / draft-extend ranges inside them (by start time, on the
    same device)."""
    specs = steps[(steps["_phase"] == "spec_step") & here]
    cycles = _containing(specs, main_here)
    derived = cycles is None
    if derived:
        cycles = _containing(steps[(steps["_phase"] == "cycle") & here], main_here)
    if cycles is None:
        return _preceding(steps, here, main_here, critical)
    candidates = pd.concat([steps[steps["_phase"].isin(CYCLE_PHASES) & here], main_here])
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
    members = members[members["_phase"] != "verify"]
    return CycleParts(cycles, members, exclusive, n_cycles, derived)


def _preceding(
    steps: pd.DataFrame, here: pd.Series, main_here: pd.DataFrame, critical: StepGroup
) -> CycleParts:
    """No cycle windows (a single verify): per modelled verify, the draft / accept /
    draft-extend steps since the previous verify of any kind, so that drafts are counted per
    cycle, never all drafts over one width's verifies."""
    verifies = steps[(steps["_phase"] == "verify") & here].sort_values("start_ns")
    bounds = verifies["start_ns"].to_numpy(np.int64)
    own = np.sort(main_here["start_ns"].to_numpy(np.int64))
    members = steps[steps["_phase"].isin(CYCLE_PHASES) & here]
    start = members["start_ns"].to_numpy(np.int64)
    nxt = np.searchsorted(bounds, start, side="right")  # the first verify after each member
    after = np.where(nxt < len(bounds), bounds[np.minimum(nxt, len(bounds) - 1)], -1)
    before = np.where(nxt > 0, bounds[np.maximum(nxt - 1, 0)], -1)
    # a draft belongs to the verify after it; accept / draft-extend to the verify before it
    is_draft = (members["_phase"] == "draft").to_numpy()
    anchor = np.where(is_draft, after, before)
    kept = members[np.isin(anchor, own)]
    return CycleParts(None, kept, {}, max(len(own), 1))


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
    keys = rows["_phase"].to_numpy()
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
