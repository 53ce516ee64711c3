"""Collective message sizes in the event model (``Trace.collective_args``), the bytes and bus
bandwidth the comm analysis derives from them, and how they reach the JSON and the console."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import sqlite3
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import PUBLIC, public_export
from rich.console import Console
from tracebuilder import late_joiner_allreduce

from verifyprof.attribution.breakdown import breakdown
from verifyprof.attribution.collective_waits import busbw_factor, collective_kernels, with_bandwidth
from verifyprof.attribution.steps import gpu_ops
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.report.console import print_breakdown
from verifyprof.trace import load_trace
from verifyprof.trace.collectives import collective_args_table
from verifyprof.trace.kineto.reader import read_kineto
from verifyprof.trace.nsys.reader import read_nsys_sqlite

A100 = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
B200 = PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"
MI300X = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
MFU_2GPU = public_export("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")


def raw_events(path: Path) -> list[dict]:
    with gzip.open(path) as handle:
        return json.load(handle)["traceEvents"]


def args_by_kernel_start(trace) -> dict[tuple[int, str], dict]:
    """collective_args rows keyed by their kernel's (start ns, name)."""
    args = trace.collective_args
    kernels = trace.kernels.iloc[args["kernel"].to_numpy()]
    names = trace.names("kernels")[args["kernel"].to_numpy()]
    collectives = trace.strings.lookup(args["collective"].to_numpy())
    return {
        (int(start), str(name)): {**row, "collective": str(c)}
        for start, name, row, c in zip(
            kernels["start"], names, args.to_dict("records"), collectives
        )
    }


# --- Kineto -------------------------------------------------------------------------------------


def test_a100_nccl_kernels_carry_bytes_equal_to_nelems_times_float_size():
    raw = [
        e
        for e in raw_events(A100)
        if e.get("cat") == "kernel" and "In msg nelems" in e.get("args", {})
    ]
    assert sorted(e["args"]["Collective name"] for e in raw).count("allreduce") == 15
    assert sorted(e["args"]["Collective name"] for e in raw).count("broadcast") == 6
    trace = read_kineto(A100)
    trace.validate()
    found = args_by_kernel_start(trace)
    assert len(found) == 21
    for e in raw:
        row = found[(round(e["ts"] * 1000), e["name"])]
        size = {"Float": 4, "Long": 8}[e["args"]["dtype"]]
        assert row["bytes"] == e["args"]["In msg nelems"] * size
        assert row["out_bytes"] == e["args"]["Out msg nelems"] * size
        assert row["group_size"] == 2
        assert row["collective"] == e["args"]["Collective name"]


def test_a100_float_collectives_are_nelems_times_4():
    trace = read_kineto(A100)
    raw = {
        round(e["ts"] * 1000): e["args"]
        for e in raw_events(A100)
        if e.get("cat") == "kernel" and e.get("args", {}).get("dtype") == "Float"
    }
    found = {
        int(s): b
        for s, b in zip(
            trace.kernels["start"].to_numpy()[trace.collective_args["kernel"]],
            trace.collective_args["bytes"],
        )
    }
    assert len(raw) == 18  # 15 AllReduce + 3 Broadcast of floats (the other 3 broadcast int64)
    assert all(found[start] == a["In msg nelems"] * 4 for start, a in raw.items())


def test_b200_allgather_output_is_group_size_times_its_input():
    (gather,) = [
        e for e in raw_events(B200) if e.get("cat") == "kernel" and "AllGather" in e["name"]
    ]
    row = args_by_kernel_start(read_kineto(B200))[(round(gather["ts"] * 1000), gather["name"])]
    assert row["bytes"] == 25136 * 2 == gather["args"]["In msg nelems"] * 2  # BFloat16
    assert row["out_bytes"] == 201088 * 2 == 8 * row["bytes"]
    assert (row["group_size"], row["collective"]) == (8, "allgather")


def test_b200_multimem_allreduce_takes_the_size_of_the_op_that_launched_it():
    events = raw_events(B200)
    ops = {
        e["args"]["External id"]: e["args"]
        for e in events
        if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})
    }
    kernels = [e for e in events if e.get("cat") == "kernel" and "multimem_all_reduce" in e["name"]]
    assert len(kernels) == 73
    found = args_by_kernel_start(read_kineto(B200))
    for k in kernels:
        op = ops[k["args"]["External id"]]
        assert op["Input type"][0] == "c10::BFloat16"
        row = found[(round(k["ts"] * 1000), k["name"])]
        assert row["bytes"] == int(np.prod(op["Input Dims"][0])) * 2
        assert (row["collective"], row["group_size"]) == ("allreduce", -1)


