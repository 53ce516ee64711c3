"""The rows of one rank of the synthetic nsys export (``gen_nsys_export.py``) from the step
templates (``nsys_step_template.py``): kernels, runtime and driver calls, the accept copies, the
steps' synchronizations and NVTX ranges, as Arrow tables in the nsys 3.25 columns; ``StringIds``
interned in insertion order and the ``globalPid``/``globalTid`` bit layout.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from nsys_export_catalog import (
    COPY_DTOH,
    DOMAIN_ID,
    EVENT_CLASS_DRIVER,
    EVENT_CLASS_RUNTIME,
    KERNELS,
    LAUNCH_EX,
    NVTX_PUSHPOP,
)
from nsys_step_template import (
    API_NAMES,
    KERNEL_KEYS,
    OP_GRAPH_LAUNCH,
    OP_KERNEL,
    OP_MEMCPY,
    OP_NOISE,
    PHASES,
    Template,
)

from verifyprof.contracts import ranges


class Strings:
    """StringIds in insertion order."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids) + 1)

    def table(self) -> pa.Table:
        return pa.table(
            {"id": np.fromiter(self.ids.values(), np.int64), "value": list(self.ids.keys())}
        )


def global_pid(pid: int) -> int:
    # <hardware:8><vm:8><pid:24><tid:24>; real exports carry VM id 1 on the host (0x0001...)
    return (1 << 48) | (pid << 24)


