"""Work in a thread beside the main one: how often the interpreter hands the GIL between them
(the CLI's own process), and an iterable produced ahead of the loop that consumes it.

Python hands the GIL from a thread running Python code to one asking for it only after the
switch interval, 5 ms. The export read's threads ask for it once per Arrow batch and column
they copy out, while the main thread loads pandas and the analysis; a thread encoding the
breakdown JSON's steps asks for it between Arrow calls while the main thread sums the
breakdown. Each ask waited up to 5 ms; :func:`switch_often` shortens the wait in the CLI's own
process (a program importing verifyprof keeps its interval as it set it).
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

from verifyprof.contracts.plumbing.cpus import usable_cpus

SWITCH_S = 0.0005  # the CLI's switch interval (bench/bench_read_batches.py measures others)

T = TypeVar("T")
_END = object()


def switch_often() -> None:
    """The CLI's process hands the GIL over after :data:`SWITCH_S` (never less often than it
    did): only threads asking for it notice, a lone thread runs as before."""
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_S))


@contextlib.contextmanager
def ahead(items: Iterable[T], depth: int, name: str) -> Iterator[Iterator[T]]:
    """``items`` iterated in a thread, ``depth`` items ahead of the consumer at most (its memory
    is ``depth`` + 2 items: those queued, the one the thread holds, the one consumed), while
    the block does other work: the block's iterator yields them in order, and raises what
    iterating them raised (dropped if the block never asks for it). Leaving the block, however
    it is left, stops the thread after the item it is on and closes ``items``. With one usable
    CPU there is nothing to overlap: the block iterates ``items`` itself."""
    if usable_cpus() < 2:
        yield iter(items)
        return
    made: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def produce() -> None:
        source = iter(items)
        try:
            for item in source:
                made.put((item, None))
                if stop.is_set():
                    return
            made.put((_END, None))
        except BaseException as err:  # noqa: BLE001 - handed to the consumer, raised there
            made.put((_END, err))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # a generator stopped early runs its own cleanup here

    def consume() -> Iterator[T]:
        while True:
            item, err = made.get()
            if err is not None:
                raise err
            if item is _END:
                return
            yield item

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        yield consume()
    finally:
        stop.set()
        _drain(made, thread)


def _drain(made: queue.Queue, thread: threading.Thread) -> None:
    """Take what the thread queues until it ends (a put waiting for room must be made for it to
    see ``stop``); a Ctrl-C meanwhile is raised once it has ended, never leaving it blocked."""
    interrupted: BaseException | None = None
    while thread.is_alive():
        try:
            with contextlib.suppress(queue.Empty):
                made.get(timeout=0.01)
        except BaseException as err:  # noqa: BLE001 - raised below, once the thread ended
            interrupted = interrupted or err
    thread.join()
    if interrupted is not None:
        raise interrupted
