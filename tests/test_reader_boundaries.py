"""The readers' boundary (issue 11's probe list): bad rows become a counted warning or a one-line
error naming the file, never a traceback, never a silently wrong number; inputs stay untouched.

Every case edits a copy of a real trace: the project's own H200 export (dense eager workload)
and a small public nsys export with sqlite3, the public MI300X Kineto trace as JSON.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from clirun import digest, folder_state, run_cli
from conftest import OWN_TRACES, PUBLIC, in_threads

from verifyprof.contracts.errors import TraceError
from verifyprof.trace import load_trace

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
DENSE_GZ = OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz"
MOCK = PUBLIC / "nsys" / "nsysai_mock_rtx3080_nsys2026.1.sqlite"
MI300X = PUBLIC / "kineto" / "tracelens_mi300x_sglang_qwen3-8b_decode.json.gz"
A100 = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
B200 = PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz"
DENSE_WALL_MEAN_MS = (
    12.631  # verify steps of the unedited export (tests/golden/breakdown-dense-eager.json)
)
as_root = os.geteuid() == 0


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYPROF_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def dense_export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("dense") / "dense.sqlite"
    with gzip.open(DENSE_GZ, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def edited(source: Path, folder: Path, *statements: str, name: str = "edited.sqlite") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    shutil.copyfile(source, path)
    con = sqlite3.connect(path)
    con.executescript(";\n".join(statements))
    con.commit()
    con.close()
    return path


def without_constraints(table: str) -> list[str]:
    """Rebuild ``table`` without NOT NULL constraints, so that NULL can be written into it."""
    return [
        f'CREATE TABLE t_copy AS SELECT * FROM "{table}"',
        f'DROP TABLE "{table}"',
        f'ALTER TABLE t_copy RENAME TO "{table}"',
    ]


def one_line_error(result, path: Path, *fragments: str) -> str:
    assert result.crash is None, f"traceback: {result.crash!r}"
    assert result.code == 2, result.text
    line = result.err.strip()
    assert "\n" not in line and "Traceback" not in result.text
    assert str(path) in line
    for fragment in fragments:
        assert fragment in line, line
    return line


def wall_mean_ms(output: str) -> float:
    return float(re.search(r"^wall\s+([\d.]+)", output, re.M).group(1))  # the lead table's wall row


# --- nsys: timestamps -----------------------------------------------------------------------------


def test_kernel_rows_with_null_start_are_dropped_and_counted_not_summed(dense_export, tmp_path):
    """A NULL start read as -1 once made the verify wall 451.767 ms instead of 12.631."""
    path = edited(
        dense_export,
        tmp_path,
        *without_constraints(KERNEL),
        f"UPDATE {KERNEL} SET start = NULL WHERE rowid % 10 = 0",
    )
    before = digest(path)
    result = run_cli("breakdown", path)
    assert result.code == 0 and result.crash is None
    assert "7072 of 70722 rows of kernels dropped" in " ".join(result.out.split())
    assert wall_mean_ms(result.out) == pytest.approx(DENSE_WALL_MEAN_MS, rel=0.05)
    assert digest(path) == before


@pytest.mark.parametrize(
    "change, what",
    [
        ('"end" = NULL', "NULL end"),
        ('"end" = start - 1000', "end before start"),
        ("start = 9223372036854775000", "start near int64 max"),
    ],
)
def test_one_bad_kernel_row_is_dropped_with_a_warning(dense_export, tmp_path, change, what):
    path = edited(
        dense_export,
        tmp_path,
        *without_constraints(KERNEL),
        f"UPDATE {KERNEL} SET {change} WHERE rowid = 500",
    )
    trace = load_trace(path)
    trace.validate()
    assert len(trace.kernels) == 70721, what
    assert "1 of 70722 rows of kernels dropped" in " ".join(trace.warnings)
    result = run_cli("breakdown", path)
    assert result.code == 0 and result.crash is None, what
    assert wall_mean_ms(result.out) == pytest.approx(DENSE_WALL_MEAN_MS, rel=0.01)


@pytest.mark.parametrize(
    "edit",
    [
        f"ALTER TABLE {KERNEL} DROP COLUMN start",
        f"ALTER TABLE {KERNEL} RENAME COLUMN start TO begin",
    ],
)
def test_a_kernel_table_without_its_start_column_is_a_one_line_error(dense_export, tmp_path, edit):
    path = edited(dense_export, tmp_path, edit)
    one_line_error(run_cli("breakdown", path), path, f"{KERNEL} has no 'start' column")


def test_no_kernel_row_with_a_valid_time_is_an_error_not_an_empty_analysis(tmp_path):
    path = edited(
        MOCK,
        tmp_path,
        *without_constraints(KERNEL),
        f"UPDATE {KERNEL} SET start = NULL",
        "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    )
    one_line_error(
        run_cli("breakdown", path, "--whole-trace"),
        path,
        "no GPU activity row has valid timestamps",
    )


# --- nsys: rowids, schema versions ----------------------------------------------------------------


@pytest.mark.parametrize("rowid", [9223372036854775807, -7, 1 << 40])
def test_huge_or_negative_rowids_read_every_row(tmp_path, rowid):
    path = edited(
        MOCK,
        tmp_path,
        f"UPDATE {KERNEL} SET rowid = {rowid} WHERE rowid = (SELECT max(rowid) FROM {KERNEL})",
    )
    original, changed = load_trace(MOCK), load_trace(path)
    assert len(changed.kernels) == len(original.kernels)
    assert sorted(changed.kernels["start"]) == sorted(original.kernels["start"])


def test_unknown_export_schema_version_reads_with_a_warning(tmp_path):
    path = edited(
        MOCK,
        tmp_path,
        "UPDATE META_DATA_EXPORT SET value = '9.1.0' WHERE name = 'EXPORT_SCHEMA_VERSION'",
    )
    trace = load_trace(path)
    assert len(trace.kernels) == len(load_trace(MOCK).kernels)
    assert any("schema version '9.1.0'" in w for w in trace.warnings)
    assert not any("schema version" in w for w in load_trace(MOCK).warnings)


# --- read-only opens ------------------------------------------------------------------------------


def wal_copy(folder: Path) -> Path:
    path = edited(MOCK, folder, "PRAGMA journal_mode = WAL", name="wal.sqlite")
    assert not (folder / "wal.sqlite-wal").exists()  # closed cleanly: the WAL was folded in
    return path


def test_a_wal_mode_export_is_read_without_creating_files_beside_it(tmp_path):
    path = wal_copy(tmp_path / "in")
    before = folder_state(path.parent)
    trace = load_trace(path)
    assert len(trace.kernels) == len(load_trace(MOCK).kernels)
    assert folder_state(path.parent) == before  # no -shm, no -wal, bytes unchanged


@pytest.mark.skipif(as_root, reason="root writes into read-only folders")
def test_a_wal_mode_export_in_a_read_only_folder_is_not_called_corrupt(tmp_path):
    path = wal_copy(tmp_path / "in")
    path.parent.chmod(0o555)
    try:
        assert len(load_trace(path).kernels) == len(load_trace(MOCK).kernels)
    finally:
        path.parent.chmod(0o755)


def test_content_still_in_a_wal_file_is_read_from_a_copy_and_the_folder_is_untouched(tmp_path):
    folder = tmp_path / "in"
    path = wal_copy(folder)
    writer = sqlite3.connect(path)  # commit a change that stays in -wal while the writer is open
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    name_id = writer.execute(f"SELECT demangledName FROM {KERNEL} LIMIT 1").fetchone()[0]
    writer.execute("UPDATE StringIds SET value = 'renamed_in_wal' WHERE id = ?", (name_id,))
    writer.commit()
    snapshot = tmp_path / "snapshot"  # the database and its -wal, as a crashed writer leaves them
    snapshot.mkdir()
    for f in folder.iterdir():
        if f.name != "wal.sqlite-shm":
            shutil.copyfile(f, snapshot / f.name)
    writer.close()
    before = folder_state(snapshot)
    trace = load_trace(snapshot / "wal.sqlite")
    assert "renamed_in_wal" in set(trace.names("kernels"))
    assert folder_state(snapshot) == before


# --- Kineto: numeric fields given as lists --------------------------------------------------------


def kineto_with(tmp_path: Path, edit) -> Path:
    with gzip.open(MI300X, "rt") as handle:
        doc = json.load(handle)
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cuda_runtime", "gpu_memcpy", "user_annotation"):
            edit(e)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


def listed(key: str, arg: bool = False):
    def edit(event: dict) -> None:
        holder = event.get("args", {}) if arg else event
        if key in holder:
            holder[key] = [holder[key]]

    return edit


@pytest.mark.parametrize(
    "key, arg, label",
    [
        ("tid", False, "tid"),
        ("device", True, "args.device"),
        ("correlation", True, "args.correlation"),
        ("pid", False, "pid"),
    ],
)
def test_kineto_numbers_given_as_lists_are_counted_and_read_as_missing(tmp_path, key, arg, label):
    path = kineto_with(tmp_path, listed(key, arg))
    trace = load_trace(path)
    trace.validate()
    assert any("read as missing: " in w and label in w for w in trace.warnings), trace.warnings
    result = run_cli("breakdown", path, "--whole-trace")
    assert result.crash is None and result.code in (0, 2), result.text
    assert "Traceback" not in result.text


def test_kineto_timestamps_given_as_lists_are_a_one_line_error(tmp_path):
    path = kineto_with(tmp_path, listed("ts"))
    one_line_error(
        run_cli("breakdown", path, "--whole-trace"), path, "no usable GPU events", "ts/dur"
    )


def test_kineto_durations_given_as_lists_leave_no_event_an_end_a_one_line_error(tmp_path):
    """A dur read as missing is an event without an end: dropped and counted (it once read as a
    zero-length event, silently), so with every dur a list no GPU row is left."""
    path = kineto_with(tmp_path, listed("dur"))
    one_line_error(
        run_cli("breakdown", path, "--whole-trace"),
        path,
        "no GPU activity row has valid timestamps",
    )


def test_kineto_events_without_a_usable_ts_are_dropped_and_counted(tmp_path):
    kernels = iter(range(10**6))
    path = kineto_with(
        tmp_path,
        lambda e: e.update(ts=1e300) if e.get("cat") == "kernel" and next(kernels) < 5 else None,
    )
    trace = load_trace(path)
    assert len(trace.kernels) == 550
    assert any("5 events without a usable ts/dur dropped" in w for w in trace.warnings)


# --- Kineto: files that are not one run's ---------------------------------------------------------


def test_one_rank_given_twice_is_an_error_naming_both_files(tmp_path):
    shutil.copyfile(B200, tmp_path / "a.json.gz")
    shutil.copyfile(B200, tmp_path / "b.json.gz")
    line = one_line_error(
        run_cli("breakdown", tmp_path, "--whole-trace"), tmp_path / "a.json.gz", "claims rank 0"
    )
    assert str(tmp_path / "b.json.gz") in line


def test_unrelated_traces_in_one_folder_are_refused_by_name(tmp_path):
    shutil.copyfile(A100, tmp_path / A100.name)
    shutil.copyfile(B200, tmp_path / B200.name)
    line = one_line_error(
        run_cli("breakdown", tmp_path, "--whole-trace"), tmp_path / A100.name, "different runs"
    )
    assert str(tmp_path / B200.name) in line


# --- inputs that are not plain files --------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_fifo_given_as_the_trace_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    one_line_error(run_cli("breakdown", fifo), fifo, "FIFO")


def test_a_symlink_loop_is_called_a_loop(tmp_path):
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    one_line_error(run_cli("breakdown", tmp_path / "a.json"), tmp_path / "a.json", "symlink loop")


@pytest.mark.skipif(as_root, reason="root lists unreadable directories (test_path_errors runs it)")
def test_an_unreadable_directory_is_a_one_line_error(tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    shutil.copyfile(MI300X, folder / MI300X.name)
    folder.chmod(0)
    try:
        one_line_error(run_cli("breakdown", folder), folder, "permission denied")
    finally:
        folder.chmod(0o755)


def test_a_taxonomy_that_is_not_utf8_is_a_one_line_error(tmp_path):
    taxonomy = tmp_path / "rules.toml"
    taxonomy.write_bytes(b'[phases]\nattention = ["\xff\xfe"]\n')
    one_line_error(
        run_cli("breakdown", MI300X, "--whole-trace", "--taxonomy", taxonomy), taxonomy, "not UTF-8"
    )


# --- the cache -----------------------------------------------------------------------------------


def gzipped_export(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "mock.sqlite.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(MOCK.read_bytes()))
    return path


def test_an_unwritable_cache_is_blamed_on_the_cache_not_the_input(tmp_path, monkeypatch):
    path = gzipped_export(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("VERIFYPROF_CACHE", str(blocker / "cache"))
    line = one_line_error(run_cli("breakdown", path, "--whole-trace"), path, "cache", str(blocker))
    assert "corrupt" not in line and "gzip" not in line


def test_a_damaged_cache_entry_is_rebuilt_not_read(tmp_path):
    path = gzipped_export(tmp_path)
    expected = len(load_trace(path).kernels)
    (entry,) = (tmp_path / "cache").glob("*.sqlite")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # a cut-off entry
    assert len(load_trace(path).kernels) == expected
    assert entry.stat().st_size == MOCK.stat().st_size


def test_a_gzip_holding_a_truncated_export_is_not_cached(tmp_path):
    path = tmp_path / "cut.sqlite.gz"
    path.write_bytes(gzip.compress(MOCK.read_bytes()[:200_000]))
    with pytest.raises(TraceError, match="truncated SQLite file") as info:
        load_trace(path)
    assert str(path) in str(info.value)
    assert not list((tmp_path / "cache").glob("*.sqlite"))


def test_concurrent_reads_of_one_gzip_all_get_the_whole_export(tmp_path):
    path = gzipped_export(tmp_path)
    counts, errors = in_threads(lambda: len(load_trace(path).kernels), 4)
    assert not errors and counts == [counts[0]] * 4
    assert len(list((tmp_path / "cache").iterdir())) == 1  # one entry, no temp files left


def test_the_cache_is_pruned_by_age_then_by_size(tmp_path, monkeypatch):
    import time

    from verifyprof.trace.cache import prune

    cache = tmp_path / "cache"
    cache.mkdir()
    now = time.time()
    ages_days = {"old.sqlite": 40, "mid.sqlite": 5, "new.sqlite": 1}
    for name, days in ages_days.items():
        entry = cache / name
        entry.write_bytes(b"x" * 1000)
        (cache / f"{name}.json").write_text("{}")
        os.utime(entry, (now - days * 86_400, now - days * 86_400))
    (cache / "notes.txt").write_text("not ours")
    monkeypatch.setenv("VERIFYPROF_CACHE_MAX_AGE_DAYS", "30")
    monkeypatch.setenv("VERIFYPROF_CACHE_MAX_BYTES", "1.5K")
    prune(cache, now)
    assert sorted(p.name for p in cache.iterdir()) == ["new.sqlite", "new.sqlite.json", "notes.txt"]
