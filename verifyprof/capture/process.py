"""Run a server (or program) in its own process group and stop all of it, children included.

SGLang spawns scheduler/TP processes; nsys adds its own. Stopping only the process we started
leaves GPU-holding orphans behind, so a :class:`ManagedProcess` starts its command as a session
leader, keeps track of every descendant it has seen (even ones that left the group), and stops
them all with SIGINT, then SIGTERM, then SIGKILL. Where the leader is a profiler that must write
its report after the application exits (nsys), the application is stopped first and the leader is
given its own, longer grace period.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from verifyprof.capture import proctable
from verifyprof.capture.proctable import Proc
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.lifetime import LIBC as _LIBC
from verifyprof.contracts.plumbing.lifetime import (
    PR_GET_CHILD_SUBREAPER,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
)

RUN_MARKER = "VERIFYPROF_RUN_ID"  # set in the environment of everything a ManagedProcess starts
INTERRUPT_GRACE_S = 10.0  # an interrupted capture's target: SIGINT, then SIGTERM after this
INTERRUPT_TERM_S = 5.0  # ... then SIGKILL after this


# --------------------------------------------------------------------------------------------
# Linux process-lifetime helpers (no-ops elsewhere)


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux): an orphan anywhere below it (a server's
    helper whose parent died, a daemon that double-forked and called setsid, with its
    environment cleared) is re-parented to us instead of init, so :meth:`ManagedProcess.tracked`
    still finds it and :meth:`ManagedProcess.stop` stops it. False where unsupported."""
    return _LIBC is not None and _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def is_subreaper() -> bool:
    if _LIBC is None:
        return False
    value = ctypes.c_int(0)
    return (
        _LIBC.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0 and value.value != 0
    )


