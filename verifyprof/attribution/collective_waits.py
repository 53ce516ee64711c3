"""Collectives across ranks: how long each rank waited for the slowest, and the transfer itself.

A collective cannot finish on any rank before the last rank has joined, so for the n-th call of
one collective type, matched across devices by order, ``wait = latest start - own start`` is
time spent waiting for the slowest rank (skew, stragglers, host jitter) and
``transfer = own end - latest start`` is the cost of the communication proper. Only the
transfer shrinks with a faster allreduce; the wait shrinks by fixing whatever made a rank late.

Sizes and bandwidth (where the trace records message sizes, ``Trace.collective_args``), as
nccl-tests reports them: ``bytes`` is the call's size S, the larger of the rank's input and
output buffers (an allgather's gathered output, a reduce-scatter's input); ``algbw = S / time``
and ``busbw = algbw x factor``, factor 2(n-1)/n for allreduce, (n-1)/n for allgather,
reduce-scatter and all-to-all, 1 for broadcast, reduce and send/recv; n is the communicator's
size, else the trace's world size, else the number of devices that ran collectives. Matched
across ranks, ``busbw_gbps`` uses the transfer time (the link's speed); per kernel,
``kernel_busbw_gbps`` uses the whole kernel time, which includes waiting for the other ranks:
a lower bound on the link's bus bandwidth, and the only one a single-rank trace can give.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from verifyprof.attribution.arrays import codes, text_column
from verifyprof.attribution.steps import GpuOps
from verifyprof.contracts import phases
from verifyprof.contracts.schema import COMM_COLUMNS
from verifyprof.trace.collectives import family as collective_family
from verifyprof.trace.events import NO_ID, Trace

_OP = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|Broadcast|AllToAll|SendRecv|Reduce|Send|Recv|all_reduce|allreduce|all_gather|reduce_scatter)",
    re.IGNORECASE,
)
COMM = (phases.INDEX["allreduce"], phases.INDEX["collective"])
# nccl-tests' bus-bandwidth factor per collective, as a function of the communicator size n
BUSBW_FACTOR = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: np.ones_like(n),
    "reduce": lambda n: np.ones_like(n),
    "sendrecv": lambda n: np.ones_like(n),
    "send": lambda n: np.ones_like(n),
    "recv": lambda n: np.ones_like(n),
}


def busbw_factor(family: str, n: np.ndarray) -> np.ndarray:
    """nccl-tests' busbw / algbw for ``family`` on ``n`` ranks; NaN where n < 2 or unknown."""
    n = np.asarray(n, dtype=np.float64)
    rule = BUSBW_FACTOR.get(family)
    if rule is None:
        return np.full(n.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n >= 2, rule(n), np.nan)


def collective_kernels(trace: Trace, ops: GpuOps) -> pd.DataFrame | None:
    """One row per collective kernel on every device, no matching across ranks: family, size S
    (``bytes``, -1 unknown), ranks n and the busbw factor. :func:`with_bandwidth` adds times and
    bandwidths (kept out of here: million-kernel traces carry 10^5 collectives)."""
    index = np.flatnonzero(np.isin(ops.phase, COMM) & ops.is_kernel)
    if len(index) == 0:
        return None
    ids, code = codes(ops.name_id[index])
    labels = [_kernel_family(trace.strings[int(sid)]) for sid in ids]  # once per kernel name
    # a custom allreduce kernel (cross_device_reduce_*) is named for its reduce step
    reduce_step = ops.phase[index] == phases.INDEX["allreduce"]
    if reduce_step.any():
        labels.append("allreduce")
        code[reduce_step] = len(labels) - 1
    nbytes, group, named = _sizes(trace, index)
    if (named != "").any():
        family = np.where(named != "", named, np.array(labels, dtype=object)[code])
        code, unique = pd.factorize(family)
        labels = [str(f) for f in unique]
    kernels = pd.DataFrame(
        {
            "op": index,
            "device": ops.device[index],
            "family": text_column(labels, code),
            "start": ops.start[index],
            "end": ops.end[index],
        }
    )
    kernels["bytes"] = nbytes
    n = np.where(group >= 2, group, _default_ranks(trace, ops.device[index]))
    kernels["group_size"] = n.astype(np.int32)
    factor = np.full(len(index), np.nan, dtype=np.float32)
    for c, fam in enumerate(labels):  # a handful of families
        mine = code == c
        if mine.any():
            factor[mine] = busbw_factor(fam, n[mine])
    kernels["busbw_factor"] = factor
    return kernels


