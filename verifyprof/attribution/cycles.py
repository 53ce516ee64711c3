"""Cycle windows derived from the phase ranges, for programs whose hooks put no range around the
whole speculative cycle.

A user who hooks only the drafter and the target forward (``--hook ...=draft``, ``...=verify``)
leaves the program's own loop between those ranges: sampling, the accept decision, bookkeeping,
its host syncs. Summing the ranged phases then gives a cycle shorter than the program runs, and a
rate faster than it measures. One window per cycle, from the start of the cycle's first phase (the
draft that precedes a verify, else the verify) to the start of the next cycle's, holds all of it:
its cost is the measured cycle, and what its phases do not cover is the loop, with its syncs.

Windows are derived only where the steps hold at least two phases (a ``--range`` of the verify
alone asks for the verify, not its cycle). A window is kept only where it is one plain cycle:
exactly one outermost verify, no decode, prefill or width-sweep step, and not over ``MAX_RATIO``
times the median window (a pause between generate calls). Threads that have spec_step ranges
keep those and get none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifyprof.contracts.ranges import CYCLE_WINDOW, phase_of

MAX_RATIO = 3.0  # a window this many times the median is a pause between runs, not a cycle
NOT_IN_A_CYCLE = ("decode", "prefill", "spec_step")


def with_cycle_windows(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` (as ``find_steps`` returns them, before numbering) plus one derived
    ``cycle_window`` row per plain cycle, on a nesting level of their own."""
    if steps.empty:
        return steps
    phase = _phases(steps["name"])
    if len(set(phase) - {""}) < 2:  # verify ranges alone (a --range of one phase): no cycle
        return steps
    windows = [
        _thread_windows(steps[on_tid], phase[on_tid])
        for tid in pd.unique(steps["tid"])
        if not (phase[on_tid := (steps["tid"] == tid).to_numpy()] == "spec_step").any()
    ]
    windows = [w for w in windows if len(w)]
    if not windows:
        return steps
    derived = pd.concat(windows, ignore_index=True)
    derived["level"] = np.int16(int(steps["level"].max()) + 1)
    out = pd.concat([steps, derived], ignore_index=True)
    out["level"] = out["level"].astype(steps["level"].dtype)
    return out.sort_values(["tid", "start"], kind="stable").reset_index(drop=True)


def _phases(names: pd.Series) -> np.ndarray:
    """Each step's phase (data/ranges.toml), looked up once per distinct name."""
    lookup = {name: phase_of(name) or "" for name in pd.unique(names)}
    return names.map(lookup).to_numpy(dtype=object)


def _thread_windows(steps: pd.DataFrame, phase: np.ndarray) -> pd.DataFrame:
    """The windows of one thread's steps (sorted by start)."""
    level = steps["level"].to_numpy()
    sweep = steps["attrs"].map(lambda a: a.get("sweep") == "1").to_numpy(dtype=bool)
    is_verify = phase == "verify"
    if not is_verify.any():
        return steps.iloc[0:0]
    top = level == level[is_verify].min()
    heads = np.flatnonzero(is_verify & top & ~sweep)
    if len(heads) < 2:
        return steps.iloc[0:0]
    start = steps["start"].to_numpy(np.int64)
    end = steps["end"].to_numpy(np.int64)
    bounds = _boundaries(start, end, heads, (phase == "draft") & (level == level[heads].min()))
    lo, hi = bounds[:-1], bounds[1:]
    keep = _plain(start, phase, sweep, is_verify & top, lo, hi)
    length = hi - lo
    if keep.any():
        keep &= length <= MAX_RATIO * np.median(length[keep])
    first = steps.iloc[heads[:-1][keep]]
    return pd.DataFrame(
        {
            "name": CYCLE_WINDOW,
            "text": [_text(a) for a in first["attrs"]],
            "pid": first["pid"].to_numpy(),
            "tid": first["tid"].to_numpy(),
            "start": lo[keep],
            "end": hi[keep],
            "attrs": [_attrs(a) for a in first["attrs"]],
        }
    )


def _boundaries(
    start: np.ndarray, end: np.ndarray, heads: np.ndarray, is_draft: np.ndarray
) -> np.ndarray:
    """Per head verify, where its cycle starts: the last draft starting after the previous head
    ended and no later than this head starts, else the head itself."""
    bounds = start[heads].copy()
    drafts = np.flatnonzero(is_draft)
    if not len(drafts):
        return bounds
    d_start = start[drafts]  # sorted: steps are sorted by start
    last = np.searchsorted(d_start, start[heads], side="right") - 1
    previous_end = np.r_[np.iinfo(np.int64).min, end[heads][:-1]]
    ok = last >= 0
    ok[ok] &= d_start[last[ok]] >= previous_end[ok]
    bounds[ok] = d_start[last[ok]]
    return bounds


def _plain(
    start: np.ndarray,
    phase: np.ndarray,
    sweep: np.ndarray,
    top_verify: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> np.ndarray:
    """Per window [lo, hi): whether it holds one outermost verify and no step outside a cycle."""
    foreign = np.isin(phase, NOT_IN_A_CYCLE) | (sweep & (phase == "verify"))
    verifies = _count_in(start[top_verify], lo, hi)
    others = _count_in(start[foreign], lo, hi)
    return (verifies == 1) & (others == 0) & (hi > lo)


def _count_in(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many of the (sorted) ``points`` fall in each [lo, hi)."""
    return np.searchsorted(points, hi, side="left") - np.searchsorted(points, lo, side="left")


def _attrs(verify_attrs: dict[str, str]) -> dict[str, str]:
    """The window's attributes: the verify's width and batch, marked derived."""
    kept = {k: v for k, v in verify_attrs.items() if k in ("tokens", "bs", "graph")}
    return {**kept, "derived": "1"}


def _text(verify_attrs: dict[str, str]) -> str:
    return " ".join([CYCLE_WINDOW, *(f"{k}={v}" for k, v in _attrs(verify_attrs).items())])