def _child_setup() -> None:
    """Between fork and exec: die with us, and be interruptible even if we were started with
    SIGINT ignored (``cmd &`` in a script ignores it, and exec keeps ignored signals ignored)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # what signal_mask.stop_signals_deferred held
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        _LIBC.signal(int(signal.SIGINT), 0)  # SIG_DFL
        _LIBC.signal(int(signal.SIGTERM), 0)


def run_tool(
    argv: Sequence[str], *, timeout: float, **popen: object
) -> subprocess.CompletedProcess:
    """Run an external tool (nsys export, nsys --version) to its end, but never longer than
    ``timeout``: it runs in its own process group, and on the timeout, Ctrl-C or any other
    error the whole group (helpers it started included) is killed before this returns.
    Raises ``subprocess.TimeoutExpired`` on the timeout."""
    args = list(argv)
    proc = subprocess.Popen(args, start_new_session=True, **popen)  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()
        raise
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # helpers it left behind in its group
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# --------------------------------------------------------------------------------------------
# the managed process


@dataclass
class StopReport:
    """How the stop went: which signals were needed and what was still there at the end."""

    signals: list[str] = field(default_factory=list)
    leftover: list[int] = field(default_factory=list)
    exit_code: int | None = None
    stopped: list[int] = field(default_factory=list)  # the processes signalled

    @property
    def stopped_by(self) -> str:
        return self.signals[-1] if self.signals else "exited"


def _signal_name(sig: int) -> str:
    return signal.Signals(sig).name


DEAF_SETTLE_S = 2.0  # see ManagedProcess._wait_gone


class ManagedProcess:
    """A command started as the leader of its own session and process group.

    Output goes to ``log`` (a file) or, with ``echo``, through a pipe that is copied to the log
    and to ``echo``. ``tracked()`` is refreshed by :meth:`poll`; call it regularly while waiting so
    that short-lived intermediate parents do not hide their children from :meth:`stop`.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        echo: IO[str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log = Path(log)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log, "ab", buffering=0)  # noqa: SIM115 - closed in stop()
        self._echo_thread: threading.Thread | None = None
        self.run_id = uuid.uuid4().hex
        child_env = dict(os.environ if env is None else env)
        child_env[RUN_MARKER] = self.run_id
        # As a subreaper, every new descendant of ours is this run's (orphans come back to us);
        # what we had already started before is not.
        self._me = proctable.get(os.getpid()) if is_subreaper() else None
        self._foreign = (
            {p.pid for p in proctable.descendants([self._me])} if self._me is not None else set()
        )
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if echo is not None else self._log_file,
                stderr=subprocess.STDOUT,
                env=child_env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_child_setup if _LIBC is not None else None,
            )
        except FileNotFoundError as err:
            self._log_file.close()
            raise VerifyprofError(f"cannot run {self.argv[0]!r}: command not found") from err
        except PermissionError as err:
            self._log_file.close()
            raise VerifyprofError(f"cannot run {self.argv[0]!r}: permission denied") from err
        except OSError as err:  # ENOEXEC (not a program), E2BIG, ...
            self._log_file.close()
            raise VerifyprofError(f"cannot run {self.argv[0]!r}: {err.strerror}") from err
        self.pid = self.popen.pid
        self.pgid = self.pid
        self.started_at = time.time()
        self._known: dict[int, Proc] = {}
        leader = proctable.get(self.pid)
        if leader is not None:
            self._known[self.pid] = leader
        if echo is not None:
            self._echo_thread = threading.Thread(
                target=self._copy_output, args=(echo,), daemon=True
            )
            self._echo_thread.start()

    def _copy_output(self, echo: IO[str]) -> None:
        assert self.popen.stdout is not None
        for chunk in iter(lambda: self.popen.stdout.readline(), b""):
            with contextlib.suppress(OSError, ValueError):
                self._log_file.write(chunk)
            with contextlib.suppress(Exception):
                echo.write(chunk.decode("utf-8", errors="replace"))
                echo.flush()

    # -- state ---------------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def poll(self) -> int | None:
        """Refresh the set of known descendants; the leader's exit code if it has exited."""
        self._track()
        return self.popen.poll()

    def _track(self) -> None:
        roots = list(self._known.values()) + ([self._me] if self._me is not None else [])
        for proc in proctable.descendants(roots):
            if proc.pid not in self._foreign:
                self._known.setdefault(proc.pid, proc)
        self._reap_adopted()

    def _reap_adopted(self) -> None:
        """Collect the exit status of orphans re-parented to us (no one else will); never the
        leader's, which belongs to ``popen``."""
        if self._me is None:
            return
        for pid, proc in list(self._known.items()):
            if pid != self.pid and proctable.get(pid) == proc:  # the same process, not a reused pid
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)

    def _scan(self) -> list[Proc]:
        """Processes in our group or carrying our run marker (children that left the group)."""
        found = []
        for proc in proctable.all_procs():
            if proc.pid == os.getpid():
                continue
            if (
                proctable.pgid(proc) == self.pgid
                or proctable.environ_value(proc, RUN_MARKER) == self.run_id
            ):
                found.append(proc)
        return found

    def tracked(self) -> list[Proc]:
        """Every process of this run still alive: known descendants, group members, marked ones."""
        self._track()
        procs = {p.pid: p for p in self._known.values()}
        for proc in self._scan():
            procs.setdefault(proc.pid, proc)
        return [p for p in procs.values() if proctable.alive(p)]

    def wait(self, timeout: float | None = None, *, interval: float = 0.2) -> int | None:
        """Wait for the leader to exit (tracking descendants meanwhile); its code or None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(interval)

    # -- stopping ------------------------------------------------------------------------------

    def _send(self, procs: list[Proc], sig: int, *, group: bool) -> None:
        """Signal ``procs`` once each: the group with one killpg, the ones outside it one by one
        (a second SIGINT makes many servers, uvicorn's included, skip their clean shutdown)."""
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
        for proc in procs:
            if not (group and proctable.pgid(proc) == self.pgid):
                proctable.send(proc, sig)

    def _wait_gone(
        self,
        procs: list[Proc],
        timeout: float,
        hurry: threading.Event | None,
        sent: int | None = None,
    ) -> list[Proc]:
        """Wait until ``procs`` are gone, ``timeout`` passed or ``hurry`` is set. After ``sent``,
        once every process still there ignores it (a shell's background job ignores SIGINT, a
        ``trap '' TERM``), the wait ends :data:`DEAF_SETTLE_S` later: a signal that cannot act
        is not waited out, but what leaves by itself once its parent is gone (multiprocessing's
        resource tracker ignores both) gets the moment it needs."""
        deadline = time.monotonic() + timeout
        settle: float | None = None
        while True:
            self.popen.poll()  # reap the leader
            self._reap_adopted()
            remaining = [p for p in procs if proctable.alive(p)]
            now = time.monotonic()
            if not remaining or now >= deadline or (hurry is not None and hurry.is_set()):
                return remaining
            if sent is not None and all(proctable.ignores(p, sent) for p in remaining):
                settle = settle if settle is not None else now + DEAF_SETTLE_S
                if now >= settle:
                    return remaining
            else:
                settle = None
            time.sleep(0.05)

    def stop(
        self,
        *,
        int_timeout: float = 30.0,
        term_timeout: float = 10.0,
        kill_timeout: float = 5.0,
        leader_grace: float | None = None,
        hurry: threading.Event | None = None,
        on_phase: Callable[[str], None] | None = None,
    ) -> StopReport:
        """Stop everything: SIGINT, then SIGTERM, then SIGKILL, each after its timeout.

        ``leader_grace`` (nsys): the first SIGINT goes to the whole group, as a terminal's Ctrl-C
        would, but escalation hits only the application; the leader then gets ``leader_grace``
        seconds to finish its report before it is escalated in turn. ``hurry`` (set by a second
        Ctrl-C) cuts the current wait short.
        """
        report = StopReport()
        spare = leader_grace is not None

        def app(procs: list[Proc]) -> list[Proc]:
            return [p for p in procs if not (spare and p.pid == self.pid)]

        def say(text: str) -> None:
            if on_phase is not None:
                on_phase(text)

        procs = self.tracked()
        if procs:
            self._send(procs, signal.SIGINT, group=True)
            report.signals.append("SIGINT")
            say(f"sent SIGINT to {len(procs)} process(es)")
            self._wait_gone(app(procs), int_timeout, hurry, signal.SIGINT)
        for sig, timeout in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
            remaining = app(self.tracked())
            if not remaining:
                break
            self._send(remaining, sig, group=not spare)
            report.signals.append(_signal_name(sig))
            say(f"{len(remaining)} process(es) still running: sent {_signal_name(sig)}")
            self._wait_gone(remaining, timeout, hurry if sig != signal.SIGKILL else None, sig)
        if spare:
            remaining = self.tracked()
            if remaining:
                say("waiting for the profiler to write its report")
                remaining = self._wait_gone(remaining, leader_grace, hurry)
            for sig, timeout in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
                remaining = self.tracked()
                if not remaining:
                    break
                self._send(remaining, sig, group=True)
                report.signals.append(_signal_name(sig))
                say(f"profiler still running: sent {_signal_name(sig)}")
                self._wait_gone(remaining, timeout, None)
        # Anything that survived SIGKILL (D state, another user's process) is reported, not hidden.
        report.leftover = [p.pid for p in self.tracked()]
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=1.0)
        report.exit_code = self.popen.poll()
        self._close()
        return report

    def stop_leftovers(
        self, *, term_timeout: float = 10.0, kill_timeout: float = 5.0
    ) -> StopReport:
        """After the leader exited by itself, what it left running (``cmd &`` in a script, a
        daemon): SIGTERM, then SIGKILL after ``term_timeout``. No SIGINT first: a script's
        background job ignores it. Each is signalled alone (the dead leader's group id may be
        reused)."""
        report = StopReport(exit_code=self.popen.poll())
        for sig, timeout in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
            remaining = [p for p in self.tracked() if p.pid != self.pid]
            if not remaining:
                break
            report.stopped += [p.pid for p in remaining if p.pid not in report.stopped]
            self._send(remaining, sig, group=False)
            report.signals.append(_signal_name(sig))
            self._wait_gone(remaining, timeout, None, sig)
        report.leftover = [p.pid for p in self.tracked() if p.pid != self.pid]
        return report

    def _close(self) -> None:
        if self._echo_thread is not None:
            self._echo_thread.join(timeout=2.0)
        with contextlib.suppress(OSError):
            self._log_file.close()

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tracked():
            self.stop(int_timeout=5.0, term_timeout=5.0)
        else:
            self._close()
