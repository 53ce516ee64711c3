"""The map on this machine: ``workers`` processes, each mapping one file at a time.

A worker maps files one after another (its heap, warm from the file before, makes the next one
~20% cheaper than in a fresh process) and holds one file's events at a time. A worker that dies
(killed, out of memory, a crash in a native library) costs only the file it was mapping, which is
reported by name; a new worker takes the files still to map. Workers are forked from this process
when it runs no other thread (the CLI, its status line paused while a worker forks: a worker starts
in milliseconds with everything imported), else from a ``forkserver`` that imports the analysis
once (forking a threaded process is unsafe). A worker dies with the process that started it, even
one killed outright (a parent-death signal), and is stopped by it on Ctrl-C, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from verifyprof.attribution.rank_part import RankPart
from verifyprof.contracts.plumbing import collector
from verifyprof.contracts.plumbing.lifetime import die_with_parent
from verifyprof.contracts.plumbing.outputs import CLEANUP_SIGNALS
from verifyprof.pipeline.heap import keep_freed_memory
from verifyprof.pipeline.map_task import (
    Failure,
    MapOptions,
    MapTask,
    map_inline,
    safe_map,
)

MAX_LOST_STARTS = 3
STOP_GRACE_S = 2.0  # a worker stopped early: SIGTERM, then SIGKILL after this
# everything a task imports, so that no task pays for an import (pyarrow and ADBC: ~0.2 s)
_PRELOAD = [
    "verifyprof.pipeline.parallel",
    "verifyprof.pipeline.map_task",
    "verifyprof.pipeline.local_map",
    "verifyprof.pipeline.heap",
    "verifyprof.trace.nsys.reader",
    "verifyprof.trace.kineto.reader",
    "verifyprof.trace.cache",
    "pyarrow",
    "adbc_driver_sqlite",
]


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    task: MapTask | None = None  # the file it is mapping


def map_local(
    tasks: list[MapTask],
    options: MapOptions,
    workers: int,
    pause: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Iterator[tuple[int, RankPart | Failure]]:
    """(index, part or failure) per task, as they finish. ``workers <= 1`` maps in this process.
    ``pause``: the caller's other threads wait inside it, so workers fork from this process.
    ``meanwhile``: run once here after the first workers have started, while this process would
    only wait for them (its failure is left to the code that needs what it does)."""
    if workers <= 1 or len(tasks) <= 1:
        yield from map_inline(tasks, options)
        return
    pause = pause or contextlib.nullcontext
    pending = list(reversed(tasks))
    busy: dict[Connection, _Worker] = {}
    done: list[
        _Worker
    ] = []  # every worker started: stopped and reaped at the end, so exiting never holds up a file
    lost_starts = 0  # workers in a row that were gone before their first file
    try:
        while pending or busy:
            while (
                pending and len(busy) < workers
            ):  # start workers (at first, and for those that died)
                # forked while no other thread runs, else from a fork server (chosen at each
                # start)
                with pause():
                    worker = _start(_context(), options) if lost_starts < MAX_LOST_STARTS else None
                if not isinstance(
                    worker, _Worker
                ):  # the fork server died, say: a busy worker may take the file
                    if busy:
                        break
                    index, path, _ = pending.pop()
                    yield (
                        index,
                        Failure(
                            str(path),
                            worker.reason if worker else "worker processes die as they start",
                        ),
                    )
                    continue
                done.append(worker)
                if _give(worker, pending):
                    busy[worker.conn] = worker
                else:
                    lost_starts += 1
            if not busy:
                continue
            if meanwhile is not None:
                _meanwhile, meanwhile = meanwhile, None
                with contextlib.suppress(Exception):
                    _meanwhile()
            for conn in wait(list(busy)):
                worker = busy.pop(conn)  # type: ignore[arg-type]
                index, path, _ = worker.task  # type: ignore[misc]
                outcome = _answer(worker)
                if outcome is not None:
                    lost_starts = 0
                    if pending and _give(worker, pending):
                        busy[worker.conn] = worker  # the next file on the warm worker
                    else:
                        _stop(worker)  # exits now, while the others still map; reaped at the end
                yield index, outcome if outcome is not None else _died(worker, str(path))
    finally:
        _stop_all(list(busy.values()), done)


def _stop_all(busy: list[_Worker], done: list[_Worker]) -> None:
    """Stopped early (strict, Ctrl-C, SIGTERM): a busy worker gets SIGTERM (a decompress into the
    cache removes its temp file), SIGKILL if it is still there after a grace; all are reaped."""
    for worker in busy:
        worker.process.terminate()
    for worker in busy:
        worker.process.join(STOP_GRACE_S)
        if worker.process.exitcode is None:
            worker.process.kill()
    for worker in done:
        _stop(worker)
        worker.process.join()


_HELD = {signal.SIGINT, *CLEANUP_SIGNALS}


def _start(context, options: MapOptions) -> _Worker | Failure:
    parent, child = context.Pipe(duplex=True)
    process = context.Process(target=_serve, args=(child, options, os.getpid()), daemon=True)
    # A forked worker starts with Ctrl-C and the cleanup signals held until it has its own
    # handlers: a SIGTERM (a strict map stopping) that came meanwhile would run the parent's.
    forked = context.get_start_method() == "fork"
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD) if forked else None
    try:
        process.start()
    except OSError as exc:
        parent.close()
        child.close()
        return Failure("", f"worker process could not start: {exc.strerror or exc}")
    finally:
        if held is not None:
            signal.pthread_sigmask(
                signal.SIG_SETMASK, held
            )  # a Ctrl-C meanwhile reaches this process now
    child.close()  # the worker holds its end: EOF here once it exits
    return _Worker(process, parent)


def _give(worker: _Worker, pending: list[MapTask]) -> bool:
    """Send the next task; False (the task stays pending) if the worker is already gone."""
    task = pending[-1]
    try:
        worker.conn.send((task[0], str(task[1]), task[2]))
    except (
        BrokenPipeError,
        OSError,
    ):  # killed while it waited for this file: the file was not started
        return False
    pending.pop()
    worker.task = task
    return True


def _answer(worker: _Worker) -> RankPart | Failure | None:
    try:
        return worker.conn.recv()
    except (EOFError, OSError):
        return None


def _died(worker: _Worker, path: str) -> Failure:
    worker.process.join()
    code = worker.process.exitcode
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return Failure(path, f"worker process died ({how}) before it finished the file")


def _stop(worker: _Worker) -> None:
    """Tell the worker to exit (a message, not EOF: workers forked later hold copies of this
    end)."""
    if worker.conn.closed:
        return
    try:
        worker.conn.send(None)
    except (BrokenPipeError, OSError):
        pass
    worker.conn.close()


def _context():
    if sys.platform == "linux" and threading.active_count() == 1:
        with collector.loading():
            for module in _PRELOAD:  # imported once here, not in every task
                importlib.import_module(module)
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _let_fork_server_go() -> None:
    """A fork server exits when the pipe from the process that started it reaches EOF, but each
    child it forks holds a copy of that pipe's write end (to start processes of its own, which a
    worker never does): closed here, the fork server ends with the map's process, and the worker
    with the fork server (its parent-death signal)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def _serve(conn: Connection, options: MapOptions, parent: int) -> None:
    """In the worker: map the files it is sent, one at a time, until the pipe closes (the memory
    one file frees kept for the next: :mod:`~verifyprof.pipeline.heap`). It dies with ``parent``
    (the map's process, however that ends: it would hold the caller's stdout open)."""
    for sig in CLEANUP_SIGNALS:  # a forked worker has the parent's handlers: its own, the default
        signal.signal(sig, signal.SIG_DFL)
    die_with_parent(parent)
    _let_fork_server_go()
    keep_freed_memory()
    sys.stdout, sys.stderr = (
        sys.__stdout__,
        sys.__stderr__,
    )  # not the parent's status line's redirection
    signal.signal(
        signal.SIGINT, signal.SIG_IGN
    )  # Ctrl-C is the parent's to handle: it stops the workers
    # Held since the fork: a Ctrl-C that came is dropped, a SIGTERM now ends the worker.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, path, share = task
        conn.send(safe_map(path, index, options, share))
