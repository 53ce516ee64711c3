"""A live status line on stderr while a long ingest runs: what is being read and for how long.

Only on a terminal: in a pipe, in CI or with ``--quiet`` nothing is drawn, so stdout and stderr
stay exactly what a script expects.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rich.console import Console


@contextlib.contextmanager
def status(text: str, quiet: bool = False) -> Iterator[None]:
    """``with status("reading trace.sqlite.gz"): ...`` shows a spinner and the elapsed time."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal or not sys.stderr.isatty():
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True) as bar:
        bar.add_task(text, total=None)
        yield
