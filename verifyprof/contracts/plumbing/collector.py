"""The cyclic garbage collector while the CLI's own process loads modules.

Python's collector runs once per 700 new container objects and looks at every object younger
than its generation: loading typer, pandas, pyarrow and the analysis (~135k objects, none of
them garbage) set it off 237 times in an 8-rank breakdown, 81-82 ms on the one thread every
command waits for (2 cores; 53 times, 10-12 ms, with the pauses:
``bench/results/cli_timeline_gc_2core.log``). Inside :func:`loading` it is off; on leaving,
everything loaded is frozen (``gc.freeze``: never looked at again; a map worker forked later
then leaves those pages shared, where the collector's marks would copy them) and the collector
is on again. Only in the process the CLI started (:func:`take_over`): a program that imports
verifyprof keeps its own collector as it set it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_OWN = [False]  # this process is the CLI's own


def take_over() -> None:
    """The CLI's process: :func:`loading` applies here."""
    _OWN[0] = True


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """While inside, no collection; what was made is frozen on leaving, however it is left (a
    no-op outside the CLI's process, and nested in another ``loading``)."""
    if not _OWN[0] or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
