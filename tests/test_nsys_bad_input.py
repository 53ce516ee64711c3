"""nsys SQLite reader, bad input: one clear error naming the file, the input untouched, through
the reader and through the CLI (exit 2, one line, no traceback). Real exports, broken on purpose
in copies."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from conftest import OWN_TRACES
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


# --- once tracebacks (issue 22): one line naming the file, or read with a counted warning -------


def cli_lines(*args: str):
    from cli_helpers import verifyprof

    done = verifyprof(*args)
    assert "Traceback" not in done.stderr
    return done, done.stderr.strip().splitlines()


@needs_public
def test_cli_a_corrupt_byte_in_the_schema_is_one_line(tmp_path):
    """A byte that is not UTF-8 in a CREATE TABLE statement: SQLite's "malformed database
    schema ... near ..." quotes it, and Python cannot decode that message. The process-share
    sampling (two workers) met it first and let the UnicodeDecodeError out."""
    data = bytearray(MOCK.read_bytes())
    at = data.index(b"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL") + len(b"CREATE ")
    data[at] ^= 0xFF  # the T of TABLE becomes 0xAB, which no UTF-8 text starts with
    path = tmp_path / "schema.sqlite"
    path.write_bytes(bytes(data))
    before = fingerprint(path)
    done, lines = cli_lines("breakdown", str(path), "--whole-trace", "--workers", "2")
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"verifyprof: error: {path}: corrupt")
    assert fingerprint(path) == before


@needs_public
def test_cli_nvtx_text_that_is_not_utf8_is_read_with_a_counted_warning(tmp_path):
    """nsys stores the bytes a program passed to nvtxRangePushA: names are read as the export's
    StringIds are (U+FFFD for bad bytes) and counted, not refused. It was a UnicodeDecodeError."""
    path = copy_of(PIPIT, tmp_path, "latin1.sqlite")
    edit(path, "UPDATE NVTX_EVENTS SET text = CAST(x'73617870fffe' AS TEXT) WHERE text = 'saxpy'")
    done, lines = cli_lines("breakdown", str(path), "--range", "saxp", "--json")
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)["trace"]["integrity"]
    assert (found["kind"], found["table"], found["count"]) == ("invalid_utf8", "ranges", 5)
    assert "saxp\ufffd\ufffd" in found["example"]
    assert lines == [f"verifyprof: warning: {path}: {found['message']}"]


@needs_public
@pytest.mark.parametrize(
    "table, where",
    [
        ("NVTX_EVENTS", "eventType = 59"),  # read in one query
        ("CUPTI_ACTIVITY_KIND_KERNEL", "1"),  # read in parallel rowid slices
    ],
)
def test_cli_a_start_stored_as_text_is_one_line_naming_the_column(tmp_path, table, where):
    path = copy_of(PIPIT, tmp_path, "text_start.sqlite")
    edit(
        path,
        f'CREATE TABLE t_copy AS SELECT * FROM "{table}"',
        f'DROP TABLE "{table}"',
        f'ALTER TABLE t_copy RENAME TO "{table}"',
        f'UPDATE "{table}" SET start = \'soon\' WHERE rowid = (SELECT min(rowid) FROM "{table}"'
        f" WHERE {where})",
    )
    done, lines = cli_lines("breakdown", str(path), "--whole-trace")
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0] == (
        f"verifyprof: error: {path}: {table}'s 'start' column holds string values where numbers"
        " belong: not an export as nsys writes it"
    )


@needs_public
def test_cli_a_start_of_1e300_reads_as_missing_without_a_numpy_warning(tmp_path):
    """A REAL no int64 holds was cast unsafely (a RuntimeWarning on stderr, the value whatever
    the CPU gives); found by tests/test_fuzz_inputs.py (a bundled export, seed 11, rows)."""
    path = copy_of(MOCK, tmp_path, "huge_start.sqlite")
    edit(
        path,
        "CREATE TABLE t_copy AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
        "ALTER TABLE t_copy RENAME TO CUPTI_ACTIVITY_KIND_KERNEL",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 1e300 WHERE rowid = 1",
    )
    done, lines = cli_lines("breakdown", str(path), "--whole-trace", "--json")
    assert done.returncode == 0
    (found,) = json.loads(done.stdout)["trace"]["integrity"]
    assert (found["kind"], found["table"], found["count"]) == ("null_time", "kernels", 1)
    assert lines == [f"verifyprof: warning: {path}: {found['message']}"]


def test_cli_string_table_text_that_is_not_utf8_is_counted_too(tmp_path):
    """Kernel names live in StringIds: bytes that are not UTF-8 there are read with U+FFFD and
    counted (they were decoded silently), the step numbers unchanged."""
    path = tmp_path / "latin1.sqlite"
    with gzip.open(OWN_TRACES / "workload-dense-eager" / "trace.sqlite.gz") as src:
        with open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    clean = json.loads(cli_lines("breakdown", str(path), "--json")[0].stdout)
    edit(
        path,
        "UPDATE StringIds SET value = CAST(CAST(value AS BLOB) || x'fffe' AS TEXT) WHERE id IN"
        " (SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 2)",
    )
    done, lines = cli_lines("breakdown", str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (found,) = data["trace"]["integrity"]
    assert (found["kind"], found["table"], found["count"]) == ("invalid_utf8", "strings", 2)
    assert "\ufffd\ufffd" in found["example"]
    assert lines == [f"verifyprof: warning: {path}: {found['message']}"]
    assert [s["wall_ns"] for s in data["steps"]] == [s["wall_ns"] for s in clean["steps"]]
