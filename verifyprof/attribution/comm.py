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
from verifyprof.attribution.steps import GpuOps
from verifyprof.trace.model import Trace

_OP = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|AllToAll|SendRecv|Reduce|Send|Recv|all_reduce|allreduce|all_gather|reduce_scatter)", re.IGNORECASE)
COMM = (phases.INDEX["allreduce"], phases.INDEX["collective"])


def collective_calls(trace: Trace, ops: GpuOps) -> pd.DataFrame | None:
    """One row per collective kernel: call (matched across devices), wait_ns, transfer_ns.

    None when fewer than two devices ran collectives (nothing to match across ranks).
    """
    is_comm = np.isin(ops.phase, COMM) & ops.is_kernel
    index = np.flatnonzero(is_comm)
    if len(index) == 0 or len(np.unique(ops.device[index])) < 2:
        return None
    name_ids = ops.name_id[index]
    families = {}
    for sid in np.unique(name_ids):  # once per distinct kernel name
        match = _OP.search(trace.strings[int(sid)])
        families[sid] = match.group(1).lower().replace("_", "") if match else "other"
    calls = pd.DataFrame(
        {
            "op": index,
            "device": ops.device[index],
            "family": pd.Series(name_ids).map(families).to_numpy(),
            "start": ops.start[index],
            "end": ops.end[index],
        }
    ).sort_values(["device", "start"], kind="stable")
    calls["seq"] = calls.groupby(["device", "family"], sort=False).cumcount()
    # Only calls every device made can be matched (captures can cut a rank's first/last calls).
    n_devices = calls["device"].nunique()
    calls["ranks"] = calls.groupby(["family", "seq"], sort=False)["device"].transform("size")
    calls = calls[calls["ranks"].to_numpy() == n_devices].copy()
    if calls.empty:
        return None
    per_call = calls.groupby(["family", "seq"], sort=False)["start"]
    latest = per_call.transform("max").to_numpy()
    earliest = per_call.transform("min").to_numpy()
    calls["wait_ns"] = latest - calls["start"].to_numpy()
    calls["transfer_ns"] = np.maximum(calls["end"].to_numpy() - latest, 0)
    calls["spread_ns"] = latest - earliest
    return calls.reset_index(drop=True)


def step_collectives(calls: pd.DataFrame, levels: list[np.ndarray], rows: pd.DataFrame) -> pd.DataFrame:
    """Per (step, device): collective calls, total wait and transfer; added to ``rows``."""
    op = calls["op"].to_numpy()
    parts = []
    for op_step in levels:
        step = op_step[op]
        inside = step >= 0
        parts.append(pd.DataFrame({"step": step[inside], "device": calls["device"].to_numpy()[inside],
                                   "wait_ns": calls["wait_ns"].to_numpy()[inside], "transfer_ns": calls["transfer_ns"].to_numpy()[inside]}))
    joined = pd.concat(parts, ignore_index=True)
    per_step = joined.groupby(["step", "device"]).agg(
        comm_calls=("wait_ns", "size"), comm_wait_ns=("wait_ns", "sum"), comm_transfer_ns=("transfer_ns", "sum")
    )
    index = pd.MultiIndex.from_arrays([rows["step"].to_numpy(), rows["device"].to_numpy()], names=["step", "device"])
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
