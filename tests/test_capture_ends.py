"""How a capture ends, with real processes: it waits for the program, not for what the program
left running in the background (that is stopped, and said in one line), and a closed terminal
(SIGHUP, then every write to the terminal failing) leaves nothing behind: not the program's
children, not a server's scheduler."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest
from capture_helpers import (
    REPO,
    assert_nothing_left,
    capture_cmd,
    fake_server_cmd,
    free_port,
    read_manifest,
    run_capture,
    tagged_env,
    tagged_processes,
    wait_for_log,
)

LEFTOVER_LINE = "verifyprof: the program exited, leaving 1 process(es) running (pid "

# Children of three kinds: one in the program's group, a shell's background job (it ignores
# SIGINT), and one in a session of its own.
SPAWNER = textwrap.dedent("""
    import os, subprocess, time
    subprocess.Popen(["sleep", "600"])
    subprocess.Popen(["sh", "-c", "sleep 601 & wait"])
    subprocess.Popen(["sleep", "602"], start_new_session=True)
    print("spawned", flush=True)
    time.sleep(600)
""")


def leftover_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "exited, leaving" in line]


def test_capture_waits_for_the_program_not_its_background_child(tmp_path, tag):
    out = tmp_path / "cap"
    started = time.monotonic()
    done = run_capture(
        ["--backend", "none", "--out", str(out), "--", "sh", "-c", "sleep 1000 & exit 0"],
        tag,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    (line,) = leftover_lines(done.stderr)
    assert line.startswith(LEFTOVER_LINE) and line.endswith("): stopped with SIGTERM")
    assert read_manifest(out)["status"] == "ok"
    assert_nothing_left(tag)


def test_a_leftover_that_ignores_sigterm_gets_sigkill(tmp_path, tag):
    out = tmp_path / "cap"
    program = "(trap '' TERM; exec sleep 1000) & exit 0"
    done = run_capture(["--backend", "none", "--out", str(out), "--", "sh", "-c", program], tag)
    assert done.returncode == 0, done.stderr
    (line,) = leftover_lines(done.stderr)
    assert line.startswith(LEFTOVER_LINE) and line.endswith("): stopped with SIGTERM, then SIGKILL")
    assert_nothing_left(tag)


def test_a_baseline_run_that_leaves_a_child_is_stopped_before_the_profiled_run(tmp_path, tag):
    out = tmp_path / "cap"
    args = ["--backend", "none", "--baseline-run", "--out", str(out), "--"]
    done = run_capture([*args, "sh", "-c", "sleep 1000 & exit 0"], tag, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = leftover_lines(done.stderr)
    assert [line.split(",")[0] for line in lines] == [
        "verifyprof: the baseline run exited",
        "verifyprof: the program exited",
    ]
    assert_nothing_left(tag)


def capture_on_a_terminal(args: list[str], tag: str) -> tuple[subprocess.Popen, int]:
    """``verifyprof capture ARGS`` with a pseudo-terminal as its controlling terminal (stdin,
    stdout and stderr); returns it and the terminal's master end, whose close is a hang-up."""
    master, slave = pty.openpty()

    def own_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    capture = subprocess.Popen(
        capture_cmd(*args),
        env=tagged_env(tag, TERM="xterm", COLUMNS="100"),
        cwd=REPO,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=own_terminal,
    )
    os.close(slave)
    return capture, master


def read_until_logged(master: int, log: Path, text: str, count: int = 1) -> None:
    """What the terminal shows is read meanwhile (a full terminal would block the capture's
    writes) until ``text`` is in ``log`` ``count`` times."""
    deadline = time.monotonic() + 120
    while (log.read_text(errors="replace").count(text) if log.exists() else 0) < count:
        assert time.monotonic() < deadline, f"{text!r} never appeared in {log}"
        if select.select([master], [], [], 0.05)[0]:
            with contextlib.suppress(OSError):
                os.read(master, 1 << 16)


def hang_up(capture: subprocess.Popen, master: int) -> int:
    """Close the terminal (the kernel sends SIGHUP; writes to it fail from then on); the exit
    code."""
    os.close(master)
    try:
        return capture.wait(timeout=90)
    finally:
        if capture.poll() is None:
            capture.kill()


