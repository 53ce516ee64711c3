"""A live status line on stderr while a long ingest runs: what is being read, how many of its
files are mapped, and for how long.

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
from rich.markup import escape as markup_escape

from verifyprof.contracts.plumbing.text import safe_text

REDRAW_S = 0.1
# a redraw blocked on a stopped terminal (Ctrl-S) is left behind; the map then sees a thread and
# forks safely
JOIN_S = 0.5


class Status:
    """The status line being drawn (or nothing, off a terminal)."""

    def __init__(self, bar=None) -> None:  # type: ignore[no-untyped-def]
        self._bar = bar
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = (
            None  # the running thread's own: one left behind still ends
        )

    @property
    def drawn(self) -> bool:
        return self._bar is not None

    def start(self) -> None:
        if self._bar is None or self._thread is not None:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._redraw, args=(self._stop,), name="verifyprof-status", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None or self._stop is None:
            return
        self._stop.set()
        self._thread.join(JOIN_S)
        self._thread = self._stop = None

    def count(self, done: int, total: int, what: str) -> None:
        """``(3/8 files)`` beside the text: how far a map of several files has come (``total`` 0:
        none)."""
        if self._bar is None:
            return
        self._bar.update(self._bar.task_ids[0], count=f"({done}/{total} {what})" if total else "")
        self._bar.refresh()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No drawing thread inside: the process may fork (the line stays, its clock waits)."""
        running = self._thread is not None
        self.stop()
        for stream in (
            sys.__stdout__,
            sys.__stderr__,
        ):  # a fork copies unwritten output; the worker would write it again
            if stream is not None:
                stream.flush()
        try:
            yield
        finally:
            if running:
                self.start()

    def _redraw(self, stop: threading.Event) -> None:
        while not stop.wait(REDRAW_S):
            self._bar.refresh()


@contextlib.contextmanager
def status(text: str, quiet: bool = False) -> Iterator[Status]:
    """``with status("reading trace.sqlite.gz") as shown: ...`` shows a spinner and the elapsed
    time; ``shown.count`` adds a file count, ``shown.paused()`` is for the moments the process
    forks.
    The text is cut with an ellipsis, never the count or the clock, to fit the terminal."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal or not sys.stderr.isatty():
        yield Status()
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    columns = (
        SpinnerColumn(),
        TextColumn(
            "{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)
        ),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
    )
    try:
        with Progress(
            *columns, console=err, transient=True, auto_refresh=False, expand=True
        ) as bar:
            # the text quotes names: escaped (an ESC, a byte not UTF-8), never read as markup
            bar.add_task(markup_escape(safe_text(text)), total=None, count="")
            bar.refresh()
            shown = Status(bar)
            shown.start()
            try:
                yield shown
            finally:
                shown.stop()
    finally:
        err.show_cursor(True)  # even when interrupted while the line was being set up
