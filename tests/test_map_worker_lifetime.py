"""Map workers never outlive the process that started them, however it ends: killed outright
(SIGKILL: the workers' parent-death signal) or stopped (SIGTERM, SIGHUP: it stops them before it
dies). A worker left behind would hold the caller's stdout open, so a reader of that pipe, waiting
for its end, would wait forever. Real CLI processes, real rank files, real signals."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_kineto_reader import A100, plain, write_trace

MAP_ARGS = ["breakdown", "--workers", "2", "--range", "ProfilerStep"]
GRACE_S = 3.0  # "within a couple of seconds", on a loaded machine

# The Python API from a process that runs a thread: workers come from a fork server, not forked.
THREADED_MAP = """
import sys, threading, time
from verifyprof import pipeline
from verifyprof.pipeline.parallel import ParallelOptions
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
pipeline.breakdown(sys.argv[1:], step_regex="ProfilerStep", parallel=ParallelOptions(workers=2))
"""


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory) -> list[Path]:
    """Four rank files, each the real A100 trace's events four times over (about 2 s to map
    here): the signal comes while the workers are mid-file."""
    doc = {**plain(A100)}  # a copy: plain() is cached, and the tests after this one read it
    events = [e for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in events) - min(e["ts"] for e in events) + 1000
    doc["traceEvents"] = [
        {**e, "ts": e["ts"] + k * span} if isinstance(e.get("ts"), (int, float)) else e
        for k in range(4)
        for e in doc["traceEvents"]
    ]
    folder = tmp_path_factory.mktemp("ranks")
    files = [folder / f"run{n}-TP-{n}.trace.json.gz" for n in range(4)]
    write_trace(files[0], doc)
    for path in files[1:]:
        shutil.copyfile(files[0], path)
    return files


def start_mapping(argv: list[str]) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """Start ``argv`` and return once two map workers run below it (with every descendant then:
    workers, a fork server, its resource tracker)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if len(workers(me)) >= 2:
            time.sleep(0.2)  # the workers are reading their first files
            return proc, me.children(recursive=True)
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"no two map workers started: {proc.communicate()[1][-2000:]!r}")


def workers(root: psutil.Process) -> list[psutil.Process]:
    """Forked workers (the root's command line) or a fork server's children."""
    found = []
    try:
        for proc in root.children(recursive=True):
            line, parent = proc.cmdline(), proc.parent()
            if line == root.cmdline() or "forkserver" in " ".join(
                parent.cmdline() if parent else []
            ):
                found.append(proc)
    except psutil.Error:
        pass
    return found


def alive(procs: list[psutil.Process]) -> list[int]:
    left = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return left


def gone_within(procs: list[psutil.Process], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while alive(procs) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive(procs)


def stdout_ends_within(proc: subprocess.Popen, seconds: float) -> bool:
    """A reader of the process's stdout sees end of file (every holder of the pipe is gone)."""
    deadline = time.monotonic() + seconds
    fd = proc.stdout.fileno()
    while time.monotonic() < deadline:
        if select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if os.read(fd, 1 << 16) == b"":
                return True
    return False


def cleanup(procs: list[psutil.Process]) -> None:
    for pid in alive(procs):  # a failed test leaves nothing for the next ones
        os.kill(pid, signal.SIGKILL)


def test_workers_die_with_a_cli_killed_outright(rank_files):
    cli, below = start_mapping([sys.executable, "-m", "verifyprof.cli", *MAP_ARGS, *rank_files])
    try:
        cli.kill()
        cli.wait(timeout=10)
        assert gone_within(below, GRACE_S) == []
        assert stdout_ends_within(cli, GRACE_S)
    finally:
        cleanup(below)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_cli_stopped_by_a_signal_stops_its_workers_and_dies_of_it(rank_files, sig):
    cli, below = start_mapping([sys.executable, "-m", "verifyprof.cli", *MAP_ARGS, *rank_files])
    try:
        cli.send_signal(sig)
        assert cli.wait(timeout=10) == -sig  # it dies of the signal, as it would have
        assert alive(below) == []  # it stopped and reaped them first: gone as it ends
        assert stdout_ends_within(cli, GRACE_S)
        assert "Traceback" not in cli.stderr.read().decode(errors="replace")
    finally:
        cleanup(below)


def test_fork_server_workers_die_with_a_threaded_caller_killed_outright(rank_files):
    """A library caller running threads gets its workers from a fork server: they, the fork
    server and its helpers all end with the caller."""
    argv = [sys.executable, "-c", THREADED_MAP, *map(str, rank_files)]
    caller, below = start_mapping(argv)
    try:
        assert any("forkserver" in " ".join(p.cmdline()) for p in below)
        caller.kill()
        caller.wait(timeout=10)
        assert gone_within(below, GRACE_S) == []
        assert stdout_ends_within(caller, GRACE_S)
        # killed by their parent-death signal, not left to finish the file and die on the
        # closed pipe to the caller (which a traceback on the caller's stderr would show)
        assert b"BrokenPipeError" not in caller.stderr.read()
    finally:
        cleanup(below)
