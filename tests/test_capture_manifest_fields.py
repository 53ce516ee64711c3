"""Every manifest field the several-captures path reads is checked (issue 44): a capture's
``started_at`` and ``loads`` not as capture writes them are one line naming the file and the
field, exit 2. On copies of the real H200 captures C1 (batch 1) and C8 (batch 8) of
bench/results/load_mha_h200: the traces linked, each manifest edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import assert_one_line, verifyprof

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "load_mha_h200"


def capture_copy(folder: Path, name: str, **fields) -> Path:
    """Capture ``name``'s folder in ``folder``: its trace linked, its manifest with ``fields``."""
    copy = folder / name
    copy.mkdir(parents=True)
    # its trace, or the breakdown bench/results keeps in its place (bench/README.md)
    trace = next(RUNS / name / f for f in ("capture.sqlite.gz", "breakdown.json")
                 if (RUNS / name / f).exists())  # fmt: skip
    (copy / trace.name).symlink_to(trace)
    doc = json.loads((RUNS / name / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps(doc | fields))
    return copy


def test_a_start_time_without_its_utc_offset_beside_one_with_it_is_one_line(tmp_path):
    """Before: TypeError: can't compare offset-naive and offset-aware datetimes."""
    c1 = capture_copy(tmp_path, "C1")
    c8 = capture_copy(tmp_path, "C8", started_at="2026-12-03T20:40:00")
    proc = verifyprof("whatif", str(c1), str(c8))
    assert_one_line(proc, f"{c8}/manifest.json", "'started_at' must be an ISO 8601 time with")


@pytest.mark.parametrize("loads", [5, "abc", [1, 2], {"concurrency": 8}])
def test_loads_that_are_not_a_list_of_load_records_are_one_line(tmp_path, loads):
    """Before: ``5`` was a TypeError, ``"abc"`` was taken as 3 loads and split by batch."""
    c1 = capture_copy(tmp_path, "C1", loads=loads)
    proc = verifyprof("whatif", str(c1))
    assert_one_line(proc, f"{c1}/manifest.json", "manifest field 'loads' must be a list of load")


def test_the_fields_as_capture_writes_them_are_read(tmp_path):
    c1 = capture_copy(tmp_path, "C1", started_at="2026-12-03T20:15:28.362+00:00")
    c8 = capture_copy(tmp_path, "C8", started_at="2026-12-03T21:15:28+01:00", loads=[])
    assert verifyprof("whatif", str(c1), str(c8)).returncode == 0


@pytest.mark.parametrize("status, said", [("failed", "failed"), ("interrupted", "was interrupted")])
def test_a_capture_that_did_not_finish_is_used_with_a_warning_naming_it(tmp_path, status, said):
    """Before, whatif used a capture whose manifest said failed as if it had finished."""
    c1 = capture_copy(tmp_path, "C1")
    c8 = capture_copy(tmp_path, "C8", status=status, error="server exited after 3/16 requests")
    proc = verifyprof("whatif", str(c1), str(c8), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        f"verifyprof: warning: {c8}: its manifest says the capture {said} (server exited after"
        " 3/16 requests): its numbers are what it measured before it stopped\n"
    )
    alone = verifyprof("whatif", str(c8), "--json")
    assert f"warning: {c8}: its manifest says the capture {said}" in alone.stderr


def test_a_finished_capture_is_used_without_a_warning(tmp_path):
    proc = verifyprof("whatif", str(capture_copy(tmp_path, "C1")), "--json")
    assert proc.returncode == 0 and proc.stderr == ""
