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
The step templates are ``nsys_step_template.py``, one rank's rows ``nsys_rank_rows.py``, the
schema (table DDL, names, enums) ``nsys_export_catalog.py``; this file writes the export.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsys_export_catalog import DDL, DOMAIN_ID, NVTX_DOMAIN_CREATE, SCHEMA_VERSION
from nsys_rank_rows import Strings, gen_rank, global_pid
from nsys_step_template import build_template, kernels_per_step, step_phases

from verifyprof.contracts import ranges


def create(con: sqlite3.Connection, tables: list[str]) -> None:
    for table in tables:
        con.execute(f"CREATE TABLE {table} ({DDL[table]})")


def ingest(path: Path, table: str, data: pa.Table) -> None:
    import adbc_driver_sqlite.dbapi as adbc

    with adbc.connect(str(path)) as con:
        with con.cursor() as cur:
            cur.adbc_ingest(table, data, mode="append")
        con.commit()


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
