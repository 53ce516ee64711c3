"""The progress line: on a terminal while a trace is read, never in a pipe or with --quiet; its
thread waits while map workers fork."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

TRACE = Path(__file__).resolve().parents[1] / "traces" / "workload-moe-eager" / "trace.sqlite.gz"


def run_on_a_terminal(*args: str) -> str:
    """The bytes a real pseudo-terminal received on stderr (stdout goes to a pipe)."""
    master, slave = pty.openpty()
    done = subprocess.Popen([sys.executable, "-m", "verifyprof.cli", *args], stdout=subprocess.DEVNULL, stderr=slave,
                            env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    done.communicate(timeout=120)
    os.close(master)
    assert done.returncode == 0
    return seen.decode(errors="replace")


def test_a_terminal_sees_what_is_being_read():
    assert "breaking down" in run_on_a_terminal("breakdown", str(TRACE), "--json")


def test_quiet_draws_nothing_on_the_terminal():
    assert "breaking down" not in run_on_a_terminal("breakdown", str(TRACE), "--json", "--quiet")


def test_a_pipe_gets_no_progress_line():
    done = subprocess.run([sys.executable, "-m", "verifyprof.cli", "breakdown", str(TRACE), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "breaking down" not in done.stderr


FORK_UNDER_STATUS = r"""
import json, sys, threading
import psutil
from verifyprof.pipeline.local_map import map_local
from verifyprof.pipeline.parallel import MapOptions
from verifyprof.report import progress

trace, pause = sys.argv[1], sys.argv[2] == "pause"
with progress.status("breaking down") as shown:
    drawing = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    outcomes = map_local([(0, trace, None), (1, trace, None)], MapOptions(), workers=2, pause=shown.paused if pause else None)
    next(outcomes)
    children = [" ".join(c.cmdline()) for c in psutil.Process().children()]
    rest = list(outcomes)
    still = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
print(json.dumps({"drawing": drawing, "still": still, "children": children, "mapped": 1 + len(rest)}))
"""


def map_under_a_drawn_status(pause: str) -> dict:
    """A fresh interpreter whose stderr is a real terminal, mapping two files with two workers."""
    master, slave = pty.openpty()
    done = subprocess.run([sys.executable, "-c", FORK_UNDER_STATUS, str(TRACE), pause], stdout=subprocess.PIPE, stderr=slave,
                          env={**os.environ, "TERM": "xterm"}, timeout=240, text=True)
    os.close(slave)
    os.close(master)
    assert done.returncode == 0
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_workers_fork_from_the_process_while_its_status_line_is_drawn():
    """The status line's thread waits while a worker forks: no fork server to start (~0.5 s)."""
    seen = map_under_a_drawn_status("pause")
    assert seen["drawing"] == ["verifyprof-status"] and seen["still"] == ["verifyprof-status"]
    assert seen["mapped"] == 2 and len(seen["children"]) == 2
    assert not any("forkserver" in c for c in seen["children"])


def test_a_threaded_process_that_cannot_pause_its_threads_starts_workers_from_a_fork_server():
    seen = map_under_a_drawn_status("no-pause")
    assert seen["drawing"] == ["verifyprof-status"] and seen["mapped"] == 2
    assert any("forkserver" in c for c in seen["children"])


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