@pytest.mark.parametrize("path", [A100, B200], ids=["a100", "b200"])
def test_typed_and_generic_json_decoders_give_the_same_collective_args(path):
    fast, slow = read_kineto(path), read_kineto(path, fast=False)
    assert fast.collective_args.equals(slow.collective_args)


def test_trace_without_collectives_has_an_empty_collective_args_table():
    trace = read_kineto(MI300X)
    trace.validate()
    assert trace.collective_args.empty and list(trace.collective_args.columns) == [
        "kernel",
        "bytes",
        "out_bytes",
        "group_size",
        "collective",
    ]


def test_missing_or_malformed_args_leave_bytes_unknown_without_error(tmp_path):
    with gzip.open(A100) as handle:
        doc = json.load(handle)
    nccl = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel" and "In msg nelems" in e.get("args", {})
    ]
    del nccl[0]["args"]["In msg nelems"]  # no size at all
    nccl[1]["args"]["In msg nelems"] = "lots"  # not a number
    nccl[2]["args"]["dtype"] = "Quaternion"  # unknown element size
    nccl[3]["args"]["Group size"] = [2]  # wrong type
    nccl[4]["args"]["Out msg nelems"] = None
    path = tmp_path / "a100_mangled.json"
    path.write_text(json.dumps(doc))
    for fast in (True, False):
        found = args_by_kernel_start(read_kineto(path, fast=fast))
        key = lambda e: (round(e["ts"] * 1000), e["name"])
        assert found.get(key(nccl[0]), {"bytes": -1})["bytes"] == -1
        assert found.get(key(nccl[1]), {"bytes": -1})["bytes"] == -1
        assert (
            found[key(nccl[2])]["bytes"],
            found[key(nccl[2])]["out_bytes"],
            found[key(nccl[2])]["group_size"],
        ) == (-1, -1, 2)
        assert found[key(nccl[3])]["group_size"] == -1 and found[key(nccl[3])]["bytes"] > 0
        assert found[key(nccl[4])]["out_bytes"] == -1 and found[key(nccl[4])]["bytes"] > 0
        assert len(found) >= 19


def test_args_follow_their_kernels_through_a_two_rank_merge(tmp_path):
    with gzip.open(A100) as handle:
        doc = json.load(handle)
    doc["distributedInfo"]["rank"] = 1
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] += 7.0  # rank 1 starts its calls 7 us later
    rank1 = tmp_path / "rank1.json"
    rank1.write_text(json.dumps(doc))
    trace = read_kineto([A100, rank1])
    trace.validate()
    assert len(trace.collective_args) == 42
    kernel_rows = trace.collective_args["kernel"].to_numpy()
    names = trace.names("kernels")[kernel_rows]
    collectives = trace.strings.lookup(trace.collective_args["collective"].to_numpy())
    assert all(c.lower() in n.lower().replace("_", "") for c, n in zip(collectives, names))
    devices = trace.kernels["device"].to_numpy()[kernel_rows]
    assert sorted(set(devices.tolist())) == [0, 1]
    per_device = [np.sort(trace.collective_args["bytes"].to_numpy()[devices == d]) for d in (0, 1)]
    assert (per_device[0] == per_device[1]).all()


# --- nsys ---------------------------------------------------------------------------------------


def test_public_2gpu_export_has_nccl_payload_schemas_but_no_values_so_bytes_stay_unknown():
    with sqlite3.connect(f"file:{MFU_2GPU}?mode=ro", uri=True) as con:
        exported = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
        sized = con.execute(
            "SELECT count(*) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE name = 'Message size [bytes]'"
        ).fetchone()[0]
        blobs = con.execute(
            "SELECT count(*) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL"
        ).fetchone()[0]
    assert exported["EXPORT_PARAM_INCLUDE_BLOBS"] == "false" and sized > 0 and blobs == 0
    trace = read_nsys_sqlite(MFU_2GPU)
    assert trace.collective_args.empty
    assert any("--include-blobs=true" in w for w in trace.warnings)


