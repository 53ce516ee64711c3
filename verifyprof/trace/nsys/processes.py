"""The export's GPUs and processes -> ``devices`` and ``processes`` (with each process's rank).

nsys does not record ranks, and some exports lack the device table, so both are partly inferred
from the event tables already read:

* ``devices``: ``TARGET_INFO_GPU`` (absent in some exports: then the device ids seen in GPU
  activity, with unknown name and sizes).
* ``processes``: every pid with events, named from ``PROCESSES`` (or its main thread's name).
  ``device`` is the one device a process launched work on (-1 if none or several). ``rank`` is
  only inferred when it is unambiguous: several processes each drive exactly one device, all
  distinct; then rank = the order of its device id. Otherwise -1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifyprof.trace.events import NO_ID
from verifyprof.trace.nsys.export import NsysExport, NsysStrings


def devices_table(export: NsysExport, *gpu_tables: pd.DataFrame) -> pd.DataFrame:
    seen = pd.unique(np.concatenate([t["device"].to_numpy() for t in gpu_tables]))
    seen = seen[seen >= 0]
    rows: dict[int, tuple] = {}
    if "TARGET_INFO_GPU" in export.tables:
        have = set(export.cols("TARGET_INFO_GPU"))
        expr = lambda c: f'"{c}"' if c in have else "NULL"
        for dev, name, sms, mem, major, minor in export.sql(
            f"SELECT id, {expr('name')}, {expr('smCount')}, {expr('totalMemory')},"
            f" {expr('computeMajor')}, {expr('computeMinor')} FROM TARGET_INFO_GPU"
        ):
            if dev is None or dev in rows:
                continue
            cc = f"{major}.{minor}" if major is not None and minor is not None else ""
            rows[int(dev)] = (
                name or "",
                -1 if sms is None else sms,
                -1 if mem is None else mem,
                cc,
            )
    for dev in seen:
        rows.setdefault(int(dev), ("", -1, -1, ""))
    order = sorted(rows)
    return pd.DataFrame(
        {
            "device": np.array(order, dtype=np.int32),
            "name": np.array([rows[d][0] for d in order], dtype=object),
            "sm_count": np.array([rows[d][1] for d in order], dtype=np.int32),
            "memory_bytes": np.array([rows[d][2] for d in order], dtype=np.int64),
            "compute_capability": np.array([rows[d][3] for d in order], dtype=object),
        }
    )


def gpu_uuids(export: NsysExport) -> dict[int, str]:
    """Device id -> the GPU's UUID (``TARGET_INFO_GPU.uuid``): which physical GPU a device id of
    this report is, so that reports of processes sharing one GPU can be told from two nodes'."""
    if "TARGET_INFO_GPU" not in export.tables or "uuid" not in set(export.cols("TARGET_INFO_GPU")):
        return {}
    return {
        int(dev): str(uuid)
        for dev, uuid in export.sql("SELECT id, uuid FROM TARGET_INFO_GPU")
        if dev is not None and uuid
    }


def processes_table(
    export: NsysExport,
    names: NsysStrings,
    kernels: pd.DataFrame,
    copies: pd.DataFrame,
    graphs: pd.DataFrame,
    api: pd.DataFrame,
    ranges: pd.DataFrame,
) -> pd.DataFrame:
    # distinct (pid, device) pairs by hashing one int64 per op (devices are small ordinals)
    pairs = pd.unique(
        np.concatenate(
            [
                (t["pid"].to_numpy() << 16) | (t["device"].to_numpy().astype(np.int64) & 0xFFFF)
                for t in (kernels, copies, graphs)
            ]
        )
    )
    gpu = pd.DataFrame(
        {"pid": pairs >> 16, "device": (pairs & 0xFFFF).astype(np.int16).astype(np.int64)}
    )
    pids = np.sort(
        pd.unique(
            np.concatenate(
                [
                    gpu["pid"].to_numpy(),
                    pd.unique(api["pid"].to_numpy()),
                    pd.unique(ranges["pid"].to_numpy()),
                ]
            )
        )
    )
    pids = pids[pids >= 0]
    process_names: dict[int, str] = {}
    if "PROCESSES" in export.tables and {"globalPid", "name"} <= set(export.cols("PROCESSES")):
        for gpid, name in export.sql("SELECT globalPid, name FROM PROCESSES"):
            if gpid is not None and name:
                process_names[(int(gpid) >> 24) & 0xFFFFFF] = name
    missing = [p for p in pids if int(p) not in process_names]
    if missing and "ThreadNames" in export.tables:  # a process's main thread has tid == pid
        for gtid, name_id in export.sql("SELECT globalTid, nameId FROM ThreadNames"):
            if gtid is None:
                continue
            pid, tid = (int(gtid) >> 24) & 0xFFFFFF, int(gtid) & 0xFFFFFF
            if pid == tid and pid not in process_names:
                process_names[pid] = names.text(int(name_id))
    per_pid = gpu.groupby("pid")["device"].agg(["nunique", "first"])
    device = np.array(
        [
            (
                per_pid.at[p, "first"]
                if p in per_pid.index and per_pid.at[p, "nunique"] == 1
                else NO_ID
            )
            for p in pids
        ]
    )
    rank = np.full(len(pids), NO_ID)
    drivers = np.isin(pids, per_pid.index.to_numpy())
    if (
        drivers.sum() > 1
        and (device[drivers] >= 0).all()
        and len(np.unique(device[drivers])) == drivers.sum()
    ):
        rank[drivers] = np.argsort(np.argsort(device[drivers]))
    return pd.DataFrame(
        {
            "pid": pids.astype(np.int64),
            "host_pid": pids.astype(np.int64),
            "name": np.array([process_names.get(int(p), "") for p in pids], dtype=object),
            "rank": rank.astype(np.int32),
            "device": device.astype(np.int32),
        }
    )
