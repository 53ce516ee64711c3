"""ManagedProcess and the health wait, on real processes: the fake SGLang server (front end plus
spawned scheduler) and small Python programs standing in for a profiler that outlives its app."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

import psutil
import pytest
from capture_helpers import (
    FAKE_SERVER,
    assert_nothing_left,
    free_port,
    tagged_env,
    tagged_processes,
)

from verifyprof.capture import proctable
from verifyprof.capture.process import ManagedProcess
from verifyprof.capture.server import (
    CaptureError,
    PortInUseError,
    check_port_free,
    log_tail,
    port_in_use,
    wait_healthy,
)


@pytest.fixture(params=["psutil", "proc"])
def table(request):
    """Run a test with psutil and with the /proc reader used where psutil is not installed."""
    previous = proctable.BACKEND
    proctable.use(request.param)
    yield request.param
    proctable.BACKEND = previous


def start_fake(tmp_path, tag, *flags):
    """The fake server without its torch "model": these tests send no requests and never profile."""
    port = free_port()
    argv = [sys.executable, str(FAKE_SERVER), "--port", str(port), "--no-torch", *flags]
    proc = ManagedProcess(argv, log=tmp_path / "server.log", env=tagged_env(tag))
    return proc, f"http://127.0.0.1:{port}"


def test_sigint_stops_a_well_behaved_server_and_its_scheduler(tmp_path, tag):
    proc, url = start_fake(tmp_path, tag)
    wait_healthy(url, proc, timeout=60)
    assert len(proc.tracked()) >= 2  # front end + spawned scheduler (+ multiprocessing's tracker)
    report = proc.stop(int_timeout=20)
    assert report.signals == ["SIGINT"] and report.leftover == []
    assert report.exit_code == 0
    assert_nothing_left(tag)


def test_server_ignoring_sigint_gets_sigterm_after_the_timeout(tmp_path, tag):
    proc, url = start_fake(tmp_path, tag, "--ignore-sigint")
    wait_healthy(url, proc, timeout=60)
    started = time.monotonic()
    report = proc.stop(int_timeout=1.0, term_timeout=10)
    assert report.signals == ["SIGINT", "SIGTERM"] and report.leftover == []
    assert time.monotonic() - started >= 1.0
    assert_nothing_left(tag)


def test_server_ignoring_sigint_and_sigterm_is_killed(tmp_path, tag, table):
    proc, url = start_fake(tmp_path, tag, "--ignore-sigint", "--ignore-sigterm")
    wait_healthy(url, proc, timeout=60)
    report = proc.stop(int_timeout=0.5, term_timeout=0.5)
    assert report.signals == ["SIGINT", "SIGTERM", "SIGKILL"] and report.leftover == []
    assert report.exit_code == -signal.SIGKILL
    assert_nothing_left(tag)


def test_child_that_left_the_process_group_is_stopped_too(tmp_path, tag, table):
    proc, url = start_fake(tmp_path, tag, "--detached-child")
    wait_healthy(url, proc, timeout=60)
    sessions = {p.pid: os.getsid(p.pid) for p in tagged_processes(tag)}
    assert any(sid != proc.pgid for sid in sessions.values())  # the helper runs in its own session
    report = proc.stop(int_timeout=20)
    assert report.leftover == []
    assert_nothing_left(tag)


def test_orphans_of_a_dead_leader_are_stopped(tmp_path, tag, table):
    # The leader starts a grandchild and exits at once: the grandchild is re-parented away from us.
    code = (
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time;"
        " time.sleep(600)'])"
    )
    proc = ManagedProcess([sys.executable, "-c", code], log=tmp_path / "log", env=tagged_env(tag))
    assert proc.wait(timeout=30) == 0
    assert tagged_processes(tag)
    report = proc.stop(int_timeout=5)
    assert report.signals == ["SIGINT"] and report.leftover == []
    assert_nothing_left(tag)


PROFILER_LIKE = r"""
import signal, subprocess, sys, time
app = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
signal.signal(signal.SIGINT, lambda *a: None)   # like nsys: Ctrl-C ends collection, not the process
app.wait()
time.sleep(2.0)                                  # "writing the report" after the app is gone
open(sys.argv[1], 'w').write('report')
"""


def test_leader_grace_lets_a_profiler_finish_its_report_after_the_app_stops(tmp_path, tag, table):
    report_file = tmp_path / "report.nsys-rep"
    proc = ManagedProcess(
        [sys.executable, "-c", PROFILER_LIKE, str(report_file)],
        log=tmp_path / "log",
        env=tagged_env(tag),
    )
    time.sleep(1.0)
    stop = proc.stop(int_timeout=10, term_timeout=5, leader_grace=30)
    assert report_file.read_text() == "report"
    assert stop.signals == ["SIGINT"] and stop.exit_code == 0
    assert_nothing_left(tag)


def test_without_leader_grace_the_same_profiler_would_be_cut_short(tmp_path, tag):
    report_file = tmp_path / "report.nsys-rep"
    proc = ManagedProcess(
        [sys.executable, "-c", PROFILER_LIKE, str(report_file)],
        log=tmp_path / "log",
        env=tagged_env(tag),
    )
    time.sleep(1.0)
    stop = proc.stop(int_timeout=0.5, term_timeout=5)
    assert not report_file.exists() and "SIGTERM" in stop.signals
    assert_nothing_left(tag)


def test_hurry_cuts_the_sigint_wait_short(tmp_path, tag):
    import threading

    proc, url = start_fake(tmp_path, tag, "--ignore-sigint")
    wait_healthy(url, proc, timeout=60)
    hurry = threading.Event()
    hurry.set()
    started = time.monotonic()
    report = proc.stop(int_timeout=60, term_timeout=10, hurry=hurry)
    assert time.monotonic() - started < 30 and "SIGTERM" in report.signals
    assert_nothing_left(tag)


def test_server_started_with_sigint_ignored_is_still_interruptible(tmp_path, tag):
    # `verifyprof capture ... &` in a script starts us with SIGINT ignored; exec keeps that.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc, url = start_fake(tmp_path, tag)
    finally:
        signal.signal(signal.SIGINT, previous)
    wait_healthy(url, proc, timeout=60)
    assert proc.stop(int_timeout=20).signals == ["SIGINT"]
    assert_nothing_left(tag)


def test_health_wait_times_out_with_the_log_tail(tmp_path, tag):
    proc, url = start_fake(tmp_path, tag, "--never-healthy")
    with pytest.raises(CaptureError) as err:
        wait_healthy(url, proc, timeout=3, interval=0.2)
    message = str(err.value)
    assert message.startswith("server not healthy after 3 s (GET ")
    assert "last " in message and "Capturing batches" in message
    proc.stop(int_timeout=10)
    assert_nothing_left(tag)


def test_health_wait_waits_out_a_slow_start(tmp_path, tag):
    proc, url = start_fake(tmp_path, tag, "--startup-delay", "2")
    took = wait_healthy(url, proc, timeout=60, interval=0.2)
    assert took >= 2.0
    proc.stop(int_timeout=20)


def test_listening_port_is_in_use_and_a_free_one_is_not():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert port_in_use(port)
        with pytest.raises(PortInUseError, match=f"port {port} is already in use"):
            check_port_free(port)
    assert not port_in_use(free_port())


def test_missing_command_is_a_one_line_error(tmp_path):
    from verifyprof.contracts.errors import VerifyprofError

    with pytest.raises(VerifyprofError, match="'no-such-server-binary': command not found"):
        ManagedProcess(["no-such-server-binary"], log=tmp_path / "log")


def test_log_tail_returns_the_last_lines_of_a_large_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(200_000)))
    assert log_tail(log, 3).splitlines() == ["line 199997", "line 199998", "line 199999"]
    assert log_tail(tmp_path / "absent.log") == ""


def test_tracked_processes_are_psutil_verified_children(tmp_path, tag):
    proc, url = start_fake(tmp_path, tag)
    wait_healthy(url, proc, timeout=60)
    tracked = {p.pid for p in proc.tracked()}
    assert proc.pid in tracked
    assert {p.pid for p in psutil.Process(proc.pid).children(recursive=True)} <= tracked
    proc.stop(int_timeout=20)


def test_proc_reader_and_psutil_see_the_same_process_tree(tmp_path, tag):
    proc, url = start_fake(tmp_path, tag)
    wait_healthy(url, proc, timeout=60)
    try:
        seen = {}
        for backend in ("psutil", "proc"):
            proctable.use(backend)
            root = proctable.get(proc.pid)
            seen[backend] = sorted(p.pid for p in proctable.descendants([root]))
        assert (
            seen["psutil"]
            == seen["proc"]
            == sorted(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
        )
        assert proctable.environ_value(proctable.get(proc.pid), "VERIFYPROF_TEST_TAG") == tag
    finally:
        proctable.use("psutil")
        proc.stop(int_timeout=20)
