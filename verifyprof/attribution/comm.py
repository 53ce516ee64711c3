"""Collectives across ranks: how long each rank waited for the slowest, and the transfer itself.

A collective cannot finish on any rank before the last rank has joined, so for the n-th call of
one collective type, matched across devices by order, ``wait = latest start - own start`` is
time spent waiting for the slowest rank (skew, stragglers, host jitter) and
``transfer = own end - latest start`` is the cost of the communication proper. Only the
transfer shrinks with a faster allreduce; the wait shrinks by fixing whatever made a rank late.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from verifyprof.attribution import phases
from verifyprof.trace.model import Trace

_OP = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|AllToAll|SendRecv|Reduce|Send|Recv|all_reduce|allreduce|all_gather|reduce_scatter)", re.IGNORECASE)
COMM = (phases.INDEX["allreduce"], phases.INDEX["collective"])


def collective_calls(trace: Trace, ops: pd.DataFrame) -> pd.DataFrame | None:
    """One row per collective kernel: call (matched across devices), wait_ns, transfer_ns.

    None when fewer than two devices ran collectives (nothing to match across ranks).
    """
    is_comm = np.isin(ops["phase"].to_numpy(), COMM) & ops["is_kernel"].to_numpy()
    comm = ops[is_comm]
    if comm.empty or comm["device"].nunique() < 2:
        return None
    name_ids = comm["name_id"].to_numpy()
    families = {}
    for sid in np.unique(name_ids):  # once per distinct kernel name
        match = _OP.search(trace.strings[int(sid)])
        families[sid] = match.group(1).lower().replace("_", "") if match else "other"
    family = pd.Series(name_ids).map(families).to_numpy()
    calls = pd.DataFrame(
        {
            "op": np.flatnonzero(is_comm),
            "device": comm["device"].to_numpy(),
            "family": family,
            "start": comm["start"].to_numpy(),
            "end": comm["end"].to_numpy(),
        }
    ).sort_values(["device", "start"], kind="stable")
    calls["seq"] = calls.groupby(["device", "family"], sort=False).cumcount()
    # Only calls every device made can be matched (captures can cut a rank's first/last calls).
    n_devices = calls["device"].nunique()
    per_call = calls.groupby(["family", "seq"], sort=False)
    calls["ranks"] = per_call["device"].transform("size")
    calls = calls[calls["ranks"].to_numpy() == n_devices].copy()
    if calls.empty:
        return None
    latest = calls.groupby(["family", "seq"], sort=False)["start"].transform("max").to_numpy()
    earliest = calls.groupby(["family", "seq"], sort=False)["start"].transform("min").to_numpy()
    calls["wait_ns"] = latest - calls["start"].to_numpy()
    calls["transfer_ns"] = np.maximum(calls["end"].to_numpy() - latest, 0)
    calls["spread_ns"] = latest - earliest
    return calls.reset_index(drop=True)


def step_collectives(calls: pd.DataFrame, pairs: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (step, device): collective calls, total wait and transfer; also added to ``rows``."""
    joined = pairs.merge(calls[["op", "device", "wait_ns", "transfer_ns"]], on="op", how="inner")
    per_step = joined.groupby(["step", "device"]).agg(
        comm_calls=("op", "size"), comm_wait_ns=("wait_ns", "sum"), comm_transfer_ns=("transfer_ns", "sum")
    )
    index = pd.MultiIndex.from_frame(rows[["step", "device"]])
    aligned = per_step.reindex(index).fillna(0).astype(np.int64)
    for col in aligned.columns:
        rows[col] = aligned[col].to_numpy()
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
        }
    return out