def _kernel_family(name: str) -> str:
    match = _OP.search(name)
    return match.group(1).lower().replace("_", "") if match else "other"


def with_bandwidth(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (kernels or calls) plus ``kernel_ns`` and ``kernel_busbw_gbps`` (whole kernel
    time: a lower bound) and, for calls matched across ranks, ``algbw_gbps`` / ``busbw_gbps``
    over the transfer time. GB/s = bytes per ns; NaN where the size is unknown."""
    out = frame.copy()
    out["kernel_ns"] = out["end"].to_numpy() - out["start"].to_numpy()
    factor = out["busbw_factor"].to_numpy(dtype=np.float64)
    out["kernel_busbw_gbps"] = _gbps(out["bytes"].to_numpy(), out["kernel_ns"].to_numpy()) * factor
    if "transfer_ns" in out:
        out["algbw_gbps"] = _gbps(out["bytes"].to_numpy(), out["transfer_ns"].to_numpy())
        out["busbw_gbps"] = out["algbw_gbps"].to_numpy() * factor
    return out


def _sizes(trace: Trace, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per collective op: size S (max of in/out bytes, -1 unknown), communicator size (-1) and
    the family its args name ("" unknown). Kernels come first among GPU ops, so op == kernel row."""
    nbytes = np.full(len(index), NO_ID, dtype=np.int64)
    group = np.full(len(index), NO_ID, dtype=np.int64)
    named = np.full(len(index), "", dtype=object)
    args = trace.collective_args
    if args.empty:
        return nbytes, group, named
    rows = args["kernel"].to_numpy()
    at = np.searchsorted(rows, index)
    hit = (at < len(rows)) & (rows[np.minimum(at, len(rows) - 1)] == index)
    a = at[hit]
    size = np.maximum(args["bytes"].to_numpy()[a], args["out_bytes"].to_numpy()[a])
    nbytes[hit] = np.where(size > 0, size, NO_ID)
    group[hit] = args["group_size"].to_numpy()[a]
    names = trace.strings.lookup(args["collective"].to_numpy()[a])
    named[hit] = _families_of(names)
    named[named == "other"] = ""
    return nbytes, group, named


def _families_of(names: np.ndarray) -> np.ndarray:
    uniq, inverse = np.unique(names.astype(str), return_inverse=True)
    return np.asarray([collective_family(u) if u else "" for u in uniq], dtype=object)[inverse]


def _default_ranks(trace: Trace, devices: np.ndarray) -> int:
    """Ranks of a collective whose communicator size is unknown: the world size, else the
    devices."""
    world = trace.meta.get("world_size")
    if isinstance(world, int) and world >= 2:
        return world
    return int(len(np.unique(devices)))


def _gbps(nbytes: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """bytes / ns is GB/s; NaN where the size is unknown or the time is zero."""
    ok = (np.asarray(nbytes) > 0) & (np.asarray(ns) > 0)
    out = np.full(len(ok), np.nan)
    out[ok] = np.asarray(nbytes, dtype=np.float64)[ok] / np.asarray(ns, dtype=np.float64)[ok]
    return out


def collective_calls(
    trace: Trace, ops: GpuOps, kernels: pd.DataFrame | None = None
) -> pd.DataFrame | None:
    """One row per collective kernel: call (matched across devices), wait_ns, transfer_ns, and the
    size columns of :func:`collective_kernels` (``kernels``: its result, if already made).

    None when fewer than two devices ran collectives (nothing to match across ranks).
    """
    if kernels is None:
        kernels = collective_kernels(trace, ops)
    if kernels is None or kernels["device"].nunique() < 2:
        return None
    calls = kernels.sort_values(["device", "start"], kind="stable")
    family = pd.factorize(calls["family"])[0]  # grouped by code: the text hashed once
    calls["seq"] = calls.groupby([calls["device"].to_numpy(), family], sort=False).cumcount()
    # Only calls every device made can be matched (captures can cut a rank's first/last calls).
    n_devices = calls["device"].nunique()
    seq = calls["seq"].to_numpy()
    calls["ranks"] = calls.groupby([family, seq], sort=False)["device"].transform("size")
    kept = calls["ranks"].to_numpy() == n_devices
    calls, family, seq = calls[kept].copy(), family[kept], seq[kept]
    if calls.empty:
        return None
    per_call = calls.groupby([family, seq], sort=False)["start"]
    latest = per_call.transform("max").to_numpy()
    earliest = per_call.transform("min").to_numpy()
    calls["wait_ns"] = latest - calls["start"].to_numpy()
    calls["transfer_ns"] = np.maximum(calls["end"].to_numpy() - latest, 0)
    calls["spread_ns"] = latest - earliest
    return calls.reset_index(drop=True)


def step_collectives(
    calls: pd.DataFrame, levels: list[np.ndarray], rows: pd.DataFrame
) -> pd.DataFrame:
    """Per (step, device): collective calls, total wait and transfer; added to ``rows``. Each
    call is found in ``rows`` by one packed (step, device) key (a binary search, not a group-by
    and a MultiIndex reindex: 3x faster on 124k calls); calls of steps ``rows`` lacks are dropped.
    """
    op = calls["op"].to_numpy()
    device = calls["device"].to_numpy().astype(np.int64)
    wait, transfer = calls["wait_ns"].to_numpy(np.int64), calls["transfer_ns"].to_numpy(np.int64)
    row_device = rows["device"].to_numpy(np.int64)
    span = int(max(row_device.max(initial=0), device.max(initial=0))) + 2  # device ids from -1
    keys, row_of = np.unique(
        rows["step"].to_numpy(np.int64) * span + row_device + 1, return_inverse=True
    )
    totals = np.zeros((3, len(keys)), np.int64)  # calls, wait, transfer per distinct (step, device)
    for op_step in levels:
        step = op_step[op]
        inside = np.flatnonzero(step >= 0)
        key = step[inside] * span + device[inside] + 1
        at = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
        found = (keys[at] == key) if len(keys) else np.zeros(len(key), bool)
        at, mine = at[found], inside[found]
        totals[0] += np.bincount(at, minlength=len(keys))
        np.add.at(totals[1], at, wait[mine])
        np.add.at(totals[2], at, transfer[mine])
    for column, values in zip(COMM_COLUMNS, totals):
        rows[column] = values[row_of.reshape(-1)]
    return calls


def summarize_calls(calls: pd.DataFrame) -> dict:
    """Trace-level collective statistics for the JSON summary."""
    out = {}
    for family, group in calls.groupby("family", sort=True):
        spread = group.drop_duplicates(["seq"])["spread_ns"].to_numpy()
        out[str(family)] = {
            "calls": int(group["seq"].nunique()),
            "devices": int(group["device"].nunique()),
            "transfer_ns_p50": int(np.median(group["transfer_ns"])),
            "wait_ns_p50": int(np.median(group["wait_ns"])),
            "spread_ns_p50": int(np.median(spread)),
            "spread_ns_p90": int(np.percentile(spread, 90)),
            **_size_stats(group, "busbw_gbps", "algbw_gbps"),
        }
    return out


def summarize_kernels(kernels: pd.DataFrame) -> dict:
    """Per collective family, per kernel on each rank (no matching across ranks)."""
    out = {}
    for family, group in kernels.groupby("family", sort=True):
        times = group["end"].to_numpy() - group["start"].to_numpy()
        out[str(family)] = {
            "kernels": int(len(group)),
            "devices": int(group["device"].nunique()),
            "kernel_ns_p50": int(np.median(times)),
            "kernel_ns_p90": int(np.percentile(times, 90)),
            **_size_stats(group, "kernel_busbw_gbps"),
        }
    return out


def _size_stats(group: pd.DataFrame, busbw: str, algbw: str | None = None) -> dict:
    """bytes (S) and bandwidth medians over the calls whose size is known; None when none is."""
    sized = with_bandwidth(group[group["bytes"].to_numpy() > 0])
    ranks = group["group_size"].to_numpy()
    count = (
        sized["seq"].nunique() if "seq" in sized else len(sized)
    )  # across ranks: calls, not rows
    out: dict = {
        "sized_calls": int(count),
        "group_size": int(np.median(ranks)) if len(ranks) and (ranks >= 2).all() else None,
    }
    out["bytes_p50"] = int(np.median(sized["bytes"])) if len(sized) else None
    columns = ([algbw] if algbw else []) + [busbw]
    for col in columns:
        values = sized[col].to_numpy()
        values = values[np.isfinite(values)]
        out[f"{col}_p50"] = round(float(np.median(values)), 3) if len(values) else None
    return out
