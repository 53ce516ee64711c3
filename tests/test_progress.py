"""The progress line: on a terminal while a trace is read, never in a pipe or with --quiet."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
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
