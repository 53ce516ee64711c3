"""``python -m verifyprof.cli ARGS`` as a real process, forked from one that has imported it.

Most of the suite's CLI processes are there for what only a process has: its own exit status,
stdout and stderr as file descriptors (bytes that are not UTF-8, a stream nobody reads), its own
working directory (one deleted under it), its own environment. What they do not test is the
interpreter's start, yet it cost each ~0.5-1 CPU-s: the imports (pandas, pyarrow, typer, the
pipeline). :func:`run` gives such a test a process forked from a *zygote* that imported them once
(one per pytest worker and start-up environment): the child takes the caller's descriptors,
working directory, environment, umask and arguments, runs the module as ``-m`` does
(:func:`runpy.run_module`), and ends as the interpreter would (threads joined, ``atexit``
handlers run, ``SystemExit`` mapped to a status, an uncaught exception printed and status 1).

What a forked child cannot reproduce, tests keep to fresh processes: the start itself (Ctrl-C
while importing, which modules a command imports, the console script), signals sent from the
test, a terminal, capabilities dropped with ``setpriv``. A request whose start-up variables
(``PYTHON*``, the locale) differ from every running zygote's gets a zygote of its own, so what
the interpreter reads only when it starts is what the command's environment says.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
PREIMPORT = (  # what the analysis commands import; nothing that reads the environment on import
    "numpy",
    "pandas",
    "pyarrow",
    "sqlite3",
    "adbc_driver_sqlite.dbapi",
    "typer",
    "typer._click.decorators",
    "rich.console",
    "plotly.graph_objects",
    "verifyprof.cli",
    "verifyprof.pipeline.run",
    "verifyprof.pipeline.command_checks",
    "verifyprof.pipeline.reading",
    "verifyprof.trace.nsys.reader",
    "verifyprof.trace.nsys.shared_read",
    "verifyprof.attribution.breakdown",
    "verifyprof.attribution.kernels",
    "verifyprof.attribution.reduce",
    "verifyprof.attribution.timeline",
    "verifyprof.model.decision.whatif",
    "verifyprof.model.decision.compare",
    "verifyprof.report.console",
    "verifyprof.report.files",
    "verifyprof.report.whatif_console",
    "verifyprof.report.html",
)
# With every PYTHON* variable, read when a process starts; VERIFYPROF_PROCTABLE is read when
# verifyprof.capture.proctable is imported, which verifyprof.cli does.
START_VARS = ("LANG", "LC_ALL", "LC_CTYPE", "VERIFYPROF_PROCTABLE")
ACK = b"ack\n"  # the client has read a status: the zygote may reap that child


def run(
    args: list[str] | tuple[str, ...],
    *,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    stdout=subprocess.PIPE,
    text: bool = False,
    timeout: float = 120,
    remove_cwd: bool = False,
    limits: dict[int, int] | None = None,
) -> subprocess.CompletedProcess:
    """As ``subprocess.run([python, "-m", "verifyprof.cli", *args], stdout=stdout,
    stderr=PIPE, ...)``: ``stdout`` a pipe (PIPE) or an open file; ``remove_cwd``: the child
    removes its working directory before the command starts; ``limits``: resource limits
    (``resource.RLIMIT_*``: soft and hard) it sets first, as a ``preexec_fn`` would."""
    env = dict(os.environ if env is None else env)
    zygote = _zygote_for(env)
    argv = [sys.executable, "-m", "verifyprof.cli", *map(str, args)]
    request = {
        "args": argv[3:],
        "cwd": os.path.abspath(os.getcwd() if cwd is None else cwd),
        "env": env,
        "remove_cwd": remove_cwd,
        "limits": sorted((limits or {}).items()),
    }
    out_fd = None if stdout == subprocess.PIPE else _fileno(stdout)
    with zygote.lock:
        try:
            code, out, err = zygote.run(request, timeout, argv, out_fd)
        except BaseException:  # a test's time-out, Ctrl-C: its messages may be left unread
            zygote.close(kill=True)
            raise
    if text:
        return subprocess.CompletedProcess(
            argv, code, None if out is None else out.decode(), err.decode()
        )
    return subprocess.CompletedProcess(argv, code, out, err)


def _fileno(stream) -> int:
    if isinstance(stream, int):
        return stream
    stream.flush()
    return stream.fileno()


def _starts(name: str) -> bool:
    return name.startswith("PYTHON") or name in START_VARS


def _start_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if _starts(k)))


_zygotes: dict[tuple[tuple[str, str], ...], _Zygote] = {}
_zygotes_lock = threading.Lock()


def _zygote_for(env: dict[str, str]) -> _Zygote:
    key = _start_key(env)
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if zygote is None or not zygote.alive():
            own = {k: v for k, v in os.environ.items() if not _starts(k)}  # not a test's tag
            zygote = _zygotes[key] = _Zygote(own | dict(key))
        return zygote


class _Zygote:
    """The client's end: one socket to a serving process, one request at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lock = threading.Lock()
        self.child: int | None = None  # the request's process, while the zygote has not reaped it
        self.pending = b""  # what the zygote sent past the last whole line
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = mine
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(TESTS)],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            cwd=REPO,
            env=env,
        )
        theirs.close()
        ready = self._message(None)
        if ready.get("ready") is not True:
            raise RuntimeError(f"the CLI zygote did not start: {ready}")
        atexit.register(self.close)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, kill: bool = False) -> None:
        """Ends the zygote (it ends when its socket closes); ``kill``: now, and a later request
        starts another."""
        if kill:
            if self.child is not None:  # not reaped yet: still its pid (a zombie at worst)
                with contextlib.suppress(OSError):
                    os.kill(self.child, signal.SIGKILL)
            self.proc.kill()
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def run(
        self, request: dict, timeout: float, argv: list[str], out_fd: int | None
    ) -> tuple[int, bytes | None, bytes]:
        out_r, out_w = os.pipe() if out_fd is None else (None, out_fd)
        err_r, err_w = os.pipe()
        umask = os.umask(0)
        os.umask(umask)
        request = {**request, "umask": umask}
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode() + b"\n"], [0, out_w, err_w])
        finally:
            if out_r is not None:
                os.close(out_w)
            os.close(err_w)
        deadline = time.monotonic() + timeout
        self.child = self._message(deadline)["pid"]  # its own until the status is acknowledged
        try:
            out, err = _drain(out_r, err_r, deadline)
            code = int(self._message(deadline)["status"])
        except subprocess.TimeoutExpired:
            os.kill(self.child, signal.SIGKILL)  # running, or ended and not yet reaped
            self._message(None)
            self._acknowledge()
            raise subprocess.TimeoutExpired(argv, timeout) from None
        self._acknowledge()
        return code, out, err

    def _acknowledge(self) -> None:
        """The status is read: the zygote may reap the child (its pid is then free for reuse)."""
        self.sock.sendall(ACK)
        self.child = None

    def _message(self, deadline: float | None) -> dict:
        """The next line the zygote sent (two may come in one read: the rest is kept)."""
        while b"\n" not in self.pending:
            if deadline is not None:
                self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                raise subprocess.TimeoutExpired("verifyprof (forked)", 0) from None
            finally:
                self.sock.settimeout(None)
            if not chunk:
                raise RuntimeError(f"the CLI zygote ended (status {self.proc.poll()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)


def _drain(out_r: int | None, err_r: int, deadline: float) -> tuple[bytes | None, bytes]:
    """The pipes read to their end, as ``communicate`` does (no deadlock on a full pipe)."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd in (out_r, err_r) if fd is not None}
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired("verifyprof (forked)", 0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
        finally:
            for fd in chunks:
                os.close(fd)
    return (None if out_r is None else b"".join(chunks[out_r])), b"".join(chunks[err_r])


# --- the serving process -----------------------------------------------------------------------

_BOOT = "import sys; sys.path.insert(0, sys.argv[2]); import forked_cli; forked_cli.serve()"


def serve() -> None:
    """The zygote: import once, then fork one child per request and report its pid and status.
    It ends when the client's socket closes (the pytest worker ended)."""
    import importlib

    sock = socket.socket(fileno=int(sys.argv[1]))
    sys.path.remove(sys.argv[2])
    del sys.modules["forked_cli"]  # the child's modules are the CLI's, not the suite's
    for name in PREIMPORT:
        importlib.import_module(name)
    _send(sock, {"ready": True})
    while True:
        try:
            payload, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except OSError:
            return
        if not payload:
            return
        while not payload.endswith(b"\n"):
            more = sock.recv(1 << 20)
            if not more:
                return
            payload += more
        request = json.loads(payload)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request, fds)  # never returns (its warnings filters: the imports')
        for fd in fds:
            os.close(fd)
        _send(sock, {"pid": pid})
        # ended but not reaped: its pid stays its own until the client has read the status, so
        # a kill from the client (a time-out) can never reach another process
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        code = ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
        _send(sock, {"status": code})
        acked = sock.recv(len(ACK), socket.MSG_WAITALL) == ACK  # exactly: fds may follow it
        os.waitpid(pid, 0)
        if not acked:
            return


