"""The map on this machine: one short-lived process per file, ``workers`` at a time.

A process per file, not a pool of long-lived ones: a worker that dies (killed, out of memory, a
crash in a native library) costs only its own file, which is reported by name, and each file's
memory goes back to the OS when its process exits. Processes are forked from this one when it
runs no other thread (the CLI: a task starts in milliseconds with everything imported), else from
a ``forkserver`` that imports the analysis once (forking a threaded process is unsafe).
"""

from __future__ import annotations

import importlib
import multiprocessing
import sys
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from pathlib import Path

from verifyprof.attribution.rank_part import RankPart
from verifyprof.pipeline.parallel import Failure, MapOptions, MapTask, map_inline, safe_map
from verifyprof.trace.shares import ProcessFilter

# everything a task imports, so that no task pays for an import (pyarrow and ADBC: ~0.2 s)
_PRELOAD = ["verifyprof.pipeline.parallel", "verifyprof.pipeline.local_map", "verifyprof.trace.nsys.reader",
            "verifyprof.trace.kineto.reader", "verifyprof.trace.cache", "pyarrow", "adbc_driver_sqlite.dbapi"]


def map_local(tasks: list[MapTask], options: MapOptions, workers: int) -> Iterator[tuple[int, RankPart | Failure]]:
    """(index, part or failure) per task, as they finish. ``workers <= 1`` maps in this process."""
    if workers <= 1 or len(tasks) <= 1:
        yield from map_inline(tasks, options)
        return
    context = _context()
    pending = list(reversed(tasks))
    running: dict[Connection, tuple[multiprocessing.process.BaseProcess, int, Path]] = {}
    exiting: list[multiprocessing.process.BaseProcess] = []  # answered; still tearing down its memory
    try:
        while pending or running:
            while pending and len(running) < workers:
                index, path, share = pending.pop()
                receive, send = context.Pipe(duplex=False)
                process = context.Process(target=_work, args=(send, str(path), index, options, share), daemon=True)
                try:
                    process.start()
                except OSError as exc:  # the fork server died (killed with its workers, say): this file is lost, not the run
                    send.close()
                    receive.close()
                    yield index, Failure(str(path), f"worker process could not start: {exc.strerror or exc}")
                    continue
                send.close()  # the child holds the write end: EOF here once it exits
                running[receive] = (process, index, path)
            for receive in wait(list(running)):
                process, index, path = running.pop(receive)  # type: ignore[index]
                exiting.append(process)  # reaped later: the next file starts while this one exits
                yield index, _collect(receive, process, path)
            exiting = [p for p in exiting if p.exitcode is None]  # exitcode polls (and reaps) without blocking
    finally:
        for receive, (process, _, _) in running.items():  # stopped early (strict, interrupt)
            process.kill()
            process.join()
            receive.close()
        for process in exiting:
            process.join()


def _context():
    if sys.platform == "linux" and threading.active_count() == 1:
        for module in _PRELOAD:  # imported once here, not in every task
            importlib.import_module(module)
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _work(send: Connection, path: str, index: int, options: MapOptions, share: ProcessFilter | None) -> None:
    """In the child: map one file (or its share of processes), send the part (or the failure) back."""
    send.send(safe_map(path, index, options, share))
    send.close()


def _collect(receive: Connection, process: multiprocessing.process.BaseProcess, path: Path) -> RankPart | Failure:
    """The child's answer (the child is left to exit), or a failure saying how it died."""
    try:
        outcome = receive.recv()
    except (EOFError, OSError):
        outcome = None
    finally:
        receive.close()
    if outcome is not None:
        return outcome
    process.join()
    code = process.exitcode
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return Failure(str(path), f"worker process died ({how}) before it finished the file")
