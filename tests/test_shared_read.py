"""An nsys export mapped in shares of its processes has its kernel and runtime tables read once,
in the map's own process, and split by share in numpy (``trace.nsys.shared_read``): each share's
trace is the one its own SQL-filtered read gives, to the nanosecond, and workers forked during the
map take their share from that read. Where numpy could not compare as SQL does (NULL or REAL
process ids), nothing is split and the shares read as before."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, public_export

from verifyprof.trace import load_trace
from verifyprof.trace.nsys import shared_read
from verifyprof.trace.nsys.export import NsysExport, ProcessFilter
from verifyprof.trace.shares import process_shares

sys.path.insert(0, str(REPO / "bench"))
import gen_nsys_export

NSYS_2GPU = public_export("nsysai_mfu_2gpu_after_nsys2026.2.sqlite")
TABLES = ("kernels", "copies", "graphs", "api", "ranges", "devices", "processes")


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shared") / "tp4.sqlite"
    gen_nsys_export.generate(path, kernels=12_000, ranks=4, layers=4, seed=5)
    return path


def assert_same_trace(a, b) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True)
    assert list(a.strings) == list(b.strings)
    assert a.meta == b.meta and a.warnings == b.warnings
    assert repr(a.integrity) == repr(b.integrity)


def read_both(path: Path, n: int) -> tuple[list, list, int]:
    """Each share read by its SQL filter, then each share taken from one read; how many shares
    the one read split."""
    shares = process_shares(path, n, min_kernels=0)
    assert shares is not None
    by_sql = [load_trace(path, share) for share in shares]
    with shared_read.read_once(path, shares):
        split = len(shared_read._SHARES)
        once = [load_trace(path, share) for share in shares]
    assert not shared_read._SHARES  # nothing kept after the map
    return by_sql, once, split


@pytest.mark.parametrize("n", [2, 3, 4])
def test_each_share_taken_from_one_read_is_the_trace_its_sql_filter_reads(four_ranks, n):
    by_sql, once, split = read_both(four_ranks, n)
    assert split == n
    for a, b in zip(by_sql, once):
        assert len(a.kernels) and len(a.api)
        assert_same_trace(a, b)


def test_a_real_two_gpu_export_read_once_gives_each_share_its_own_rows():
    by_sql, once, split = read_both(NSYS_2GPU, 2)
    assert split == 2
    for a, b in zip(by_sql, once):
        assert_same_trace(a, b)


def test_a_share_is_taken_once_then_read_from_sqlite(four_ranks):
    shares = process_shares(four_ranks, 2, min_kernels=0)
    with shared_read.read_once(four_ranks, shares):
        with NsysExport(four_ranks, shares[0]) as export:
            assert shared_read.take_share(export) is not None
            assert shared_read.take_share(export) is None
        with NsysExport(four_ranks) as export:  # a whole read is never served from shares
            assert shared_read.take_share(export) is None


def _take_in_child(path: str, share, answer) -> None:
    with NsysExport(Path(path), share) as export:
        taken = shared_read.take_share(export)
    answer.send(None if taken is None else taken["kernels"].n)


def test_a_worker_forked_during_the_map_takes_its_share_from_the_one_read(four_ranks):
    shares = process_shares(four_ranks, 2, min_kernels=0)
    expected = len(load_trace(four_ranks, shares[1]).kernels)
    context = multiprocessing.get_context("fork")
    with shared_read.read_once(four_ranks, shares):
        parent, child = context.Pipe()
        worker = context.Process(target=_take_in_child, args=(str(four_ranks), shares[1], child))
        worker.start()
        got = parent.recv()
        worker.join()
    assert got == expected


def edited(path: Path, tmp_path: Path, statement: str) -> Path:
    copy = tmp_path / "edited.sqlite"
    shutil.copy(path, copy)
    con = sqlite3.connect(copy)
    con.execute(statement)
    con.commit()
    con.close()
    return copy


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE rowid % 97 = 0",
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = globalTid + 0.5 WHERE rowid % 89 = 0",
    ],
    ids=["null process id", "real process id"],
)
def test_process_ids_numpy_cannot_compare_as_sql_does_leave_the_shares_to_sql(
    four_ranks, tmp_path, statement
):
    by_sql, once, split = read_both(edited(four_ranks, tmp_path, statement), 2)
    assert split == 0
    for a, b in zip(by_sql, once):
        assert_same_trace(a, b)


def test_shares_that_name_a_process_twice_are_not_split_and_each_reads_its_own_rows(four_ranks):
    first, rest = process_shares(four_ranks, 2, min_kernels=0)
    shares = [first, ProcessFilter(tuple(reversed(first.pids))), rest]  # the first's, twice
    by_sql = [load_trace(four_ranks, share) for share in shares]
    with shared_read.read_once(four_ranks, shares):
        assert not shared_read._SHARES
        once = [load_trace(four_ranks, share) for share in shares]
    for a, b in zip(by_sql, once):
        assert_same_trace(a, b)


def test_tables_larger_than_the_one_read_may_hold_are_left_to_each_share(four_ranks, monkeypatch):
    monkeypatch.setattr(shared_read, "MAX_ROWS", 1_000)  # the 4-rank export: ~20k rows
    by_sql, once, split = read_both(four_ranks, 2)
    assert split == 0
    for a, b in zip(by_sql, once):
        assert_same_trace(a, b)


def counted_reads(monkeypatch) -> list[str]:
    """The name of the thread of each one read of the big tables, as they are made."""
    reads: list[str] = []
    real = shared_read._read_split

    def counted(path, shares):
        reads.append(threading.current_thread().name)
        return real(path, shares)

    monkeypatch.setattr(shared_read, "_read_split", counted)
    return reads


def test_a_read_started_ahead_is_the_one_read_the_map_takes(four_ranks, monkeypatch):
    reads = counted_reads(monkeypatch)
    shares = process_shares(four_ranks, 2, min_kernels=0)
    by_sql = [load_trace(four_ranks, share) for share in shares]
    before = set(threading.enumerate())  # a test run's own threads (xdist's, an earlier test's)
    shared_read.read_ahead(lambda: (four_ranks, shares))
    with shared_read.read_once(four_ranks, shares):
        assert set(threading.enumerate()) <= before  # the read's threads ended: workers may fork
        once = [load_trace(four_ranks, share) for share in shares]
    assert reads == ["verifyprof-read-ahead"]
    for a, b in zip(by_sql, once):
        assert_same_trace(a, b)


def test_a_read_ahead_for_other_shares_is_dropped_and_the_map_reads_its_own(
    four_ranks, monkeypatch
):
    reads = counted_reads(monkeypatch)
    shares = process_shares(four_ranks, 2, min_kernels=0)
    before = set(threading.enumerate())
    shared_read.read_ahead(lambda: (four_ranks, process_shares(four_ranks, 3, min_kernels=0)))
    with shared_read.read_once(four_ranks, shares):
        assert set(threading.enumerate()) <= before
        assert len(shared_read._SHARES) == 2
    assert reads == ["verifyprof-read-ahead", threading.current_thread().name]


def test_a_read_ahead_that_failed_is_made_again_by_the_map(four_ranks, monkeypatch):
    reads = counted_reads(monkeypatch)
    counted = shared_read._read_split

    def fails_in_its_thread(path, shares):
        if threading.current_thread().name == "verifyprof-read-ahead":
            reads.append("failed")
            raise MemoryError("the read-ahead's own failure")
        return counted(path, shares)

    monkeypatch.setattr(shared_read, "_read_split", fails_in_its_thread)
    shares = process_shares(four_ranks, 2, min_kernels=0)
    shared_read.read_ahead(lambda: (four_ranks, shares))
    with shared_read.read_once(four_ranks, shares):
        assert len(shared_read._SHARES) == 2  # the workers still take the one read
    assert reads == ["failed", threading.current_thread().name]


def test_the_read_ahead_loads_no_pandas_so_pandas_loads_beside_it():
    probe = (
        "import sys; import verifyprof.pipeline.read_ahead, verifyprof.trace.nsys.shared_read;"
        " print('pandas' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.stdout.strip() == "False", done.stdout + done.stderr


def test_a_breakdown_that_fails_after_its_read_ahead_started_keeps_nothing_of_it(
    four_ranks, tmp_path
):
    bad = tmp_path / "taxonomy.toml"
    bad.write_text("[[kernel]\nname = ")  # fails as the run loads it, after the read started
    program = (
        "import sys\n"
        "from verifyprof.cli import main\n"
        "from verifyprof.trace.nsys import shared_read\n"
        f"sys.argv = ['verifyprof', 'breakdown', {str(four_ranks)!r}, '--workers', '2',"
        f" '--taxonomy', {str(bad)!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    print('exit', done.code)\n"
        "print('held', len(shared_read._AHEAD))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.stdout.split() == ["exit", "2", "held", "0"], done.stdout + done.stderr
    assert "taxonomy" in done.stderr and "Traceback" not in done.stderr


def test_the_cli_breakdown_takes_its_read_ahead_as_its_one_read(four_ranks):
    program = (
        "import sys, threading\n"
        "from verifyprof.cli import main\n"
        "from verifyprof.trace.nsys import shared_read\n"
        "reads, split = [], shared_read._read_split\n"
        "def counted(path, shares):\n"
        "    reads.append(threading.current_thread().name)\n"
        "    return split(path, shares)\n"
        "shared_read._read_split = counted\n"
        "import verifyprof.trace.shares as shares\n"
        "shares.SHARE_MIN_KERNELS = 0  # the fixture's 12,000 kernels are shared out too\n"
        f"sys.argv = ['verifyprof', 'breakdown', {str(four_ranks)!r}, '--workers', '2', '--json']\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print('reads', *reads, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.split()[-2:] == ["reads", "verifyprof-read-ahead"], done.stderr
