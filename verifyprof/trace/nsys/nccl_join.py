"""Which NCCL payload range gives each NCCL kernel its size: the join of
:mod:`~verifyprof.trace.nsys.nccl_payloads`.

A collective's kernel is launched inside its API range on the same thread, so a sized payload
range that encloses the launch call gives its size (a). Inside ``ncclGroupStart`` /
``ncclGroupEnd`` (send/recv, all-to-all, coalesced calls) the kernel is launched in
``ncclGroupEnd``: it takes the sized ranges between the group's last ``ncclGroupStart`` and that
``ncclGroupEnd`` (b; send/recv: bytes sent in, bytes received out). All by sorted keys of
(thread, time), no loop over launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from verifyprof.trace.collectives import collective_args_table, family
from verifyprof.trace.events import NO_ID, StringTable


class _Timeline:
    """Per-thread ordering of many (tid, time) pairs as one sortable key: thread code, time rank."""

    def __init__(self, tids: list[np.ndarray], times: list[np.ndarray]):
        self.tid_codes = pd.Index(pd.unique(np.concatenate(tids)))
        self.times = np.unique(np.concatenate(times))

    def key(self, tid: np.ndarray, time: np.ndarray, side: str = "left") -> np.ndarray:
        code = self.tid_codes.get_indexer(tid).astype(np.int64)
        rank = np.searchsorted(self.times, time, side=side).astype(np.int64)
        return code * (len(self.times) + 1) + rank


@dataclass(frozen=True)
class _Sized:
    """The sized payload ranges of a collective family, in (thread, start) order."""

    p: pd.DataFrame  # tid, start, end, text, bytes, comm, ranks
    fam: np.ndarray  # per range: its collective family
    group: np.ndarray  # per range: its communicator's size (NO_ID unknown)
    key: np.ndarray  # per range: its (thread, start) key on ``line``, ascending
    line: _Timeline


class _Sizes(NamedTuple):
    """Kernels and their sizes (columns of ``collective_args_table``)."""

    kernel: np.ndarray
    in_bytes: np.ndarray
    out_bytes: np.ndarray
    group: np.ndarray
    name: np.ndarray


def _last_at_or_before(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index of the last sorted key <= each key, -1 if none."""
    return np.searchsorted(sorted_keys, keys, side="right") - 1


def join_sizes(
    launches: pd.DataFrame,
    payloads: pd.DataFrame,
    groups: dict[str, pd.DataFrame],
    strings: StringTable,
) -> pd.DataFrame:
    """``collective_args`` of the NCCL ``launches`` (kernel, tid, start, end of the call) whose
    size the ``payloads`` give; ``groups``: the ``ncclGroupStart`` and ``ncclGroupEnd`` ranges."""
    texts = payloads["text"]
    fam_of = {
        t: family(t) if isinstance(t, str) and t.lower().startswith("nccl") else ""
        for t in pd.unique(texts)
    }  # per API name
    fam = texts.map(fam_of).to_numpy(dtype=object)
    sized = (payloads["bytes"].to_numpy() >= 0) & (fam != "") & (fam != "other")
    inits = payloads[(payloads["comm"].to_numpy() >= 0) & (payloads["ranks"].to_numpy() > 0)]
    # communicator -> ranks, from its init range
    ranks_by_comm = inits.drop_duplicates("comm").set_index("comm")["ranks"]
    p = payloads[sized].reset_index(drop=True)
    fam = fam[sized]
    if p.empty:
        return collective_args_table([], [], [], [], [], strings)
    group = p["comm"].map(ranks_by_comm).fillna(NO_ID).to_numpy(dtype=np.int64)
    gs, ge = groups["start"], groups["end"]
    line = _Timeline(
        [
            p["tid"].to_numpy(),
            launches["tid"].to_numpy(),
            gs["tid"].to_numpy(),
            ge["tid"].to_numpy(),
        ],
        [
            p["start"].to_numpy(),
            p["end"].to_numpy(),
            launches["start"].to_numpy(),
            launches["end"].to_numpy(),
            gs["start"].to_numpy(),
            ge["start"].to_numpy(),
            ge["end"].to_numpy(),
        ],
    )
    order = np.lexsort((p["start"].to_numpy(), line.tid_codes.get_indexer(p["tid"].to_numpy())))
    p, fam, group = p.iloc[order].reset_index(drop=True), fam[order], group[order]
    ranges = _Sized(p, fam, group, line.key(p["tid"].to_numpy(), p["start"].to_numpy()), line)
    ok, enclosed = _enclosing(launches, ranges)
    parts = [enclosed]
    rest = np.flatnonzero(~ok)
    if len(rest) and len(ge) and len(gs):
        grouped = _in_groups(launches, rest, ranges, gs, ge)
        if grouped is not None:
            parts.append(grouped)
    return collective_args_table(
        np.concatenate([part.kernel for part in parts]),
        np.concatenate([part.in_bytes for part in parts]),
        np.concatenate([part.out_bytes for part in parts]),
        np.concatenate([part.group for part in parts]),
        np.concatenate([part.name for part in parts]).tolist(),
        strings,
    )


