"""The one way through the stages: trace path(s) -> Trace -> Breakdown -> what-if.

The CLI, the benchmarks and the notebooks call these functions, so every entry reads, attributes
and models a trace the same way. Each function does one hop and hands the result on; the model
receives a :class:`~verifyprof.contracts.schema.BreakdownFrame` (from a trace or from a breakdown
JSON read back) and never sees a trace.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.breakdown import breakdown as attribute
from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX
from verifyprof.contracts.schema import BreakdownFrame, frame_from_json
from verifyprof.model.candidates import Ranking
from verifyprof.model.profile import verify_profile
from verifyprof.model.verdict import verdict as verdict_line
from verifyprof.model.whatif import (
    WhatifOptions,
    check_options,
    from_breakdown,
    plain_numbers,
)
from verifyprof.pipeline.parallel import MapOptions, ParallelOptions, breakdown_files, rank_files
from verifyprof.trace import load_trace
from verifyprof.trace.events import Trace

__all__ = ["load", "breakdown", "ParallelOptions", "breakdown_frame", "kernels", "whatif", "whatif_plain", "verdict", "is_breakdown_json"]

_SCHEMA_HEAD = re.compile(rb'"schema"\s*:\s*"verifyprof\.breakdown/')


def load(source: str | Path) -> Trace:
    """A trace file, directory or glob read into the event model."""
    return load_trace(source)


def breakdown(
    source: str | Path | Trace | list[str | Path],
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    whole_trace: bool = False,
    release: bool = False,
    parallel: ParallelOptions | None = None,
) -> Breakdown:
    """Per step and device, where the wall time went (see :mod:`verifyprof.attribution.breakdown`).

    ``source``: a trace, or file(s), directories and globs; several files are mapped one per
    process (``parallel``: local workers or a Dask scheduler) and reduced into one multi-rank
    breakdown (:mod:`verifyprof.pipeline.parallel`). ``release=True`` drops the trace's event
    tables once read: for one-shot runs such as the CLI.
    """
    if not isinstance(source, Trace):
        specs = list(source) if isinstance(source, (list, tuple)) else [source]
        files, notes = rank_files(specs)
        if len(files) > 1 or (parallel is not None and parallel.scheduler):
            options = MapOptions(step_regex or DEFAULT_STEP_REGEX, load_taxonomy(taxonomy), whole_trace)
            return breakdown_files(files, options, parallel, notes)
        source = specs[0] if notes and len(specs) == 1 else files[0]  # one file: read as always
    trace = source if isinstance(source, Trace) else load(source)
    return attribute(trace, step_regex=step_regex or DEFAULT_STEP_REGEX, taxonomy=load_taxonomy(taxonomy),
                     whole_trace=whole_trace, release=release)


def kernels(source: str | Path | Trace, taxonomy: str | Path | None = None, step_regex: str | None = None) -> KernelTable:
    """The trace's kernels by total time, with the phase the taxonomy gives each."""
    trace = source if isinstance(source, Trace) else load(source)
    return kernel_table(trace, load_taxonomy(taxonomy), step_regex=step_regex)


def is_breakdown_json(path: Path) -> bool:
    """Whether ``path`` is a ``breakdown --json`` document rather than a trace."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        head = handle.read(4096)
    if head.startswith(b"\x1f\x8b"):
        return False  # gzipped JSON is a Kineto trace; breakdowns are written plain
    return bool(_SCHEMA_HEAD.search(head)) or (path.suffix == ".json" and b'"steps"' in head and b'"traceEvents"' not in head)


def read_breakdown_json(path: Path) -> BreakdownFrame:
    try:
        data = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise VerifyprofError(f"not valid JSON: {exc}", path) from None
    except OSError as exc:
        raise VerifyprofError(f"cannot read: {exc.strerror}", path) from None
    return frame_from_json(data, path)


def breakdown_frame(
    source: str | Path | Breakdown,
    step_regex: str | None = None,
    whole_trace: bool = False,
    taxonomy: str | Path | None = None,
    parallel: ParallelOptions | None = None,
) -> BreakdownFrame:
    """What the model consumes, from a breakdown JSON, a trace, or a breakdown already made."""
    if isinstance(source, Breakdown):
        return source.frame()
    path = Path(str(source))
    if is_breakdown_json(path):
        return read_breakdown_json(path)
    return breakdown(source, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace, parallel=parallel).frame()


def whatif(options: WhatifOptions, parallel: ParallelOptions | None = None) -> Ranking:
    """``whatif --from``: the breakdown of ``options.source`` (JSON, trace, or several trace
    files by directory or glob) ranked into candidates."""
    if options.source is None:
        raise VerifyprofError("give --from a breakdown JSON or a trace")
    check_options(options)  # a bad option fails before a trace is read
    frame = breakdown_frame(options.source, options.step_range, options.whole_trace, parallel=parallel)
    return from_breakdown(frame, options)


def verdict(result: Breakdown, accept_len: float | None = None, manifest: Path | None = None) -> str | None:
    """The verdict line under ``breakdown``: the verify step in words and, when an accept length
    is known, the first fix of the plan; None when the breakdown has no verify steps."""
    frame = result.frame()
    try:
        if accept_len is not None or manifest is not None:
            return from_breakdown(frame, WhatifOptions(accept_len=accept_len, manifest=manifest)).to_json()["verdict"]
        return verdict_line(verify_profile(frame), None, [], [])
    except NoStepsError:
        return None


def whatif_plain(options: WhatifOptions) -> dict:
    """``whatif --verify-ms ... --accept-len ...``: plain numbers, no breakdown."""
    return plain_numbers(options)
