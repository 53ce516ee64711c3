"""Nesting depth of intervals within groups (threads, streams): one implementation for the
readers (NVTX push/pop, Kineto annotations) and for step matching."""

from __future__ import annotations

import numpy as np
import pandas as pd


def nesting_depth(groups: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval: how many intervals of its group are open when it starts (0 = outermost).

    Sorted by (group, start, longer first), an interval's depth is the number of intervals before
    it in its group that have not ended by its start: its position in the group minus those that
    ended at or before its start (zero-length intervals at that instant excluded: they sort after
    it). Back-to-back intervals are siblings; an instant inside an interval nests in it; for
    push/pop ranges this is the nesting level. Vectorised: searchsorted on (group, time rank) keys.
    """
    n = len(start)
    if not n:
        return np.empty(0, dtype=np.int16)
    group = pd.factorize(np.asarray(groups))[0].astype(np.int64)
    times, inv = np.unique(np.concatenate([start, end]), return_inverse=True)
    span = len(times) + 1
    s_rank, e_rank = inv[:n], inv[n:]
    order = np.lexsort((-end, start, group))
    g = group[order]
    first_of_group = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    group_start = np.repeat(first_of_group, np.diff(np.r_[first_of_group, n]))
    position = np.arange(n) - group_start
    start_key = g * span + s_rank[order]
    ended = np.searchsorted(np.sort(group * span + e_rank), start_key, side="right") - group_start
    zero = start == end
    if zero.any():
        zero_keys = np.sort(group[zero] * span + s_rank[zero])
        ended -= np.searchsorted(zero_keys, start_key, side="right") - np.searchsorted(
            zero_keys, start_key, side="left"
        )
    depth = np.empty(n, dtype=np.int16)
    depth[order] = np.clip(position - ended, 0, np.iinfo(np.int16).max)
    return depth