def _enclosing(launches: pd.DataFrame, ranges: _Sized) -> tuple[np.ndarray, _Sizes]:
    """(a) a sized range encloses the launch call: which launches, and their sizes."""
    p, fam, group, p_key, line = ranges.p, ranges.fam, ranges.group, ranges.key, ranges.line
    l_tid, l_start, l_end = (launches[c].to_numpy() for c in ("tid", "start", "end"))
    cand = _last_at_or_before(p_key, line.key(l_tid, l_start))
    ok = cand >= 0
    ok[ok] = (p["tid"].to_numpy()[cand[ok]] == l_tid[ok]) & (
        p["end"].to_numpy()[cand[ok]] >= l_end[ok]
    )
    b = p["bytes"].to_numpy()[cand[ok]]
    n = group[cand[ok]]
    f = fam[cand[ok]]
    in_b = np.where(f == "reducescatter", np.where(n > 0, b * n, NO_ID), b)
    out_b = np.where(f == "allgather", np.where(n > 0, b * n, NO_ID), b)
    return ok, _Sizes(launches["kernel"].to_numpy()[ok], in_b, out_b, n, f)


def _in_groups(
    launches: pd.DataFrame, rest: np.ndarray, ranges: _Sized, gs: pd.DataFrame, ge: pd.DataFrame
) -> _Sizes | None:
    """(b) the launches ``rest`` inside an ncclGroupEnd: the sized ranges since the group's
    ncclGroupStart; None if there are none."""
    p, fam, group, p_key, line = ranges.p, ranges.fam, ranges.group, ranges.key, ranges.line
    l_tid, l_start, l_end = (launches[c].to_numpy() for c in ("tid", "start", "end"))
    ge_order = np.lexsort(
        (ge["start"].to_numpy(), line.tid_codes.get_indexer(ge["tid"].to_numpy()))
    )
    ge = ge.iloc[ge_order].reset_index(drop=True)
    ge_key = line.key(ge["tid"].to_numpy(), ge["start"].to_numpy())
    g = _last_at_or_before(ge_key, line.key(l_tid[rest], l_start[rest]))
    inside = g >= 0
    inside[inside] = (ge["tid"].to_numpy()[g[inside]] == l_tid[rest][inside]) & (
        ge["end"].to_numpy()[g[inside]] >= l_end[rest][inside]
    )
    rest, g = rest[inside], g[inside]
    gs_order = np.lexsort(
        (gs["start"].to_numpy(), line.tid_codes.get_indexer(gs["tid"].to_numpy()))
    )
    gs = gs.iloc[gs_order].reset_index(drop=True)
    gs_key = line.key(gs["tid"].to_numpy(), gs["start"].to_numpy())
    end_key = line.key(ge["tid"].to_numpy()[g], ge["start"].to_numpy()[g])
    s = _last_at_or_before(gs_key, end_key)
    opened = s >= 0
    opened[opened] = gs["tid"].to_numpy()[s[opened]] == ge["tid"].to_numpy()[g[opened]]
    rest, g, s = rest[opened], g[opened], s[opened]
    lo = np.searchsorted(
        p_key, line.key(gs["tid"].to_numpy()[s], gs["start"].to_numpy()[s]), side="right"
    )
    hi = np.searchsorted(p_key, end_key[opened], side="left")
    members = hi > lo
    rest, lo, hi = rest[members], lo[members], hi[members]
    if not len(rest):
        return None
    kind = _group_kind(fam, lo, hi)
    keep = kind != ""
    rest, lo, hi, kind = rest[keep], lo[keep], hi[keep], kind[keep]
    total = lambda mask: np.r_[0, np.cumsum(np.where(mask, p["bytes"].to_numpy(), 0))]
    sent, received, everything = (
        total(fam == "send"),
        total(fam == "recv"),
        total(np.ones(len(p), bool)),
    )
    in_b = np.where(kind == "sendrecv", sent[hi] - sent[lo], everything[hi] - everything[lo])
    out_b = np.where(kind == "sendrecv", received[hi] - received[lo], in_b)
    return _Sizes(launches["kernel"].to_numpy()[rest], in_b, out_b, group[lo], kind)


def _group_kind(fam: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The collective of each group of payload ranges ``fam[lo:hi]``: its one family, ``sendrecv``
    for sends and receives, "" for a mix (size left unknown). Prefix counts per family, no loop
    over groups."""
    codes, kinds = pd.factorize(pd.Series(fam))
    present = np.zeros((len(lo), len(kinds)), dtype=bool)
    for k in range(len(kinds)):  # a handful of families
        counts = np.r_[0, np.cumsum(codes == k)]
        present[:, k] = counts[hi] - counts[lo] > 0
    p2p_kinds = np.isin(np.asarray(kinds, dtype=object), ["send", "recv"])
    only_p2p = ~(present & ~p2p_kinds).any(axis=1)
    single = present.sum(axis=1) == 1
    first = (
        np.asarray(kinds, dtype=object)[np.argmax(present, axis=1)]
        if len(kinds)
        else np.empty(len(lo), object)
    )
    return np.where(only_p2p, "sendrecv", np.where(single, first, "")).astype(object)
