"""The one way through the stages: trace path(s) -> Trace -> Breakdown -> what-if.

The CLI, the benchmarks and the notebooks call these functions, so every entry reads, attributes
and models a trace the same way; every command resolves its inputs once, in
:mod:`verifyprof.pipeline.resolve`. The model receives a
:class:`~verifyprof.contracts.schema.BreakdownFrame` (from a trace or from a breakdown JSON read
back) and never sees a trace.
"""

from __future__ import annotations

from pathlib import Path

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.model.decision.candidates import Ranking
from verifyprof.model.decision.whatif import WhatifOptions, plain_numbers
from verifyprof.pipeline.before_after import Loaded, compare, load_input
from verifyprof.pipeline.captures import resolve_captures, whatif_captures
from verifyprof.pipeline.parallel import ParallelOptions
from verifyprof.pipeline.reading import (
    breakdown,
    breakdown_frame,
    kernels,
    load,
    read_breakdown_json,
)
from verifyprof.pipeline.report_page import group_regex, median_verify_windows, report
from verifyprof.pipeline.story import story_group
from verifyprof.trace.sources import is_breakdown_json

__all__ = [
    "Loaded",
    "ParallelOptions",
    "breakdown",
    "breakdown_frame",
    "compare",
    "group_regex",
    "is_breakdown_json",
    "kernels",
    "load",
    "load_input",
    "median_verify_windows",
    "read_breakdown_json",
    "report",
    "resolve_captures",
    "story_group",
    "verdict",
    "whatif",
    "whatif_captures",
    "whatif_plain",
]


def whatif(options: WhatifOptions, parallel: ParallelOptions | None = None) -> Ranking:
    """``whatif --from``: the breakdown of ``options.source`` (JSON, trace, capture folder, or
    several trace files by directory or glob) ranked into candidates."""
    from verifyprof.pipeline.resolve import ranking_of, resolve_sources

    if options.source is None:
        raise VerifyprofError("give --from a breakdown JSON or a trace")
    resolved = resolve_sources([options.source], options, parallel=parallel)
    ranking = ranking_of(resolved)
    if ranking is None:
        raise VerifyprofError("; ".join(resolved.reasons) or "no plan", options.source)
    return ranking


def verdict(
    result: Breakdown, accept_len: float | None = None, manifest: Path | None = None
) -> str | None:
    """The verdict line of a breakdown (the plan's with an accept length); None when it has no
    verify steps."""
    from verifyprof.pipeline.resolve import resolve_frame, verdict_text

    options = WhatifOptions(accept_len=accept_len, manifest=manifest)
    try:
        return verdict_text(resolve_frame(result.frame(), [], options, result))
    except NoStepsError:
        return None


def whatif_plain(options: WhatifOptions) -> dict:
    """``whatif --verify-ms ... --accept-len ...``: plain numbers, no breakdown."""
    return plain_numbers(options)
