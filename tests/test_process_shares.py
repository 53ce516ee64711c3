"""One large nsys export of many GPU processes (one per rank) is read in shares of its processes,
one worker each, and reduced as per-rank files are: the same breakdown as reading it whole, with
every row of the export in exactly one share."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import PUBLIC, REPO, public_export
from golden_cases import differences

from verifyprof import pipeline
from verifyprof.pipeline.parallel import ParallelOptions
from verifyprof.trace import load_trace
from verifyprof.trace import shares as shares_module
from verifyprof.trace.shares import process_shares

sys.path.insert(0, str(REPO / "bench"))
import gen_nsys_export

NSYS_2GPU = public_export("nsysai_mfu_2gpu_before_nsys2026.2.sqlite")
ONE_GPU = PUBLIC / "nsys" / "flameox_cudagraph_rtx3060_nsys2025.5.sqlite"


@pytest.fixture
def any_size(monkeypatch):
    """Shares for exports of any size (the shipped real traces are small)."""
    monkeypatch.setattr(shares_module, "SHARE_MIN_KERNELS", 0)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shares") / "tp4.sqlite"
    gen_nsys_export.generate(path, kernels=12_000, ranks=4, layers=4, seed=11)
    return path


def as_json(result) -> dict:
    return json.loads(json.dumps(result.to_json()))


def whole_and_shared(path: Path, workers: int, **options) -> tuple[dict, dict, int]:
    whole = pipeline.breakdown(path, parallel=ParallelOptions(workers=1), **options)
    shared = pipeline.breakdown(path, parallel=ParallelOptions(workers=workers), **options)
    return as_json(whole), as_json(shared), shared.extra.get("process_shares", 0)


@pytest.mark.parametrize("whole_trace", [True, False])
def test_real_two_gpu_export_read_in_shares_gives_the_breakdown_read_whole(any_size, whole_trace):
    expected, got, shares = whole_and_shared(NSYS_2GPU, 2, step_regex=".", whole_trace=whole_trace)
    assert shares == 2
    assert "sendrecv" in got["summary"]["collectives"]  # matched across the two shares' devices
    assert differences(expected, got) == []


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_four_rank_export_in_any_number_of_shares_gives_the_breakdown_read_whole(
    any_size, four_ranks, workers
):
    expected, got, shares = whole_and_shared(four_ranks, workers)
    assert shares == workers
    assert {s["rank"] for s in got["steps"]} == {0, 1, 2, 3}
    assert differences(expected, got) == []


def test_the_shares_hold_every_row_of_the_export_once(four_ranks):
    whole = load_trace(four_ranks)
    parts = [
        load_trace(four_ranks, share) for share in process_shares(four_ranks, 3, min_kernels=0)
    ]
    for table in ("kernels", "api", "ranges", "copies"):
        assert sum(len(getattr(p, table)) for p in parts) == len(getattr(whole, table)), table
    pids = [set(np.unique(p.kernels["pid"].to_numpy()).tolist()) for p in parts]
    assert all(a.isdisjoint(b) for i, a in enumerate(pids) for b in pids[i + 1 :])


def test_the_last_share_takes_every_process_the_others_do_not_name(four_ranks):
    found = process_shares(four_ranks, 2, min_kernels=0)
    assert [s.rest for s in found] == [False, True]
    assert (
        found[1].pids == found[0].pids
    )  # "all but these": a process the sample missed is still read


def test_small_and_one_process_exports_are_read_whole(four_ranks):
    assert process_shares(four_ranks, 2) is None  # 12k kernels: under the default size
    assert process_shares(ONE_GPU, 2, min_kernels=0) is None
    assert process_shares(four_ranks, 1, min_kernels=0) is None


def test_a_gzipped_export_is_read_in_shares_of_its_decompressed_copy_and_named_as_given(
    any_size, four_ranks, tmp_path
):
    gz = tmp_path / "tp4.sqlite.gz"
    with four_ranks.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    expected, got, shares = whole_and_shared(gz, 2)
    assert shares == 2
    assert got["trace"]["path"] == [str(gz)]
    assert differences(expected, got) == []


def edited(four_ranks: Path, tmp_path: Path, *sql: str) -> Path:
    """A copy of the 4-rank export with ``sql`` applied (``:last`` = the last GPU process's
    globalPid)."""
    import sqlite3

    path = tmp_path / "edited.sqlite"
    shutil.copy(four_ranks, path)
    con = sqlite3.connect(path)
    last = con.execute("SELECT max(globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    for statement in sql:
        con.execute(statement.replace(":last", str(last)))
    con.commit()
    con.close()
    return path


def test_processes_of_different_shares_on_one_gpu_keep_its_one_device(
    any_size, four_ranks, tmp_path
):
    path = edited(
        four_ranks,
        tmp_path,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 0 WHERE globalPid = :last",
        "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = 0 WHERE globalPid = :last",
    )
    expected, got, shares = whole_and_shared(path, 2)
    assert shares == 2 and differences(expected, got) == []


def test_processes_that_ran_one_after_another_in_one_file_are_not_separate_runs(
    any_size, four_ranks, tmp_path
):
    late = [
        f'UPDATE {t} SET start = start + 10000000000, "end" = "end" + 10000000000 WHERE {col}'
        for t, col in (
            ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid = :last"),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid = :last"),
            ("CUPTI_ACTIVITY_KIND_RUNTIME", "(globalTid >> 24) = (:last >> 24)"),
            ("NVTX_EVENTS", "(globalTid >> 24) = (:last >> 24) AND eventType != 75"),
        )
    ]
    expected, got, shares = whole_and_shared(edited(four_ranks, tmp_path, *late), 2)
    assert shares == 2 and differences(expected, got) == []


def test_a_gpu_process_without_ranges_makes_the_file_read_whole(any_size, four_ranks, tmp_path):
    path = edited(
        four_ranks,
        tmp_path,
        "DELETE FROM NVTX_EVENTS WHERE (globalTid >> 24) = (:last >> 24) AND eventType != 75",
    )
    expected, got, shares = whole_and_shared(path, 4)
    assert (
        shares == 0
    )  # the share of that process has no steps: its kernels still count, so no shares
    assert differences(expected, got) == []


def test_rows_dropped_in_several_shares_are_one_warning_counted_over_the_file(
    any_size, four_ranks, tmp_path
):
    path = edited(
        four_ranks,
        tmp_path,
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 1 WHERE rowid % 500 = 0',
    )
    expected, got, shares = whole_and_shared(path, 3)
    con = sqlite3.connect(path)
    bad, rows = con.execute(
        'SELECT sum("end" < start), count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL'
    ).fetchone()
    con.close()
    dropped = [w for w in got["trace"]["warnings"] if "rows of kernels dropped" in w]
    assert shares == 3 and bad > 0
    assert len(dropped) == 1 and dropped[0].startswith(f"{bad} of {rows} rows of kernels dropped")
    assert differences(expected, got) == []
