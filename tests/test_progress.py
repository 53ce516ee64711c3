"""The progress line: on a terminal while a trace is read, never in a pipe or with --quiet; its
thread waits while map workers fork; it fits the terminal."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TRACE = Path(__file__).resolve().parents[1] / "traces" / "workload-moe-eager" / "trace.sqlite.gz"


def on_a_terminal(
    argv: list[str], timeout: float = 120, columns: int = 100
) -> tuple[int, str, str]:
    """(exit code, what a real pseudo-terminal received on stderr, stdout): the terminal is read
    as it is written, as a user's is (an unread one fills and stops the writer)."""
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as out:
        done = subprocess.Popen(
            argv,
            stdout=out,
            stderr=slave,
            env={**os.environ, "TERM": "xterm", "COLUMNS": str(columns)},
        )
        os.close(slave)
        seen = b""
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        done.communicate(timeout=timeout)
        os.close(master)
        out.seek(0)
        return done.returncode, seen.decode(errors="replace"), out.read().decode()


def run_on_a_terminal(*args: str, columns: int = 100) -> str:
    code, seen, _ = on_a_terminal([sys.executable, "-m", "verifyprof.cli", *args], columns=columns)
    assert code == 0
    return seen


def test_a_terminal_sees_what_is_being_read():
    assert "breaking down" in run_on_a_terminal("breakdown", str(TRACE), "--json")


def test_quiet_draws_nothing_on_the_terminal():
    assert "breaking down" not in run_on_a_terminal("breakdown", str(TRACE), "--json", "--quiet")


def test_a_pipe_gets_no_progress_line():
    done = subprocess.run(
        [sys.executable, "-m", "verifyprof.cli", "breakdown", str(TRACE), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "breaking down" not in done.stderr


KILLER = """
import os, psutil, signal, sys
me = psutil.Process(int(sys.argv[1]))
while True:  # the first forked worker, killed mid-file
    workers = [c for c in me.children() if c.pid != os.getpid() and c.cmdline() == me.cmdline()]
    if workers:
        os.kill(workers[0].pid, signal.SIGKILL)
        break
"""

FORK_UNDER_STATUS = r"""
import json, os, subprocess, sys, threading
from verifyprof.pipeline.local_map import map_local
from verifyprof.pipeline.parallel import Failure, MapOptions
from verifyprof.report import progress

trace, pause, killer_code = sys.argv[1], sys.argv[2] == "pause", sys.argv[3]
forks = []  # threads running in this process at each fork of it (a fork server's forks are its own)
os.register_at_fork(before=lambda: forks.append(threading.active_count()))
with progress.status("breaking down") as shown:
    drawing = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    killer = (  # no thread here
        subprocess.Popen([sys.executable, "-c", killer_code, str(os.getpid())])
        if killer_code
        else None
    )
    outcomes = list(
        map_local(
            [(i, trace, None) for i in range(3)],
            MapOptions(),
            workers=2,
            pause=shown.paused if pause else None,
        )
    )
    if killer is not None:  # done with the map: a killer that found no worker mid-file gives up
        killer.kill()
        killer.wait()
    still = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
failed = sum(isinstance(o, Failure) for _, o in outcomes)
print(
    json.dumps(
        {
            "drawing": drawing,
            "still": still,
            "forks": forks,
            "mapped": len(outcomes),
            "failed": failed,
        }
    )
)
"""


def map_under_a_drawn_status(pause: str, kill: bool = False) -> dict:
    """A fresh interpreter whose stderr is a real terminal, mapping three files with two workers."""
    code, _, out = on_a_terminal(
        [sys.executable, "-c", FORK_UNDER_STATUS, str(TRACE), pause, KILLER if kill else ""],
        timeout=240,
    )
    assert code == 0
    return json.loads(out.strip().splitlines()[-1])


def test_workers_fork_from_the_process_while_its_status_line_waits():
    """Each worker is forked with no other thread running: no fork server to start (~0.5 s)."""
    seen = map_under_a_drawn_status("pause")
    assert seen["drawing"] == ["verifyprof-status"] and seen["still"] == ["verifyprof-status"]
    assert seen["mapped"] == 3 and seen["failed"] == 0
    assert seen["forks"] == [1, 1]  # two workers, each forked while the line's thread waited


def test_a_worker_replacing_a_killed_one_is_forked_while_the_line_waits_too():
    for _ in range(5):  # the kill races the file's end: retry until it lands mid-file
        seen = map_under_a_drawn_status("pause", kill=True)
        if seen["failed"]:
            break
    assert seen["failed"] == 1 and seen["mapped"] == 3
    assert seen["forks"] == [1, 1, 1]


def test_a_threaded_process_that_cannot_pause_its_threads_starts_workers_from_a_fork_server():
    seen = map_under_a_drawn_status("no-pause")
    assert seen["drawing"] == ["verifyprof-status"] and seen["mapped"] == 3
    assert seen["forks"] == []  # it never forked itself: the workers came from a fork server


def drawing_threads() -> int:
    return sum(t.name == "verifyprof-status" for t in threading.enumerate())


def test_a_paused_status_line_runs_no_thread_and_draws_again_after():
    from rich.console import Console
    from rich.progress import Progress

    from verifyprof.report.progress import REDRAW_S, Status

    screen = io.StringIO()
    with Progress(console=Console(file=screen, force_terminal=True), auto_refresh=False) as bar:
        bar.add_task("reading", total=None)
        shown = Status(bar)
        shown.start()
        with shown.paused():
            assert drawing_threads() == 0
            drawn = len(screen.getvalue())
            time.sleep(3 * REDRAW_S)
            assert len(screen.getvalue()) == drawn  # nothing drawn while paused
        assert drawing_threads() == 1
        deadline = time.monotonic() + 30
        while len(screen.getvalue()) == drawn and time.monotonic() < deadline:
            time.sleep(REDRAW_S)
        assert len(screen.getvalue()) > drawn  # drawn again
        shown.stop()
    assert drawing_threads() == 0
