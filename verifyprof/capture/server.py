"""The server as seen from outside: its port (free before we start, reachable after), its
``/health`` answer, and the tail of its log that goes into an error. Starting and stopping the
process itself is :mod:`verifyprof.capture.process`'s."""

from __future__ import annotations

import errno
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from verifyprof.capture.process import ManagedProcess
from verifyprof.contracts.errors import VerifyprofError

LOG_TAIL_LINES = 30


class CaptureError(VerifyprofError):
    """The capture failed at run time (server died, never became healthy, program failed)."""

    exit_code = 1


class NoRangesError(VerifyprofError):
    """Hooks were asked for and not one verifyprof range was recorded (exit 2: fix the hooks)."""


class PortInUseError(VerifyprofError):
    """The server's port is taken before we start it: the request would go to someone else."""


# --------------------------------------------------------------------------------------------
# ports and logs


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something listens on ``host:port`` (or the port cannot be bound there).

    Binding with SO_REUSEADDR ignores sockets lingering in TIME_WAIT (a server we just stopped)
    but still fails on a live listener; a connect catches listeners on another address.
    """
    bind_host = "0.0.0.0" if host in ("", "0.0.0.0", "localhost") else host
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    connect_host = "127.0.0.1" if bind_host == "0.0.0.0" else bind_host
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((connect_host, port)) == 0


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    if port_in_use(port, host):
        raise PortInUseError(
            f"port {port} is already in use on {host}: stop whatever listens there "
            f"(`ss -ltnp 'sport = :{port}'` shows it) or pass another --port"
        )


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS just considered free (for tests and defaults)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a (possibly huge, possibly still growing) log file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def with_log_tail(message: str, log: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if log is None:
        return message
    tail = log_tail(log, lines)
    if not tail:
        return f"{message} (log {log} is empty)"
    return (
        f"{message}\n--- last {len(tail.splitlines())} lines of {log} ---\n{tail}\n--- end of"
        f" {log} ---"
    )


# --------------------------------------------------------------------------------------------
# health


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET without proxies (a proxy must never see requests to a local server)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read() if err.fp is not None else b""


def wait_healthy(
    base_url: str,
    server: ManagedProcess,
    *,
    timeout: float,
    interval: float = 0.5,
    path: str = "/health",
    on_wait: Callable[[float], None] | None = None,
) -> float:
    """Poll ``/health`` until it answers 200; seconds it took.

    Raises :class:`CaptureError` with the tail of the server log if the server exits first or
    the timeout passes.
    """
    start = time.monotonic()
    last = "no answer yet"
    while True:
        code = server.poll()
        if code is not None:
            raise CaptureError(
                with_log_tail(
                    f"server exited with code {code} before it became healthy", server.log
                )
            )
        try:
            status, _ = http_get(base_url + path, timeout=min(5.0, max(interval, 1.0)))
            if status == 200:
                return time.monotonic() - start
            last = f"HTTP {status}"
        except (OSError, urllib.error.URLError) as err:
            last = type(getattr(err, "reason", err)).__name__
        elapsed = time.monotonic() - start
        if elapsed >= timeout:
            raise CaptureError(
                with_log_tail(
                    f"server not healthy after {timeout:g} s (GET {base_url}{path}: {last}); "
                    "raise --health-timeout if it is still loading",
                    server.log,
                )
            )
        if on_wait is not None:
            on_wait(elapsed)
        time.sleep(interval)
