"""The Kineto reader on bad input: truncated, corrupt, empty or foreign files, and a bad file
among rank files, each one TraceError line naming the file, the file left untouched. Inputs are
real public traces, cut or edited."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from test_kineto_reader import A100, B200, MI300X, digest, plain, rank_copy, write_trace

from verifyprof.contracts.errors import TraceError
from verifyprof.trace import load_trace
from verifyprof.trace.kineto.reader import read_kineto


def assert_one_line_error(excinfo, path: Path, *fragments: str) -> None:
    message = str(excinfo.value)
    assert "\n" not in message
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def assert_refused_untouched(path: Path, *fragments: str) -> None:
    """Loading ``path`` is one TraceError line naming it and saying ``fragments``; the file is
    unchanged."""
    before = digest(path)
    with pytest.raises(TraceError) as excinfo:
        load_trace(path)
    assert_one_line_error(excinfo, path, *fragments)
    assert digest(path) == before


def test_truncated_gzip_is_a_clear_error_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "cut.trace.json.gz"
    path.write_bytes(B200.read_bytes()[:300_000])
    assert_refused_untouched(path, "truncated gzip")


def test_corrupt_json_is_a_clear_error_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "corrupt.json"
    text = gzip.decompress(MI300X.read_bytes())
    path.write_bytes(text.replace(b'"dur": ', b'"dur" ', 1))  # a colon lost mid-file
    assert_refused_untouched(path, "corrupt JSON")


def test_truncated_json_says_it_ends_early(tmp_path):
    path = tmp_path / "short.json.gz"
    path.write_bytes(gzip.compress(gzip.decompress(MI300X.read_bytes())[:50_000]))
    with pytest.raises(TraceError) as excinfo:
        read_kineto([path])
    assert_one_line_error(excinfo, path, "corrupt JSON", "ends early")


def test_json_that_is_not_a_trace_is_a_clear_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": "qwen", "layers": 36}))
    assert_refused_untouched(path, "not a PyTorch-profiler trace", "traceEvents")


def test_trace_without_gpu_events_is_an_empty_capture_error(tmp_path):
    doc = json.loads(json.dumps(plain(A100)))
    gpu = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in gpu]
    path = write_trace(tmp_path / "cpu_only.json.gz", doc)
    assert_refused_untouched(path, "no GPU events", "empty")


def test_directory_without_trace_files_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("no traces here")
    with pytest.raises(TraceError) as excinfo:
        load_trace(tmp_path)
    assert_one_line_error(excinfo, tmp_path, "no PyTorch-profiler trace files")
    with pytest.raises(TraceError):
        read_kineto([tmp_path])


def test_empty_file_is_a_clear_error(tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    with pytest.raises(TraceError) as excinfo:
        read_kineto([path])
    assert_one_line_error(excinfo, path, "empty file")


def test_bad_file_among_rank_files_is_named(tmp_path):
    rank_copy(B200, tmp_path / "ok-TP-0.trace.json.gz", rank=0)
    bad = tmp_path / "ok-TP-1.trace.json.gz"
    bad.write_bytes(B200.read_bytes()[:1000])
    with pytest.raises(TraceError) as excinfo:
        load_trace(tmp_path)
    assert_one_line_error(excinfo, bad, "truncated gzip")


# --- once tracebacks (issue 22): through the CLI, one line naming the file ------------------------


def cli_one_line(path: Path, *fragments: str) -> str:
    from cli_helpers import verifyprof

    before = digest(path)
    done = verifyprof("breakdown", str(path), "--whole-trace", "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"verifyprof: error: {path}: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert digest(path) == before
    return lines[0]


def test_json_nested_100000_deep_is_one_line_not_a_recursion_error(tmp_path):
    text = gzip.decompress(MI300X.read_bytes())
    nested = b'"args": {"deep": ' + b"[" * 100_000 + b"]" * 100_000 + b", "
    path = tmp_path / "deep.json"
    path.write_bytes(text.replace(b'"args": {', nested, 1))
    cli_one_line(path, "corrupt JSON", "nested too deeply")


def test_a_base_time_of_1e30_is_one_line_not_an_integer_overflow(tmp_path):
    """With one file the base went into the JSON as an int orjson cannot write."""
    doc = json.loads(json.dumps(plain(MI300X)))  # plain() is shared: edit a copy
    doc["baseTimeNanoseconds"] = 1e30
    path = write_trace(tmp_path / "base.json", doc)
    cli_one_line(path, "baseTimeNanoseconds 1e+30 is not a time", "2^62 ns")


@pytest.mark.parametrize(
    "header, unknown",
    [
        ({"distributedInfo": {"rank": 0, "world_size": 10**30}}, ("world_size", -1)),
        ({"distributedInfo": {"rank": 10**30, "world_size": 1}}, ("ranks", [])),
        (
            {"deviceProperties": [{"id": 0, "name": "x", "numSms": 10**30}]},
            ("sm_count", -1),
        ),
    ],
    ids=["world_size", "rank", "device_properties"],
)
def test_header_numbers_too_large_for_their_columns_read_as_unknown(tmp_path, header, unknown):
    """A rank, world size or device property of 1e30 is none: read as unknown, as other values
    that are not usable numbers are (an OverflowError or an unwritable JSON int before)."""
    from cli_helpers import verifyprof

    doc = json.loads(json.dumps(plain(MI300X)))
    doc.update(header)
    path = write_trace(tmp_path / "header.json", doc)
    done = verifyprof("breakdown", str(path), "--whole-trace", "--json")
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)["trace"]
    key, value = unknown
    assert (trace["devices"][0] if key == "sm_count" else trace)[key] == value
