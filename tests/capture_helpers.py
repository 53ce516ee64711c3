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
from pathlib import Path

import psutil

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
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.update(extra)
    return env


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Live (non-zombie) processes carrying ``tag`` in their environment, this one excluded."""
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


def describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
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
            proc.kill()
        except psutil.Error:
            pass


def capture_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "verifyprof.cli", "capture", *args]


def run_capture(args: list[str], tag: str, timeout: float = 120.0, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        capture_cmd(*args), env=tagged_env(tag, **env), cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def start_capture(args: list[str], tag: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        capture_cmd(*args), env=tagged_env(tag, **env), cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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
