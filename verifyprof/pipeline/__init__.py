"""The one way through the stages: trace path(s) -> Trace -> Breakdown -> what-if.

The CLI, the benchmarks and the notebooks call only this package, so every entry reads,
attributes and models a trace the same way: :func:`open_run` makes one
:class:`~verifyprof.pipeline.run.Run` per command (its inputs read once, resolved once in
:mod:`verifyprof.pipeline.resolve`), and the functions below are thin wrappers over one. The
model receives a :class:`~verifyprof.contracts.schema.BreakdownFrame` (from a trace or from a
breakdown JSON read back) and never sees a trace.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from verifyprof.contracts.errors import VerifyprofError

if TYPE_CHECKING:  # the names below, imported when first used (a command imports what it runs)
    from verifyprof.attribution.kernels import KernelTable
    from verifyprof.contracts.schema import KERNELS_SCHEMA, WHATIF_SCHEMA
    from verifyprof.model.decision.candidates import Ranking
    from verifyprof.model.decision.compare import Comparison
    from verifyprof.model.decision.whatif import WhatifOptions
    from verifyprof.pipeline.model_files import prepared_of
    from verifyprof.pipeline.parallel import ParallelOptions
    from verifyprof.pipeline.read_ahead import drop_read_ahead, start_read_ahead
    from verifyprof.pipeline.reading import (
        breakdown,
        breakdown_frame,
        load,
        read_breakdown_json,
    )
    from verifyprof.pipeline.report_page import (
        group_regex,
        median_verify_windows,
        report,
        report_of,
    )
    from verifyprof.pipeline.resolve import check, story_group
    from verifyprof.pipeline.run import Run, open_run
    from verifyprof.trace.events import Trace
    from verifyprof.trace.sources import expand, is_breakdown_json

# Where each re-exported name lives: ``from verifyprof import pipeline`` costs nothing until a
# name is used, so ``capture``, ``hooks`` and a refused command never import pandas or the model.
_HOME = {
    "KernelTable": "verifyprof.attribution.kernels",
    "KERNELS_SCHEMA": "verifyprof.contracts.schema",
    "WHATIF_SCHEMA": "verifyprof.contracts.schema",
    "Ranking": "verifyprof.model.decision.candidates",
    "WhatifOptions": "verifyprof.model.inputs.options",
    "prepared_of": "verifyprof.pipeline.model_files",
    "ParallelOptions": "verifyprof.pipeline.parallel",
    "breakdown": "verifyprof.pipeline.reading",
    "breakdown_frame": "verifyprof.pipeline.reading",
    "load": "verifyprof.pipeline.reading",
    "read_breakdown_json": "verifyprof.pipeline.reading",
    "group_regex": "verifyprof.pipeline.report_page",
    "median_verify_windows": "verifyprof.pipeline.report_page",
    "report": "verifyprof.pipeline.report_page",
    "report_of": "verifyprof.pipeline.report_page",
    "check": "verifyprof.pipeline.option_checks",
    "story_group": "verifyprof.pipeline.resolve",
    "start_read_ahead": "verifyprof.pipeline.read_ahead",
    "drop_read_ahead": "verifyprof.pipeline.read_ahead",
    "Run": "verifyprof.pipeline.run",
    "open_run": "verifyprof.pipeline.run",
    "Trace": "verifyprof.trace.events",
    "expand": "verifyprof.trace.sources",
    "is_breakdown_json": "verifyprof.trace.sources",
}


def __getattr__(name: str) -> object:
    """A re-exported name, imported from its module on first use (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "KERNELS_SCHEMA",
    "WHATIF_SCHEMA",
    "ParallelOptions",
    "Run",
    "WhatifOptions",
    "breakdown",
    "breakdown_frame",
    "check",
    "compare",
    "expand",
    "group_regex",
    "is_breakdown_json",
    "kernels",
    "load",
    "median_verify_windows",
    "open_run",
    "prepared_of",
    "read_breakdown_json",
    "report",
    "report_of",
    "start_read_ahead",
    "drop_read_ahead",
    "story_group",
    "whatif",
]


def whatif(options: WhatifOptions, parallel: ParallelOptions | None = None) -> Ranking:
    """``whatif --from``: the breakdown of ``options.source`` (JSON, trace, capture folder, or
    several trace files by directory or glob) ranked into candidates."""
    if options.source is None:
        raise VerifyprofError("give --from a breakdown JSON or a trace")
    from verifyprof.pipeline.resolve import check
    from verifyprof.pipeline.run import open_run

    check(options)
    return open_run([options.source], options, parallel).ranked(options.source)


def kernels(
    source: str | Path | Trace,
    options: WhatifOptions | None = None,
    scope: str = "story",
    taxonomy: str | Path | None = None,
) -> KernelTable:
    """What ``verifyprof kernels`` shows: the kernels of the run's step group (``scope``:
    "story", "all", "range" or "whole-trace"), from a trace file or a trace already read."""
    from verifyprof.model.decision.whatif import WhatifOptions
    from verifyprof.pipeline.run import Run, open_run
    from verifyprof.trace.events import Trace

    options = options or WhatifOptions()
    if isinstance(source, Trace):
        return Run.of_trace(source, options, taxonomy=taxonomy, parts=True).kernels(scope)
    run = open_run([source], options, taxonomy=taxonomy, parts=True, keep_trace=True)
    return run.kernels(scope)


def compare(
    before: str | Path | Run,
    after: str | Path | Run,
    accept_len: float | None = None,
    manifest: str | Path | None = None,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    whole_trace: bool = False,
    step: str | None = None,
    width: int | None = None,
    mode: str | None = None,
) -> Comparison:
    """``verifyprof compare BEFORE AFTER`` of two inputs, each opened as one run (its trace kept
    for the kernel families) as the CLI opens them, ``before.compare(after)``; a run given
    (broken down by its own ranges) is taken under the options, what it read shared."""
    from dataclasses import replace

    from verifyprof.model.decision.whatif import WhatifOptions
    from verifyprof.pipeline.run import Run, open_run

    picks = {"step_range": step_regex, "whole_trace": whole_trace, "step": step, "width": width}
    manifest = Path(manifest) if manifest is not None else None
    given = WhatifOptions(accept_len=accept_len, manifest=manifest, mode=mode, **picks)
    sides = []
    for side, o, named in ((before, given, GIVEN), (after, WhatifOptions(**picks), PICKS)):
        if isinstance(side, Run):  # its steps as broken down; the comparison's picks
            sides.append(side.under(replace(side.options, **{k: getattr(o, k) for k in named})))
        else:
            sides.append(open_run([side], o, taxonomy=taxonomy, keep_trace=True))
    return sides[0].compare(sides[1])


PICKS = ("step", "width")  # which group is the verify, on both sides
GIVEN = (*PICKS, "accept_len", "manifest", "mode")  # BEFORE's: the comparison's
