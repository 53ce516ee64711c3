"""A live status line on stderr while a long ingest runs: what is being read and for how long.

Only on a terminal: in a pipe, in CI or with ``--quiet`` nothing is drawn, so stdout and stderr
stay exactly what a script expects. The line is redrawn by one thread of ours (rich's own refresh
thread cannot be joined), which :meth:`Status.paused` stops and joins: a process running no other
thread can fork its map workers with everything imported, where a threaded one must start them
from a fork server that imports the analysis again (~0.5 s before the first file).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from rich.console import Console

REDRAW_S = 0.1


class Status:
    """The status line being drawn (or nothing, off a terminal)."""

    def __init__(self, bar=None, text: str = "") -> None:  # type: ignore[no-untyped-def]
        self._bar = bar
        self._text = text
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def drawn(self) -> bool:
        return self._bar is not None

    def start(self) -> None:
        if self._bar is None or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._redraw, name="verifyprof-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None

    def count(self, done: int, total: int, what: str) -> None:
        """``reading run/*.sqlite (3/8 files)``: how far a map of several files has come."""
        if self._bar is None:
            return
        self._bar.update(self._bar.task_ids[0], description=f"{self._text} ({done}/{total} {what})")
        self._bar.refresh()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No drawing thread inside: the process may fork (the line stays, its clock waits)."""
        running = self._thread is not None
        self.stop()
        try:
            yield
        finally:
            if running:
                self.start()

    def _redraw(self) -> None:
        while not self._stop.wait(REDRAW_S):
            self._bar.refresh()


@contextlib.contextmanager
def status(text: str, quiet: bool = False) -> Iterator[Status]:
    """``with status("reading trace.sqlite.gz") as shown: ...`` shows a spinner and the elapsed
    time; ``shown.paused()`` is for the moments the process forks."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal or not sys.stderr.isatty():
        yield Status()
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True,
                  auto_refresh=False) as bar:
        bar.add_task(text, total=None)
        bar.refresh()
        shown = Status(bar, text)
        shown.start()
        try:
            yield shown
        finally:
            shown.stop()
