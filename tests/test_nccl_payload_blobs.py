"""NCCL message sizes decoded from real NVTX payload blobs (H200, nsys 2025.3.1, NCCL 2.28.9)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from verifyprof.trace.cache import gunzipped
from verifyprof.trace.nsys.export import ProcessFilter
from verifyprof.trace.nsys.nccl_payloads import nccl_payload_ranges

FIXTURE = Path(__file__).parent / "data" / "nccl_payloads"


def program_calls() -> list[dict]:
    log = (FIXTURE / "profile.log").read_text()
    return json.loads(log[log.index("{") : log.rindex("}") + 1])["calls"]


def test_every_nccl_call_decodes_to_the_size_the_program_used():
    path = gunzipped(FIXTURE / "nccl_1gpu_h200_blobs.sqlite.gz", ".sqlite")
    uri = f"file:{path}?mode=ro"
    con = sqlite3.connect(uri, uri=True)
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    payloads, warnings = nccl_payload_ranges(con, uri, tables)
    assert warnings == [] and payloads is not None
    names = {
        "all_reduce": "ncclAllReduce",
        "broadcast": "ncclBroadcast",
        "all_gather": "ncclAllGather",
    }
    calls = payloads[payloads["text"].isin(names.values())].sort_values("start")
    expected = [(names[c["op"]], c["bytes"]) for c in program_calls()]
    assert list(zip(calls["text"], calls["bytes"])) == expected
    assert calls["comm"].nunique() == 1
    init = payloads[payloads["text"] == "ncclCommInitRankConfig"]
    assert init["ranks"].tolist() == [1]


def test_a_share_of_the_processes_reads_only_its_processes_payloads():
    path = gunzipped(FIXTURE / "nccl_1gpu_h200_blobs.sqlite.gz", ".sqlite")
    uri = f"file:{path}?mode=ro"
    con = sqlite3.connect(uri, uri=True)
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    (pid,) = con.execute("SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    every, _ = nccl_payload_ranges(con, uri, tables)
    mine, warnings = nccl_payload_ranges(con, uri, tables, ProcessFilter((pid,)))
    assert warnings == [] and mine is not None and mine.equals(every)
    another = pid + (1 << 24)  # a process id the export does not hold
    for share in (ProcessFilter((another,)), ProcessFilter((pid,), rest=True)):
        # no payload of its own, and none missing from the export: nothing read, nothing to warn of
        assert nccl_payload_ranges(con, uri, tables, share) == (None, [])
