"""nsys SQLite reader, bad input: one clear error naming the file, the input untouched, through
the reader and through the CLI (exit 2, one line, no traceback). Real exports, broken on purpose
in copies."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from test_nsys_reader import (
    FLAMEOX,
    MFU_BEFORE,
    MOCK,
    PIPIT,
    copy_of,
    edit,
    fingerprint,
    needs_public,
)

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.nsys.reader import read_nsys_sqlite


def expect_error(path: Path, *fragments: str) -> TraceError:
    before = fingerprint(path)
    with pytest.raises(TraceError) as info:
        read_nsys_sqlite(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message
    assert fingerprint(path) == before
    return info.value


def test_bad_input_not_sqlite(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("this is not a trace\n")
    expect_error(path, "not an SQLite file")


@needs_public
def test_bad_input_truncated_sqlite(tmp_path):
    path = tmp_path / "truncated.sqlite"
    data = MFU_BEFORE.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    expect_error(path, "truncated SQLite file")


@needs_public
def test_bad_input_corrupt_pages(tmp_path):
    data = bytearray(MFU_BEFORE.read_bytes())
    rng = np.random.default_rng(0)
    for offset in range(len(data) // 3, len(data) // 3 + 200_000, 4096):
        data[offset : offset + 512] = rng.integers(0, 256, 512, dtype=np.uint8).tobytes()
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(bytes(data))
    expect_error(path, "corrupt")


def test_bad_input_sqlite_that_is_not_an_nsys_export(tmp_path):
    path = tmp_path / "app.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'a')")
    con.commit()
    con.close()
    expect_error(path, "not an Nsight Systems export")


@needs_public
def test_bad_input_export_without_a_kernel_table(tmp_path):
    path = copy_of(MOCK, tmp_path, "nokernels.sqlite")
    edit(path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    expect_error(path, "no CUPTI_ACTIVITY_KIND_KERNEL table")


@needs_public
def test_bad_input_lazy_export_of_an_empty_capture(tmp_path):
    path = copy_of(MOCK, tmp_path, "empty_lazy.sqlite")
    edit(path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY")
    expect_error(path, "empty capture", "--trace=cuda")


@needs_public
def test_bad_input_non_lazy_export_of_an_empty_capture(tmp_path):
    """nsys 2022.2 exports every table; a capture without GPU work has them all empty."""
    path = copy_of(PIPIT, tmp_path, "empty_2022.sqlite")
    edit(
        path,
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "DELETE FROM CUPTI_ACTIVITY_KIND_MEMSET",
    )
    expect_error(path, "empty capture: no GPU activity")


@needs_public
def test_bad_input_graph_mode_capture_with_only_whole_graph_rows(tmp_path):
    path = copy_of(FLAMEOX, tmp_path, "graphs_only.sqlite")
    edit(path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    expect_error(path, "--cuda-graph-trace=node")


def test_bad_input_missing_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_nsys_sqlite(tmp_path / "absent.sqlite")


# --- bad input through the CLI (reader-level errors: exit 2, one line, no traceback) --------------


def run_cli(path: Path):
    """`verifyprof breakdown PATH` through cli.main in-process (tests/cli_helpers.py)."""
    from cli_helpers import verifyprof

    return verifyprof("breakdown", str(path))


def assert_cli_error(path: Path, fragment: str) -> None:
    before = fingerprint(path)
    done = run_cli(path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and fragment in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert fingerprint(path) == before


def test_cli_not_a_trace(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("hello\n")
    assert_cli_error(path, "not a trace")


@needs_public
def test_cli_truncated_export(tmp_path):
    path = tmp_path / "truncated.sqlite"
    data = MOCK.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    assert_cli_error(path, "truncated SQLite file")


def test_cli_sqlite_that_is_not_an_nsys_export(tmp_path):
    path = tmp_path / "app.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    assert_cli_error(path, "not an Nsight Systems export")


@needs_public
def test_cli_export_without_a_kernel_table(tmp_path):
    path = copy_of(MOCK, tmp_path, "nokernels.sqlite")
    edit(path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    assert_cli_error(path, "no CUPTI_ACTIVITY_KIND_KERNEL table")


@needs_public
def test_cli_empty_capture(tmp_path):
    path = copy_of(PIPIT, tmp_path, "empty.sqlite")
    edit(path, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    assert_cli_error(path, "empty capture")


def test_cli_gzipped_export_holding_no_sqlite_file_is_named_as_not_an_export(tmp_path):
    import gzip

    path = tmp_path / "trace.sqlite.gz"
    path.write_bytes(gzip.compress(b"\x00\x13garbage, not an SQLite database" * 200))
    assert_cli_error(path, "not an nsys SQLite export: the gzip holds no SQLite file")
