"""A command stopped while it derives a file for the trace cache leaves neither a temp file nor a
partial entry, nor a helper still running: a real ``.sqlite.gz`` decompressed by a real CLI
process, stopped by a real signal mid-decompress; a (stand-in) nsys export stopped likewise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import OWN_TRACES, interruptible
from test_nsys_rep import STAND_IN

from verifyprof.trace.nsys.report_cache import NSYS_ENV

BIG_GZ = OWN_TRACES / "workload-moe-eager" / "trace.sqlite.gz"  # 4.8 MB, 14 MB decompressed


def cli(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "verifyprof.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
        preexec_fn=interruptible,
    )


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name) if folder.is_dir() else []


def signal_mid_decompress(cache: Path, sig: int) -> tuple[subprocess.Popen, bool]:
    """Run a breakdown of the big trace with an empty cache and send ``sig`` as soon as its temp
    file appears; (the process, ended; whether the signal came before the entry was made)."""
    proc = cli("breakdown", str(BIG_GZ), env={"VERIFYPROF_CACHE": str(cache)})
    deadline = time.monotonic() + 60
    while not temp_files(cache) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    return proc, not any(p.suffix == ".sqlite" for p in cache.iterdir())


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP), (signal.SIGINT, 130)],
)
def test_a_signal_mid_decompress_leaves_no_temp_file_and_no_entry(tmp_path, sig, code):
    for attempt in range(8):  # the decompress takes ~0.1 s: retry if the signal came after it
        cache = tmp_path / f"cache{attempt}"
        proc, mid_decompress = signal_mid_decompress(cache, sig)
        if mid_decompress:
            break
    assert mid_decompress, "the signal never landed while the file was being decompressed"
    assert proc.returncode == code, proc.stderr.read()
    assert temp_files(cache) == []
    assert list(cache.iterdir()) == []  # no partial entry either: the next run decompresses anew


def test_a_signal_during_an_nsys_export_stops_nsys_and_its_helper(tmp_path):
    """nsys runs in a session of its own (a plain kill of it would leave its helpers): a SIGTERM
    to verifyprof stops the whole export before verifyprof dies of it."""
    binary = tmp_path / "nsys"
    binary.write_text(STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    report = tmp_path / "run" / "capture.nsys-rep"
    report.parent.mkdir()
    report.write_bytes(b"\x00NSYS-REP stand-in report\x00" * 64)
    helper_pid = tmp_path / "helper.pid"
    env = {
        NSYS_ENV: str(binary),
        "STAND_IN_LOG": str(tmp_path / "calls.log"),
        "STAND_IN_EXPORT": str(report),
        "STAND_IN_HANG": str(helper_pid),
        "VERIFYPROF_CACHE": str(tmp_path / "cache"),
    }
    proc = cli("breakdown", str(report), env=env)
    deadline = time.monotonic() + 60
    while not helper_pid.exists() or not helper_pid.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "the stand-in nsys never ran"
        time.sleep(0.02)
    nsys_pid = next(
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and str(binary) in _cmdline(p)
    )
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    for pid in (nsys_pid, int(helper_pid.read_text())):
        assert _gone(pid), f"{pid} outlived verifyprof"
    assert temp_files(report.parent / ".verifyprof-cache") == []


def _cmdline(proc_dir: Path) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def _gone(pid: int, grace: float = 5.0) -> bool:
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)  # a failed test leaves nothing for the next ones
    return False
