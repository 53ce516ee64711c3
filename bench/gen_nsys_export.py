"""Write a synthetic Nsight Systems SQLite export of any size, for the reader/breakdown benchmark.

The file follows the nsys 3.25 export schema (nsys 2026.2): the real table and column names,
declared types and NOT NULL constraints, ``StringIds`` interning, lazy tables (only tables with
rows exist), the ``globalPid``/``globalTid`` bit layout, ``_vNNNN`` runtime API names, NVTX ranges
as registered strings in a named domain with numeric payloads. No indexes, like ``nsys export``.

What it models, per rank (one process, one GPU, one scheduler thread): speculative steps
``verifyprof.spec_step`` > ``draft`` / ``verify`` / ``accept`` / ``draft_extend`` (NVTX push/pop,
domain ``verifyprof``), with realistic kernel names (FlashInfer / FA3 attention, nvjet GEMMs,
Triton ``fused_moe_kernel`` and routing, NCCL allreduce, RMSNorm, elementwise, tree build and
verify). The verify forward is replayed as a CUDA graph in a fraction of the steps (every kernel
carries the ``cudaGraphLaunch_v10000`` correlation and a ``graphNodeId``/``graphId``) and launched
eagerly otherwise (``cudaLaunchKernel_v7000``; ``cuLaunchKernelEx`` for NCCL and Triton). Runtime
calls that launch nothing (stream-capture queries, events) are interleaved, so a reader that
fetches every runtime row pays for it. Host and GPU timelines are consistent: a kernel starts
no earlier than its launch returns and no earlier than the previous kernel on its stream ends;
each step ends with a ``cudaStreamSynchronize``.

    python bench/gen_nsys_export.py --kernels 1000000 --ranks 2   # ->
    bench/out/nsys_1000000_2r.sqlite

Rows are built with numpy and written with ADBC bulk ingest (Arrow), one rank at a time.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsys_export_catalog import (
    COPY_DTOH,
    DDL,
    DOMAIN_ID,
    DRIVER_LAUNCHED,
    EVENT_CLASS_DRIVER,
    EVENT_CLASS_RUNTIME,
    GRAPH_LAUNCH,
    KERNELS,
    LAUNCH_EX,
    LAUNCH_KERNEL,
    MEMCPY_ASYNC,
    NOISE_APIS,
    NVTX_DOMAIN_CREATE,
    NVTX_PUSHPOP,
    SCHEMA_VERSION,
    STREAM_SYNC,
)

from verifyprof.contracts import ranges

# op kinds in a step template
OP_KERNEL, OP_GRAPH_LAUNCH, OP_NOISE, OP_MEMCPY, OP_SYNC = range(5)
PHASES = (ranges.DRAFT, ranges.VERIFY, ranges.ACCEPT, ranges.DRAFT_EXTEND)


def layer(ranks: int, moe: bool) -> list[str]:
    ops = ["add_rmsnorm", "qkv_gemm", "rope", "fa3", "o_gemm"]
    if ranks > 1:
        ops.append("allreduce")
    ops.append("add_rmsnorm")
    ops += (
        ["moe_gate", "moe_align", "fused_moe", "act_mul", "fused_moe", "moe_sum"]
        if moe
        else ["qkv_gemm", "act_mul", "o_gemm"]
    )
    if ranks > 1:
        ops.append("allreduce")
    return ops


def step_phases(ranks: int, layers: int, draft_tokens: int) -> dict[str, list[str]]:
    """Kernel keys per phase of one speculative step."""
    draft_layer = [
        "rmsnorm",
        "qkv_gemm",
        "rope",
        "fi_decode",
        "o_gemm",
        "add_rmsnorm",
        "qkv_gemm",
        "act_mul",
        "o_gemm",
    ]
    draft = []
    for _ in range(draft_tokens - 1):
        draft += draft_layer + ["lm_head", "argmax", "index"]
    draft += ["build_tree"]
    verify = ["index", "add"]
    for i in range(layers):
        verify += layer(ranks, moe=i % 2 == 1)
    verify += ["rmsnorm", "lm_head"]
    accept = ["argmax", "verify_tree", "add", "index"]
    draft_extend = ["assign_cache"] + draft_layer + ["fi_prefill", "lm_head", "argmax"]
    return {
        ranges.DRAFT: draft,
        ranges.VERIFY: verify,
        ranges.ACCEPT: accept,
        ranges.DRAFT_EXTEND: draft_extend,
    }


@dataclass
class Template:
    """One step as parallel arrays of host ops (launches, noise, copies, the final sync)."""

    kind: np.ndarray  # OP_*
    kernel: np.ndarray  # index into KERNEL_KEYS for OP_KERNEL rows inside graphs too, -1 otherwise
    api: np.ndarray  # index into API_NAMES, -1 for graph-node kernels (no runtime row of their own)
    phase: np.ndarray  # index into PHASES
    in_graph: np.ndarray  # bool: kernel replayed by the phase's cudaGraphLaunch
    node: np.ndarray  # graph node index within the graph, -1 otherwise


KERNEL_KEYS = list(KERNELS)
API_NAMES = [LAUNCH_KERNEL, LAUNCH_EX, GRAPH_LAUNCH, MEMCPY_ASYNC, STREAM_SYNC, *NOISE_APIS]


def build_template(phases: dict[str, list[str]], verify_graph: bool) -> Template:
    rows: list[tuple[int, int, int, int, bool, int]] = []
    noise_i = 0
    for p, phase in enumerate(PHASES):
        keys = phases[phase]
        if phase == ranges.ACCEPT:
            rows.append(
                (OP_MEMCPY, -1, API_NAMES.index(MEMCPY_ASYNC), p, False, -1)
            )  # accept lengths -> host
        if phase == ranges.VERIFY and verify_graph:
            rows.append((OP_NOISE, -1, API_NAMES.index(NOISE_APIS[1]), p, False, -1))
            rows.append((OP_GRAPH_LAUNCH, -1, API_NAMES.index(GRAPH_LAUNCH), p, False, -1))
            for node, key in enumerate(keys):
                rows.append((OP_KERNEL, KERNEL_KEYS.index(key), -1, p, True, node))
            continue
        for j, key in enumerate(keys):
            if j % 3 == 0:  # PyTorch asks "am I capturing?" before many launches
                rows.append(
                    (
                        OP_NOISE,
                        -1,
                        API_NAMES.index(NOISE_APIS[noise_i % len(NOISE_APIS)]),
                        p,
                        False,
                        -1,
                    )
                )
                noise_i += 1
            api = LAUNCH_EX if key in DRIVER_LAUNCHED else LAUNCH_KERNEL
            rows.append((OP_KERNEL, KERNEL_KEYS.index(key), API_NAMES.index(api), p, False, -1))
    rows.append(
        (OP_SYNC, -1, API_NAMES.index(STREAM_SYNC), -1, False, -1)
    )  # ends the step, in no phase
    cols = list(zip(*rows))
    return Template(
        kind=np.array(cols[0], np.int8),
        kernel=np.array(cols[1], np.int32),
        api=np.array(cols[2], np.int32),
        phase=np.array(cols[3], np.int8),
        in_graph=np.array(cols[4], bool),
        node=np.array(cols[5], np.int32),
    )


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


def create(con: sqlite3.Connection, tables: list[str]) -> None:
    for table in tables:
        con.execute(f"CREATE TABLE {table} ({DDL[table]})")


def ingest(path: Path, table: str, data: pa.Table) -> None:
    import adbc_driver_sqlite.dbapi as adbc

    with adbc.connect(str(path)) as con:
        with con.cursor() as cur:
            cur.adbc_ingest(table, data, mode="append")
        con.commit()


def kernels_per_step(ranks: int, layers: int, draft_tokens: int) -> int:
    return sum(len(v) for v in step_phases(ranks, layers, draft_tokens).values())


def generate(
    out: Path,
    kernels: int,
    ranks: int,
    layers: int = 16,
    draft_tokens: int = 4,
    graph_fraction: float = 0.5,
    seed: int = 0,
) -> dict:
    """Write the export to ``out`` (atomically: a temp name, then rename); return a summary."""
    rng = np.random.default_rng(seed)
    per_step = kernels_per_step(ranks, layers, draft_tokens)
    steps = max(1, round(kernels / (per_step * ranks)))
    phases = step_phases(ranks, layers, draft_tokens)
    tmpl = {
        False: build_template(phases, verify_graph=False),
        True: build_template(phases, verify_graph=True),
    }
    strings = Strings()
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(tmp)
    create(con, list(DDL))
    con.commit()
    con.close()
    t0 = 60_000_000_000  # capture clock ns, like a 60 s old session
    graph_mode = (
        rng.random(steps) < graph_fraction
    )  # the same on every rank, as in tensor parallelism
    rank_rng = lambda rank: np.random.default_rng([seed, rank + 1])
    step_end = np.max(
        [
            gen_rank(r, tmpl, strings, rank_rng(r), graph_mode, None)["step_end"]
            for r in range(ranks)
        ],
        axis=0,
    )
    step_len = step_end + rng.integers(
        20_000, 120_000, steps
    )  # the scheduler's CPU time between steps
    offset = t0 + np.r_[0, np.cumsum(step_len)[:-1]]
    metas = []
    for rank in range(ranks):
        tables = gen_rank(rank, tmpl, strings, rank_rng(rank), graph_mode, offset + rank * 3_000)
        metas.append(tables.pop("_meta"))
        for name, data in tables.items():
            ingest(tmp, name, data)
        del tables
    end = max(m["end"] for m in metas)

    con = sqlite3.connect(tmp)
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (?, ?, ?,"
        " ?, ?)",
        (t0 - 1_000_000, NVTX_DOMAIN_CREATE, ranges.DOMAIN, metas[0]["gtid"], DOMAIN_ID),
    )
    procs = [(m["gpid"], m["pid"], "python3") for m in metas]
    procs += [
        (global_pid(30_990), 30_990, "nsys"),
        (global_pid(30_995), 30_995, "python3"),
    ]  # launcher, server main
    con.executemany("INSERT INTO PROCESSES VALUES (?, ?, ?)", procs)
    con.executemany(
        "INSERT INTO ThreadNames VALUES (?, ?, ?)",
        [(strings.id(f"TP{r} scheduler"), 20, m["gtid"]) for r, m in enumerate(metas)],
    )
    gpus = []
    for r in range(ranks):
        row = dict.fromkeys(c.split()[0] for c in DDL["TARGET_INFO_GPU"].split(", "))
        row.update(
            vmId=1 << 48,
            id=r,
            name="NVIDIA H200",
            busLocation=f"0000:{0x18 + r:02x}:00.0",
            isDiscrete=1,
            l2CacheSize=62_914_560,
            totalMemory=150_754_820_096,
            memoryBandwidth=4_800_000_000_000,
            clockRate=1_980_000_000,
            smCount=132,
            uuid=f"GPU-{r:08x}-0000-0000-0000-000000000000",
            chipName="GH100",
            cuDevice=r,
            computeMajor=9,
            computeMinor=0,
            smMajor=9,
            smMinor=0,
        )
        gpus.append(tuple(row.values()))
    con.executemany(f"INSERT INTO TARGET_INFO_GPU VALUES ({','.join('?' * len(gpus[0]))})", gpus)
    con.executemany(
        "INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?, ?, ?)",
        [(r, r, m["pid"], None, 132) for r, m in enumerate(metas)],
    )
    con.executemany(
        "INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (?, ?, ?)",
        [
            (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA Runtime"),
            (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA Driver"),
        ],
    )
    con.executemany(
        "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
        [
            (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
            (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        ],
    )
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.ids.items()])
    meta = [
        ("EXPORT_PRODUCT_NAME", "verifyprof bench/gen_nsys_export.py (synthetic, nsys schema)"),
        ("EXPORT_PRODUCT_VERSION", "synthetic"),
        ("EXPORT_SCHEMA_VERSION", SCHEMA_VERSION),
        *zip(
            (
                "EXPORT_SCHEMA_VERSION_MAJOR",
                "EXPORT_SCHEMA_VERSION_MINOR",
                "EXPORT_SCHEMA_VERSION_MICRO",
            ),
            SCHEMA_VERSION.split("."),
        ),
        ("EXPORT_PARAM_LAZY", "true"),
        (
            "GENERATOR_ARGS",
            (
                f"kernels={kernels} ranks={ranks} layers={layers} draft_tokens={draft_tokens}"
                f" graph_fraction={graph_fraction} seed={seed}"
            ),
        ),
    ]
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
    con.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?, ?)",
        (1_780_000_000_000_000_000, "2026-05-28T12:00:00", "2026-05-28T12:00:00", 0),
    )
    con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?, ?, ?, ?)", (1 << 48, end, 0, end))
    con.commit()
    con.close()
    os.replace(tmp, out)
    return {
        "path": str(out),
        "kernels": sum(m["kernels"] for m in metas),
        "ranks": ranks,
        "steps_per_rank": steps,
        "graph_steps": metas[0]["graph_steps"],
        "bytes": out.stat().st_size,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kernels",
        type=int,
        default=1_000_000,
        help="total kernels over all ranks (rounded to whole steps)",
    )
    parser.add_argument("--ranks", type=int, default=2, help="processes, one GPU each (1..8)")
    parser.add_argument("--layers", type=int, default=16, help="layers in the verify forward")
    parser.add_argument(
        "--graph-fraction",
        type=float,
        default=0.5,
        help="share of steps whose verify is a CUDA graph replay",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        default=None,
        help="output .sqlite (default bench/out/nsys_<kernels>_<ranks>r.sqlite)",
    )
    args = parser.parse_args(argv)
    out = args.out or default_path(args.kernels, args.ranks)
    t = time.perf_counter()
    info = generate(
        out,
        args.kernels,
        args.ranks,
        args.layers,
        graph_fraction=args.graph_fraction,
        seed=args.seed,
    )
    info["seconds"] = round(time.perf_counter() - t, 2)
    print(info)


def default_path(kernels: int, ranks: int) -> Path:
    return Path(__file__).resolve().parent / "out" / f"nsys_{kernels}_{ranks}r.sqlite"


if __name__ == "__main__":
    main()