def _send(sock: socket.socket, message: dict) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _child(request: dict, fds: list[int]) -> None:
    """The forked child: the caller's streams, folder, environment and umask, then the CLI as
    ``python -m verifyprof.cli`` runs it, ended as the interpreter ends."""
    import atexit as _atexit
    import resource
    import runpy
    import traceback

    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.umask(request["umask"])
        os.chdir(request["cwd"])
        if request["remove_cwd"]:
            os.rmdir(request["cwd"])
        for which, limit in request["limits"]:
            resource.setrlimit(which, (limit, limit))
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = request["cwd"]
        sys.argv = ["-m", *request["args"]]  # runpy puts the module's file in argv[0]
        try:
            runpy.run_module("verifyprof.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exit_code(exc)
        except KeyboardInterrupt:
            traceback.print_exc()
            _flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)  # as Python 3.11 ends on an uncaught Ctrl-C
        except BaseException:  # noqa: BLE001 - printed as the interpreter prints it
            sys.excepthook(*sys.exc_info())
            code = 1
        threading._shutdown()  # type: ignore[attr-defined] - what Py_Finalize does first
        _atexit._run_exitfuncs()
        if not _flush() and code == 0:
            code = 120  # the interpreter's status when flushing stdout fails at exit
    finally:
        os._exit(code)


def exit_code(exc: SystemExit) -> int:
    """As the interpreter maps ``sys.exit(x)``: None is 0, an int is itself, anything else prints
    and is 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _flush() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            ok = False
    return ok