def segmented_running_max(values: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Running maximum that restarts at each segment (values must be < 2**40 apart)."""
    shift = segment.astype(np.int64) << 40
    return np.maximum.accumulate(values + shift) - shift


def gen_rank(
    rank: int,
    tmpl: dict[bool, Template],
    strings: Strings,
    rng: np.random.Generator,
    graph_mode: np.ndarray,
    offset: np.ndarray | None,
) -> dict:
    """All rows of one rank: kernels, runtime, memcpy, sync, NVTX.

    Called twice with the same ``rng`` state: first with ``offset=None`` for the length of each
    step on this rank (its final sync's return, relative to the step's start), then with the
    step start times shared by all ranks (tensor-parallel ranks start every step together)."""
    steps = len(graph_mode)
    pid = 31_000 + 977 * rank
    gpid = global_pid(pid)
    gtid = gpid | pid  # main thread: tid == pid
    device = rank
    stream = 7
    parts = [tmpl[bool(g)] for g in graph_mode]
    n_ops = np.array([len(p.kind) for p in parts])
    step = np.repeat(np.arange(steps), n_ops)
    kind = np.concatenate([p.kind for p in parts])
    kernel = np.concatenate([p.kernel for p in parts])
    api = np.concatenate([p.api for p in parts])
    phase_of = np.concatenate([p.phase for p in parts])
    in_graph = np.concatenate([p.in_graph for p in parts])
    node = np.concatenate([p.node for p in parts])
    n = len(kind)

    # host: each op with a runtime row takes some time, plus a gap before the next call
    has_api = api >= 0
    api_dur = np.where(kind == OP_GRAPH_LAUNCH, 40_000, np.where(kind == OP_NOISE, 800, 4_500))
    api_dur = (api_dur * rng.uniform(0.7, 1.5, n)).astype(np.int64) * has_api
    host_gap = (rng.exponential(1_500, n).astype(np.int64) + 300) * has_api
    host_step = host_gap + api_dur
    first = np.r_[0, np.cumsum(n_ops)[:-1]]
    cum = np.cumsum(host_step)
    host_rel_end = cum - np.repeat(cum[first] - host_step[first], n_ops)  # relative to step start
    host_rel_start = host_rel_end - api_dur
    # graph-node kernels become ready when their graph launch returns (host time of that launch)
    launch_end = np.where(has_api, host_rel_end, -1)
    launch_end = segmented_running_max(launch_end, step)

    # GPU: ops in stream order; start = max(ready, previous end)
    gpu = (kind == OP_KERNEL) | (kind == OP_MEMCPY)
    g_idx = np.flatnonzero(gpu)
    mean = np.array([KERNELS[k][2] for k in KERNEL_KEYS], np.int64)
    gdur = np.where(kind[g_idx] == OP_MEMCPY, 3_000, mean[np.maximum(kernel[g_idx], 0)])
    gdur = (gdur * rng.lognormal(0.0, 0.15, len(g_idx))).astype(np.int64) + 500
    ready = launch_end[g_idx] + np.where(in_graph[g_idx], 1_000, 2_500)
    g_step = step[g_idx]
    g_first = np.r_[0, np.flatnonzero(np.diff(g_step)) + 1]
    c = np.cumsum(gdur) - gdur  # sum of durations before op i (global)
    c_rel = c - np.repeat(c[g_first], np.diff(np.r_[g_first, len(g_idx)]))
    gstart = c_rel + segmented_running_max(ready - c_rel, g_step)
    gend = gstart + gdur

    # step length: the final sync returns after the last GPU op; then the scheduler runs on the CPU
    last_gpu_end = np.maximum.reduceat(gend, g_first)
    sync_idx = first + n_ops - 1
    sync_start = host_rel_start[sync_idx]
    sync_end = np.maximum(sync_start + 2_000, last_gpu_end + 1_500)
    if offset is None:
        return {"step_end": sync_end}
    host_rel_end[sync_idx] = sync_end
    h_start = host_rel_start + offset[step]
    h_end = host_rel_end + offset[step]
    g_start = gstart + offset[g_step]
    g_end = gend + offset[g_step]

    # correlation ids: one per runtime row, increasing; graph kernels share their launch's
    corr_all = np.cumsum(has_api) + 1_000 + rank
    api_names = np.array([strings.id(a) for a in API_NAMES], np.int64)
    event_class = np.array(
        [EVENT_CLASS_DRIVER if a == LAUNCH_EX else EVENT_CLASS_RUNTIME for a in API_NAMES], np.int64
    )
    a_idx = np.flatnonzero(has_api)
    runtime = pa.table(
        {
            "start": h_start[a_idx],
            "end": h_end[a_idx],
            "eventClass": event_class[api[a_idx]],
            "globalTid": np.full(len(a_idx), gtid, np.int64),
            "correlationId": corr_all[a_idx],
            "nameId": api_names[api[a_idx]],
            "returnValue": np.zeros(len(a_idx), np.int64),
            "callchainId": pa.nulls(len(a_idx), pa.int64()),
        }
    )

    k_idx = g_idx[kind[g_idx] == OP_KERNEL]
    k_sel = kind[g_idx] == OP_KERNEL
    nk = len(k_idx)
    names = np.array([strings.id(KERNELS[k][0]) for k in KERNEL_KEYS], np.int64)
    shorts = np.array([strings.id(KERNELS[k][1]) for k in KERNEL_KEYS], np.int64)
    kk = kernel[k_idx]
    graph_id = 100 + rank
    kg = in_graph[k_idx]
    const = lambda v: np.full(nk, v, np.int64)
    kernels = pa.table(
        {
            "start": g_start[k_sel],
            "end": g_end[k_sel],
            "deviceId": const(device),
            "contextId": const(1 + rank),
            "greenContextId": pa.nulls(nk, pa.int64()),
            "streamId": const(stream),
            "correlationId": corr_all[k_idx],
            "globalPid": const(gpid),
            "demangledName": names[kk],
            "shortName": shorts[kk],
            "mangledName": names[kk],
            "launchType": const(0),
            "cacheConfig": const(0),
            "registersPerThread": const(128),
            "gridX": const(132),
            "gridY": const(1),
            "gridZ": const(1),
            "blockX": const(256),
            "blockY": const(1),
            "blockZ": const(1),
            "staticSharedMemory": const(0),
            "dynamicSharedMemory": const(49_152),
            "localMemoryPerThread": const(0),
            "localMemoryTotal": const(250_871_808),
            "gridId": np.arange(nk, dtype=np.int64) + 1,
            "sharedMemoryExecuted": const(233_472),
            "graphNodeId": pa.array(np.where(kg, graph_id * 100_000 + node[k_idx], 0), mask=~kg),
            "sharedMemoryLimitConfig": const(0),
            "qmdBulkReleaseDone": pa.nulls(nk, pa.int64()),
            "qmdPreexitDone": pa.nulls(nk, pa.int64()),
            "qmdLastCtaDone": pa.nulls(nk, pa.int64()),
            "graphId": pa.array(np.where(kg, graph_id, 0), mask=~kg),
            "clusterX": const(1),
            "clusterY": const(1),
            "clusterZ": const(1),
            "clusterSchedulingPolicy": const(0),
            "maxPotentialClusterSize": const(0),
            "maxActiveClusters": const(0),
            "sharedMemoryRequestedPercentage": pa.nulls(nk, pa.int64()),
            "tensorSizeMinusOneElements": pa.array(["[]"] * nk),
        }
    )

    m_idx = g_idx[~k_sel]
    nm = len(m_idx)
    memcpy = pa.table(
        {
            "start": g_start[~k_sel],
            "end": g_end[~k_sel],
            "deviceId": np.full(nm, device, np.int64),
            "contextId": np.full(nm, 1 + rank, np.int64),
            "greenContextId": pa.nulls(nm, pa.int64()),
            "streamId": np.full(nm, stream, np.int64),
            "correlationId": corr_all[m_idx],
            "globalPid": np.full(nm, gpid, np.int64),
            "bytes": np.full(nm, 4 * 64, np.int64),
            "copyKind": np.full(nm, COPY_DTOH, np.int64),
            "deprecatedSrcId": pa.nulls(nm, pa.int64()),
            "srcKind": np.full(nm, 2, np.int64),
            "dstKind": np.full(nm, 1, np.int64),
            "srcDeviceId": pa.nulls(nm, pa.int64()),
            "srcContextId": pa.nulls(nm, pa.int64()),
            "dstDeviceId": pa.nulls(nm, pa.int64()),
            "dstContextId": pa.nulls(nm, pa.int64()),
            "migrationCause": pa.nulls(nm, pa.int64()),
            "graphNodeId": pa.nulls(nm, pa.int64()),
            "virtualAddress": pa.nulls(nm, pa.int64()),
            "copyCount": np.ones(nm, np.int64),
        }
    )
    sync = pa.table(
        {
            "start": h_start[sync_idx],
            "end": h_end[sync_idx],
            "deviceId": np.full(steps, device, np.int64),
            "contextId": np.full(steps, 1 + rank, np.int64),
            "greenContextId": pa.nulls(steps, pa.int64()),
            "streamId": np.full(steps, stream, np.int64),
            "correlationId": corr_all[sync_idx],
            "globalPid": np.full(steps, gpid, np.int64),
            "deprecatedSyncType": pa.nulls(steps, pa.int64()),
            "syncType": np.full(steps, 3, np.int64),
            "eventId": np.full(steps, 0xFFFFFFFF, np.int64),
            "eventSyncId": pa.nulls(steps, pa.int64()),
        }
    )

    # NVTX: spec_step around the step, one nested range per phase (its first call .. its last call)
    n_tokens = 4
    step_text = strings.id(ranges.range_text(ranges.SPEC_STEP, bs=1))
    r_start, r_end, r_text, r_payload = (
        [offset],
        [h_end[sync_idx]],
        [np.full(steps, step_text)],
        [np.ones(steps)],
    )
    for p, phase in enumerate(PHASES):
        idx = np.flatnonzero(has_api & (phase_of == p))
        grp = np.r_[0, np.flatnonzero(np.diff(step[idx])) + 1]
        last = np.r_[grp[1:], len(idx)] - 1
        r_start.append(h_start[idx[grp]])
        r_end.append(h_end[idx[last]])
        if phase == ranges.VERIFY:
            ids = np.array(
                [
                    strings.id(ranges.range_text(phase, bs=1, tokens=n_tokens, graph=g))
                    for g in (0, 1)
                ]
            )
            r_text.append(ids[graph_mode.astype(int)])
            r_payload.append(np.full(steps, float(n_tokens)))
        else:
            r_text.append(np.full(steps, strings.id(ranges.range_text(phase, bs=1))))
            r_payload.append(np.ones(steps))
    nr = steps * (1 + len(PHASES))
    nvtx = pa.table(
        {
            "start": np.concatenate(r_start),
            "end": np.concatenate(r_end),
            "eventType": np.full(nr, NVTX_PUSHPOP, np.int64),
            "rangeId": pa.nulls(nr, pa.int64()),
            "category": pa.nulls(nr, pa.int64()),
            "color": pa.nulls(nr, pa.int64()),
            "text": pa.nulls(nr, pa.string()),
            "globalTid": np.full(nr, gtid, np.int64),
            "endGlobalTid": pa.nulls(nr, pa.int64()),
            "textId": np.concatenate(r_text).astype(np.int64),
            "domainId": np.full(nr, DOMAIN_ID, np.int64),
            "uint64Value": pa.nulls(nr, pa.int64()),
            "int64Value": np.concatenate(r_payload).astype(np.int64),
            "doubleValue": pa.nulls(nr, pa.float64()),
            "uint32Value": pa.nulls(nr, pa.int64()),
            "int32Value": pa.nulls(nr, pa.int64()),
            "floatValue": pa.nulls(nr, pa.float64()),
            "jsonTextId": pa.nulls(nr, pa.int64()),
            "jsonText": pa.nulls(nr, pa.string()),
            "binaryData": pa.nulls(nr, pa.string()),
        }
    )
    return {
        "CUPTI_ACTIVITY_KIND_KERNEL": kernels,
        "CUPTI_ACTIVITY_KIND_RUNTIME": runtime,
        "CUPTI_ACTIVITY_KIND_MEMCPY": memcpy,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": sync,
        "NVTX_EVENTS": nvtx,
        "_meta": {
            "pid": pid,
            "gpid": gpid,
            "gtid": gtid,
            "end": int(h_end[sync_idx][-1]),
            "kernels": nk,
            "graph_steps": int(graph_mode.sum()),
        },
    }
