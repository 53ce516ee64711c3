"""Shared by the capture tests: run ``verifyprof capture`` as a real subprocess against the real
fake-SGLang server process, and find every process a test started (by an environment tag that
all of them inherit), so "nothing left running" is checked with psutil, not assumed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import forked_cli

try:
    import psutil
except ImportError:  # a GPU image without psutil: read /proc directly (see _proc_tagged)
    psutil = None

REPO = Path(__file__).resolve().parents[1]
FAKE_SERVER = Path(__file__).resolve().parent / "fake_sglang_server.py"
TAG = "VERIFYPROF_TEST_TAG"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fake_server_cmd(*flags: str) -> str:
    return " ".join([sys.executable, str(FAKE_SERVER), "--model-path", "fake/model", *flags])


def tagged_env(tag: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env[TAG] = tag
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    env.update(extra)
    return env


def new_tag() -> str:
    return uuid.uuid4().hex


class _ProcEntry:
    """The bits of psutil.Process the helpers use, read from /proc."""

    def __init__(self, pid: int, ppid: int) -> None:
        self.pid, self._ppid = pid, ppid

    def ppid(self) -> int:
        return self._ppid

    def cmdline(self) -> list[str]:
        try:
            return (
                Path(f"/proc/{self.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            )
        except OSError:
            return []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ProcEntry) and other.pid == self.pid

    def __hash__(self) -> int:
        return self.pid


def _proc_tagged(tag: str) -> list[_ProcEntry]:
    found = []
    marker = f"{TAG}={tag}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if marker not in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                continue
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            found.append(_ProcEntry(int(name), int(fields[1])))
    return found


def tagged_processes(tag: str) -> list:
    """Live (non-zombie) processes carrying ``tag`` in their environment, this one excluded."""
    if psutil is None:
        return _proc_tagged(tag)
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(TAG) == tag and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def describe(procs: list) -> list[str]:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except Exception:
            out.append(str(proc.pid))
    return out


def assert_nothing_left(tag: str, grace_s: float = 3.0) -> None:
    """Every process the test started is gone (a short grace for exits already under way)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = tagged_processes(tag)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left, f"processes left running: {describe(left)}"


def kill_tagged(tag: str) -> None:
    """Test teardown safety net: a failing test must not leak servers into the next ones."""
    for proc in tagged_processes(tag):
        try:
            os.kill(proc.pid, 9)
        except OSError:
            pass


def capture_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "verifyprof.cli", "capture", *args]


def run_capture(
    args: list[str], tag: str, timeout: float = 120.0, **env: str
) -> subprocess.CompletedProcess:
    """``verifyprof capture ARGS`` to its end, a process forked from one that has imported the
    CLI (``forked_cli``); :func:`start_capture` starts a fresh one, for tests that signal it."""
    return forked_cli.run(
        ["capture", *args], env=tagged_env(tag, **env), cwd=REPO, text=True, timeout=timeout
    )


def capture_program(out: Path, script: Path, *flags: str, tag: str) -> subprocess.CompletedProcess:
    """``verifyprof capture --backend none --out OUT FLAGS -- python SCRIPT``: a program capture
    with no profiler, to its end."""
    return run_capture(
        ["--backend", "none", "--out", str(out), *flags, "--", sys.executable, str(script)],
        tag,
        timeout=240,
    )


def start_capture(args: list[str], tag: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        capture_cmd(*args),
        env=tagged_env(tag, **env),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def wait_for_log(path: Path, text: str, count: int = 1, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} did not appear {count} time(s) in {path} within {timeout} s")


def signal_when_logged(
    capture: subprocess.Popen,
    log: Path,
    text: str,
    sig: int,
    count: int = 1,
    before: Callable[[], None] | None = None,
) -> str:
    """Send ``sig`` to a running capture once ``text`` is in ``log`` ``count`` times (``before``
    runs just before the signal), wait for it to end, and return its stderr; killed if it hangs."""
    try:
        wait_for_log(log, text, count=count)
        if before is not None:
            before()
        capture.send_signal(sig)
        _, stderr = capture.communicate(timeout=60)
    finally:
        if capture.poll() is None:
            capture.kill()
    return stderr
