"""The one way through the stages: trace path(s) -> Trace -> Breakdown -> what-if.

The CLI, the benchmarks and the notebooks call only this package, so every entry reads,
attributes and models a trace the same way: :func:`open_run` makes one
:class:`~verifyprof.pipeline.run.Run` per command (its inputs read once, resolved once in
:mod:`verifyprof.pipeline.resolve`), and the functions below are thin wrappers over one. The
model receives a :class:`~verifyprof.contracts.schema.BreakdownFrame` (from a trace or from a
breakdown JSON read back) and never sees a trace.
"""

from __future__ import annotations

from pathlib import Path

from verifyprof.attribution.kernels import KernelTable
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import KERNELS_SCHEMA, WHATIF_SCHEMA
from verifyprof.model.decision.candidates import Ranking
from verifyprof.model.decision.whatif import WhatifOptions, plain_numbers
from verifyprof.pipeline.before_after import Loaded, compare, load_input
from verifyprof.pipeline.captures import resolve_captures, whatif_run
from verifyprof.pipeline.model_files import prepared_of
from verifyprof.pipeline.parallel import ParallelOptions
from verifyprof.pipeline.reading import (
    breakdown,
    breakdown_frame,
    load,
    read_breakdown_json,
)
from verifyprof.pipeline.report_page import group_regex, median_verify_windows, report
from verifyprof.pipeline.resolve import check, story_group
from verifyprof.pipeline.run import Run, open_run
from verifyprof.trace.events import Trace
from verifyprof.trace.sources import expand, is_breakdown_json

__all__ = [
    "KERNELS_SCHEMA",
    "WHATIF_SCHEMA",
    "Loaded",
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
    "load_input",
    "median_verify_windows",
    "open_run",
    "prepared_of",
    "read_breakdown_json",
    "report",
    "resolve_captures",
    "story_group",
    "whatif",
    "whatif_plain",
    "whatif_run",
]


def whatif(options: WhatifOptions, parallel: ParallelOptions | None = None) -> Ranking:
    """``whatif --from``: the breakdown of ``options.source`` (JSON, trace, capture folder, or
    several trace files by directory or glob) ranked into candidates."""
    if options.source is None:
        raise VerifyprofError("give --from a breakdown JSON or a trace")
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
    options = options or WhatifOptions()
    if isinstance(source, Trace):
        return Run.of_trace(source, options, taxonomy=taxonomy, parts=True).kernels(scope)
    run = open_run([source], options, taxonomy=taxonomy, parts=True, keep_trace=True)
    return run.kernels(scope)


def whatif_plain(options: WhatifOptions) -> dict:
    """``whatif --verify-ms ... --accept-len ...``: plain numbers, no breakdown."""
    return plain_numbers(options)
