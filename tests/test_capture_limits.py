"""A server capture's workload has limits (issue 44): a server that stops answering ends the
capture after ``--request-timeout``, not after one such wait per request left, and the whole
workload after ``--deadline``; the manifest says which, and what finished is kept. A list of
loads is checked whole before anything starts."""

from __future__ import annotations

import time

import pytest
from capture_helpers import (
    assert_nothing_left,
    fake_server_cmd,
    free_port,
    read_manifest,
    run_capture,
)


def server_capture(out, *server_flags: str, requests: int = 4, concurrency: str = "1,8"):
    return [
        *("--server-cmd", fake_server_cmd("--no-torch", *server_flags)),
        *("--port", str(free_port()), "--backend", "none", "--hooks", "none"),
        *("--out", str(out), "--requests", str(requests), "--concurrency", concurrency),
        *("--output-len", "8", "--warmup", "0"),
    ]


def test_a_server_that_stops_answering_ends_the_capture_after_the_request_timeout(tmp_path, tag):
    """The issue's repro: 3 answers, then none. Before, each request left waited a built-in
    600 s (no option shortened it), then the next started."""
    out = tmp_path / "cap"
    began = time.monotonic()
    proc = run_capture(
        [*server_capture(out, "--hang-after-requests", "3"), "--request-timeout", "1"], tag
    )
    assert time.monotonic() - began < 60
    assert proc.returncode == 1, proc.stderr
    line = "server stopped answering (no reply in 1 s, --request-timeout) after 3/4 requests"
    assert line in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    doc = read_manifest(out)
    assert doc["status"] == "failed" and line in doc["error"]
    assert doc["workload"]["completed"] == 3 and doc["options"]["request_timeout"] == 1
    assert_nothing_left(tag)


def test_a_workload_past_its_deadline_ends_the_capture_with_what_finished(tmp_path, tag):
    out = tmp_path / "cap"
    args = [*server_capture(out, "--step-ms", "100", requests=50, concurrency="1")]
    proc = run_capture([*args, "--deadline", "3"], tag)  # 50 requests: ~20 s
    assert proc.returncode == 1, proc.stderr
    assert "the workload ran past --deadline 3 s after " in proc.stderr, proc.stderr
    doc = read_manifest(out)
    assert doc["status"] == "failed" and "--deadline 3 s" in doc["error"]
    assert doc["workload"]["completed"] < 50
    assert len(doc["files"]) > 0 and (out / "server.log").is_file()
    assert_nothing_left(tag)


def test_the_workload_limits_have_defaults_a_user_can_live_with():
    from verifyprof.capture.request import CaptureOptions

    opts = CaptureOptions(out=None)
    assert opts.request_timeout <= 300 and opts.deadline <= 3600


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--request-timeout", "0", "--request-timeout must be a finite number of seconds > 0"),
        ("--deadline", "nan", "--deadline must be a finite number of seconds > 0, not nan"),
        ("--deadline", "-5", "--deadline must be a finite number of seconds > 0, not -5"),
    ],
)
def test_a_bad_workload_limit_is_one_line_before_anything_starts(
    tmp_path, tag, flag, value, message
):
    proc = run_capture([*server_capture(tmp_path / "cap"), flag, value], tag)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "cap").exists()


@pytest.mark.parametrize("loads", ["8,0", "0,8", "4,-1,8"])
def test_every_load_of_a_concurrency_list_is_checked_before_the_server_starts(tmp_path, tag, loads):
    """Before, only the largest load was checked: 8,0 was refused after the server had loaded,
    warmed up and run the first load (exit 1, a failed folder)."""
    out = tmp_path / "cap"
    proc = run_capture(server_capture(out, concurrency=loads), tag)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "verifyprof: error: --concurrency must be at least 1"
    assert not out.exists()


def test_the_workload_limits_are_refused_for_a_program_which_runs_its_own(tmp_path, tag):
    out = tmp_path / "cap"
    args = ["--backend", "none", "--deadline", "5", "--out", str(out), "--", "python", "-c", "1"]
    proc = run_capture(args, tag)
    assert proc.returncode == 2 and "--deadline: an option of a server capture" in proc.stderr
    assert not out.exists()