SEND_SCHEMA, RECV_SCHEMA = 16777226, 16777225  # the export's own NCCL schemas: comm id, size, peer


def export_with_payloads(tmp_path: Path) -> tuple[Path, dict[int, int]]:
    """A copy of the real 2-GPU export with NCCL payload blobs written where nsys would put them
    (this export was made without them): 32-byte header (domain, schema, size, offset), then the
    schema's fields. The header layout is nsys-ai's reading of nsys 2026.2 exports, not yet
    checked against a real blob here (issue 5's captures will)."""
    path = tmp_path / "mfu_2gpu_payloads.sqlite"
    shutil.copy(MFU_2GPU, path)
    sizes = {}
    with sqlite3.connect(path) as con:
        ids = dict(
            con.execute("SELECT value, id FROM StringIds WHERE value IN ('ncclSend', 'ncclRecv')")
        )
        for rowid, text_id in con.execute(
            "SELECT rowid, textId FROM NVTX_EVENTS WHERE textId IN (?, ?)",
            (ids["ncclSend"], ids["ncclRecv"]),
        ).fetchall():
            schema = SEND_SCHEMA if text_id == ids["ncclSend"] else RECV_SCHEMA
            sizes[rowid] = 4096 * (rowid % 5 + 1) * (1 if schema == SEND_SCHEMA else 3)
            payload = struct.pack("<QQi4x", 0xC0FFEE, sizes[rowid], 1)
            blob = struct.pack("<QQQQ", 1, schema, len(payload), 32) + payload
            con.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", (blob, rowid))
    return path, sizes


def test_nccl_payloads_give_each_sendrecv_kernel_the_bytes_of_its_group(tmp_path):
    path, _ = export_with_payloads(tmp_path)
    # expected, straight from SQL: the launch's enclosing ncclGroupEnd, the group's ncclGroupStart,
    # and the sizes written into the sends / receives between them on the same thread
    query = """
    WITH names AS (SELECT e.rowid AS rid, e.start, e."end", e.globalTid AS tid, s.value AS text,
                          e.binaryData AS blob
                   FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId WHERE e.domainId = 1),
    launches AS (SELECT k.start AS kstart, k.deviceId AS device, r.globalTid AS tid,
                        r.start AS rstart, r."end" AS rend
                 FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
                 JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                      AND (r.globalTid >> 24) = (k.globalPid >> 24)
                 WHERE s.value LIKE 'ncclDevKernel_SendRecv%'),
    grouped AS (SELECT l.*, g.start AS gstart,
                  (SELECT max(gs.start) FROM names gs
                   WHERE gs.tid = l.tid AND gs.text = 'ncclGroupStart' AND gs.start <= g.start)
                  AS sstart
                FROM launches l JOIN names g ON g.tid = l.tid AND g.text = 'ncclGroupEnd'
                     AND g.start <= l.rstart AND g."end" >= l.rend)
    SELECT kstart, device,
      (SELECT group_concat(n.rid) FROM names n
       WHERE n.tid = grouped.tid AND n.text = 'ncclSend' AND n.start > sstart AND n.start < gstart)
      AS sends,
      (SELECT group_concat(n.rid) FROM names n
       WHERE n.tid = grouped.tid AND n.text = 'ncclRecv' AND n.start > sstart AND n.start < gstart)
      AS recvs
    FROM grouped WHERE sstart IS NOT NULL
    """
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute(query).fetchall()
        written = {
            rid: int.from_bytes(blob[40:48], "little")
            for rid, blob in con.execute(
                "SELECT rowid, binaryData FROM NVTX_EVENTS WHERE binaryData IS NOT NULL"
            )
        }
    expected = {
        (kstart, device): (
            sum(written[int(r)] for r in sends.split(",")),
            sum(written[int(r)] for r in recvs.split(",")),
        )
        for kstart, device, sends, recvs in rows
        if sends and recvs
    }
    assert len(expected) >= 60
    trace = read_nsys_sqlite(path)
    trace.validate()
    args = trace.collective_args
    kernels = trace.kernels.iloc[args["kernel"].to_numpy()]
    got = {
        (int(s), int(d)): (int(b), int(o))
        for s, d, b, o in zip(kernels["start"], kernels["device"], args["bytes"], args["out_bytes"])
    }
    assert got == expected
    assert set(trace.strings.lookup(args["collective"].to_numpy())) == {"sendrecv"}
    assert not any("include-blobs" in w for w in trace.warnings)