def test_a_closed_terminal_mid_program_leaves_none_of_its_children(tmp_path, tag):
    out = tmp_path / "cap"
    args = ["--backend", "none", "--stop-timeout", "1", "--out", str(out), "--"]
    capture, master = capture_on_a_terminal([*args, sys.executable, "-c", SPAWNER], tag)
    read_until_logged(master, out / "program.log", "spawned")
    # verifyprof, the program and its four descendants (sh forks its sleep after "spawned")
    deadline = time.monotonic() + 30
    while len(tagged_processes(tag)) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(tagged_processes(tag)) >= 6
    assert hang_up(capture, master) == 128 + signal.SIGHUP
    doc = read_manifest(out)
    assert doc["status"] == "interrupted" and doc["error"] == "interrupted (SIGHUP)"
    assert_nothing_left(tag)


@pytest.mark.timeout(240)
def test_a_closed_terminal_mid_server_capture_leaves_no_scheduler(tmp_path, tag):
    """The case measured before: the cleanup's first line ("stopping the profile") failed on the
    hung-up terminal, and the server's scheduler and resource tracker were orphaned."""
    out = tmp_path / "cap"
    args = [
        "--server-cmd",
        fake_server_cmd("--step-ms", "20"),
        "--port",
        str(free_port()),
        "--backend",
        "torch",
        "--requests",
        "200",
        "--stop-timeout",
        "5",
        "--out",
        str(out),
    ]
    capture, master = capture_on_a_terminal(args, tag)
    read_until_logged(master, out / "server.log", '"POST /generate', count=3)
    assert hang_up(capture, master) == 128 + signal.SIGHUP
    assert read_manifest(out)["error"] == "interrupted (SIGHUP)"
    assert_nothing_left(tag)


# --- a signal to capture itself --------------------------------------------------------------

# A program that leaves three children the signal to capture must not leave running: a shell's
# background job (it ignores SIGINT), a detached one in a session of its own, and one that
# ignores SIGTERM (and SIGINT, as a background job).
LEAVER = (
    "sleep 1001 & setsid sleep 1002 & (trap '' TERM; exec sleep 1003) & echo spawned; sleep 1000"
)


def capture_in_the_background(args: list[str], tag: str) -> tuple[subprocess.Popen, int]:
    """``verifyprof capture ARGS &`` in a non-interactive shell, as a script or a CI job runs it:
    capture starts with SIGINT ignored. Returns the shell (its exit status is capture's) and
    capture's pid."""
    shell = subprocess.Popen(
        ["sh", "-c", '"$@" 2>/dev/null & echo $!; wait $!', "sh", *capture_cmd(*args)],
        env=tagged_env(tag),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    return shell, int(shell.stdout.readline())


@pytest.mark.parametrize("launch", ["background job of a script", "terminal"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_capture_stops_every_child_and_exits_128_plus_it(tmp_path, tag, sig, launch):
    """The case reported: the program's shell died of the signal, capture went on waiting for
    its re-parented background child (as long as the child lived), the manifest said running."""
    out = tmp_path / "cap"
    args = ["--backend", "none", "--out", str(out), "--", "sh", "-c", LEAVER]
    if launch == "terminal":
        leader, master = capture_on_a_terminal(args, tag)
        pid = leader.pid
    else:
        leader, pid = capture_in_the_background(args, tag)
        master = None
    try:
        if master is None:
            wait_for_log(out / "program.log", "spawned")
        else:
            read_until_logged(master, out / "program.log", "spawned")
        time.sleep(0.5)  # the three children are started before the line is written
        assert len(tagged_processes(tag)) >= 5  # capture, the program and its children
        started = time.monotonic()
        os.kill(pid, sig)
        code = leader.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        if leader.poll() is None:
            leader.kill()
        if master is not None:
            os.close(master)
    assert code == 128 + sig
    assert took < 10  # what ignores a signal is not waited for: it gets the next one at once
    doc = read_manifest(out)
    how = "Ctrl-C" if sig == signal.SIGINT else sig.name
    assert doc["status"] == "interrupted" and doc["error"] == f"interrupted ({how})"
    assert doc["finished_at"] is not None and doc["target"]["leftover_pids"] == []
    assert_nothing_left(tag)