# --- comm: bytes and bus bandwidth ----------------------------------------------------------------


@pytest.mark.parametrize(
    "family,n,factor",
    [
        ("allreduce", 8, 1.75),
        ("allreduce", 2, 1.0),
        ("allgather", 8, 0.875),
        ("reducescatter", 4, 0.75),
        ("alltoall", 8, 0.875),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factor_is_nccl_tests_factor_per_collective(family, n, factor):
    assert busbw_factor(family, np.array([n]))[0] == pytest.approx(factor)


def test_busbw_factor_is_unknown_for_one_rank_or_an_unknown_collective():
    assert np.isnan(busbw_factor("allreduce", np.array([1]))[0])
    assert np.isnan(busbw_factor("other", np.array([8]))[0])


def test_single_rank_kernel_busbw_is_size_over_kernel_time_times_factor():
    trace = load_trace(B200)
    kernels = with_bandwidth(collective_kernels(trace, gpu_ops(trace, load_taxonomy())))
    allreduce = kernels[kernels["family"] == "allreduce"]
    assert (
        len(allreduce) == 73 and (allreduce["group_size"] == 8).all()
    )  # world size: distributedInfo
    expected = allreduce["bytes"] / allreduce["kernel_ns"] * 2 * 7 / 8
    assert np.allclose(allreduce["kernel_busbw_gbps"], expected)
    gather = kernels[kernels["family"] == "allgather"].iloc[0]
    assert gather["bytes"] == 201088 * 2  # S is the gathered output, as nccl-tests counts it
    assert gather["kernel_busbw_gbps"] == pytest.approx(
        gather["bytes"] / gather["kernel_ns"] * 7 / 8
    )


def test_single_rank_summary_reports_collective_kernels_and_no_cross_rank_section():
    summary = breakdown(load_trace(A100), whole_trace=True).summary()
    assert summary["collectives"] is None  # present, as documented: nothing matched across ranks
    stats = summary["collective_kernels"]
    sizes = [
        e["args"]["In msg nelems"] * 4
        for e in raw_events(A100)
        if e.get("cat") == "kernel" and e.get("args", {}).get("Collective name") == "allreduce"
    ]
    assert stats["allreduce"]["kernels"] == stats["allreduce"]["sized_calls"] == 15
    assert stats["allreduce"]["bytes_p50"] == int(np.median(sizes))
    assert stats["allreduce"]["group_size"] == 2
    assert stats["broadcast"]["kernels"] == 6
    assert stats["allreduce"]["kernel_busbw_gbps_p50"] > 0


def test_cross_rank_summary_adds_bytes_and_transfer_busbw(tmp_path):
    path, _ = export_with_payloads(tmp_path)
    result = breakdown(read_nsys_sqlite(path), whole_trace=True)
    calls = with_bandwidth(result.collectives)
    sized = calls[calls["bytes"] > 0]
    assert len(sized) > 0
    positive = sized["transfer_ns"] > 0
    assert np.allclose(
        sized.loc[positive, "busbw_gbps"],
        sized.loc[positive, "bytes"] / sized.loc[positive, "transfer_ns"],
    )  # sendrecv: factor 1
    stats = result.summary()["collectives"]["sendrecv"]
    assert stats["calls"] == 33 and stats["sized_calls"] == sized["seq"].nunique()
    assert stats["bytes_p50"] == int(np.median(sized["bytes"]))
    assert {
        "transfer_ns_p50",
        "wait_ns_p50",
        "spread_ns_p50",
        "spread_ns_p90",
        "busbw_gbps_p50",
        "algbw_gbps_p50",
    } <= set(stats)


def test_unknown_sizes_give_null_bytes_and_bandwidth_in_the_summary():
    stats = breakdown(read_nsys_sqlite(MFU_2GPU), whole_trace=True).summary()["collectives"][
        "sendrecv"
    ]
    assert stats["sized_calls"] == 0
    assert (
        stats["bytes_p50"] is None
        and stats["busbw_gbps_p50"] is None
        and stats["algbw_gbps_p50"] is None
    )
    json.dumps(stats)


def test_cross_rank_busbw_uses_transfer_time_after_the_last_rank_joined():
    b = late_joiner_allreduce("verifyprof.verify bs=1 tokens=4")
    trace = b.build()
    trace.collective_args = collective_args_table(
        [0, 1], [2000, 2000], [2000, 2000], [2, 2], ["allreduce", "allreduce"], trace.strings
    )
    trace.validate()
    stats = breakdown(trace).summary()["collectives"]["allreduce"]
    assert stats["bytes_p50"] == 2000
    assert stats["algbw_gbps_p50"] == pytest.approx(
        2000 / 100
    )  # 2000 B over the 100 ns after rank 1 joined
    assert stats["busbw_gbps_p50"] == pytest.approx(20.0 * 2 * 1 / 2)


# --- report ---------------------------------------------------------------------------------------


def console_text(result) -> str:
    out = io.StringIO()
    print_breakdown(result, Console(file=out, width=250, color_system=None))
    return out.getvalue()


def test_console_shows_one_rank_collective_kernels_with_bytes_and_lower_bound_busbw():
    text = console_text(breakdown(load_trace(B200), whole_trace=True))
    assert "Collective kernels (one rank" in text
    line = next(ln for ln in text.splitlines() if "allreduce" in ln and "MiB" in ln)
    assert "4.9 MiB" in line and line.split()[-2] == "8"  # ranks column
    assert "lower bound" in text


def test_console_shows_bytes_and_busbw_columns_across_ranks(tmp_path):
    path, _ = export_with_payloads(tmp_path)
    result = breakdown(read_nsys_sqlite(path), whole_trace=True)
    text = console_text(result)
    assert "bytes" in text and "busbw p50" in text and "GB/s" in text  # two-line headers
    stats = result.summary()["collectives"]["sendrecv"]
    line = next(ln for ln in text.splitlines() if ln.startswith("sendrecv"))
    assert (
        f"{stats['bytes_p50'] / 1024:.1f} KiB" in line and f"{stats['busbw_gbps_p50']:.1f}" in line
    )


def test_breakdown_json_carries_collective_kernels(b200_whole_breakdown_json):
    data = json.loads(b200_whole_breakdown_json)  # `verifyprof breakdown B200 --whole-trace --json`
    stats = data["summary"]["collective_kernels"]["allreduce"]
    assert stats["sized_calls"] == 73 and stats["bytes_p50"] == 5114880 and stats["group_size"] == 8


def test_an_nccl_range_enclosing_the_launch_gives_its_size_and_init_ranges_give_the_ranks():
    """Hand-built payload ranges (no real export with non-grouped NCCL calls and their payloads
    yet): ncclAllReduce / ncclAllGather / ncclReduceScatter each enclose their kernel's launch."""
    import pandas as pd

    from verifyprof.trace.events import StringTable
    from verifyprof.trace.nsys.nccl_join import join_sizes

    tid = 7
    payloads = pd.DataFrame(
        {
            "tid": tid,
            "start": [0, 100, 200, 300, 400],
            "end": [50, 150, 250, 350, 450],
            "text": [
                "ncclCommInitRank",
                "ncclAllReduce",
                "ncclAllGather",
                "ncclReduceScatter",
                "ncclAllReduce",
            ],
            "bytes": [-1, 57344, 1000, 2000, 4096],
            "comm": [9, 9, 9, 9, 9],
            "ranks": [4, -1, -1, -1, -1],
        }
    )
    launches = pd.DataFrame(
        {
            "kernel": [10, 11, 12, 13],
            "tid": tid,
            "start": [110, 210, 310, 460],
            "end": [120, 220, 320, 470],
        }
    )
    empty = pd.DataFrame({"tid": [], "start": [], "end": []}, dtype=np.int64)
    strings = StringTable()
    table = join_sizes(launches, payloads, {"start": empty, "end": empty}, strings)
    got = {
        k: (b, o, g, c)
        for k, b, o, g, c in zip(
            table["kernel"],
            table["bytes"],
            table["out_bytes"],
            table["group_size"],
            strings.lookup(table["collective"].to_numpy()),
        )
    }
    assert got == {
        10: (57344, 57344, 4, "allreduce"),
        11: (1000, 4000, 4, "allgather"),  # NCCL's payload is the rank's share: out = n x in
        12: (8000, 2000, 4, "reducescatter"),  # and here the output: in = n x out
    }  # kernel 13 was launched after its range closed: no size
