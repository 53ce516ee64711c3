"""Reading and attributing: trace path(s) -> Trace -> Breakdown (or a breakdown JSON read back
into the frame the model consumes). Several files are mapped in parallel and reduced
(:mod:`verifyprof.pipeline.parallel`)."""

from __future__ import annotations

import json
import sys
import threading
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from verifyprof.attribution.assignment import AttributedSteps
from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.breakdown import breakdown as attribute
from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts import ranges
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing import collector
from verifyprof.contracts.plumbing.inputs import BREAKDOWN_JSON_LIMIT, parse_json, read_bytes
from verifyprof.contracts.schema import BreakdownFrame, frame_from_json
from verifyprof.pipeline.parallel import (
    MapOptions,
    ParallelOptions,
    ShareWithoutSteps,
    breakdown_files,
    rank_files,
)
from verifyprof.pipeline.read_ahead import export_and_shares, one_file
from verifyprof.trace import load_trace
from verifyprof.trace.events import Trace
from verifyprof.trace.nsys.shared_read import read_once
from verifyprof.trace.sources import is_breakdown_json


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
    attributed: AttributedSteps | None = None,
) -> Breakdown:
    """Per step and device, where the wall time went (see :mod:`verifyprof.attribution.breakdown`).

    ``source``: a trace, or file(s), directories and globs; several files are mapped one per
    process (``parallel``: local workers or a Dask scheduler) and reduced into one multi-rank
    breakdown (:mod:`verifyprof.pipeline.parallel`). ``release=True`` drops the trace's event
    tables once read: for one-shot runs such as the CLI. ``attributed``: a trace's attributed
    steps, when a run holds them.
    """
    found: tuple[Path, str | None, Path | None] = (Path(), None, None)
    if parallel is None or parallel.meanwhile is None:
        parallel = replace(parallel or ParallelOptions(), meanwhile=_load_model)
    if not isinstance(source, Trace):
        specs = list(source) if isinstance(source, (list, tuple)) else [source]
        files, notes = rank_files(specs)
        if len(files) > 1 or (parallel is not None and parallel.scheduler):
            options = MapOptions(
                step_regex or ranges.DEFAULT_STEP_REGEX, load_taxonomy(taxonomy), whole_trace
            )
            return breakdown_files(files, options, parallel, notes)
        source = specs[0] if notes and len(specs) == 1 else files[0]  # one file: read as always
        found = one_file(files[0])  # sniffed and its export found once, for both reads below
        export, shares = export_and_shares(found, parallel.workers if parallel else None)
        # a large many-process nsys export: mapped in shares of its processes, like per-rank
        # files
        if shares:
            options = MapOptions(
                step_regex or ranges.DEFAULT_STEP_REGEX, load_taxonomy(taxonomy), whole_trace
            )
            try:
                with read_once(export, shares) if _forks(parallel) else nullcontext():
                    return breakdown_files(
                        [files[0]], options, parallel, notes, shares, read_from=export
                    )
            except ShareWithoutSteps:  # some process has no matching range: read whole, as always
                if parallel is not None and parallel.progress is not None:
                    parallel.progress(0, 0, "")  # no count of the parts any more
    trace = (
        source if isinstance(source, Trace) else load_trace(source, kind=found[1], sqlite=found[2])
    )
    return attribute(
        trace,
        step_regex=step_regex or ranges.DEFAULT_STEP_REGEX,
        taxonomy=load_taxonomy(taxonomy),
        whole_trace=whole_trace,
        release=release,
        attributed=attributed,
    )


def _load_model() -> None:
    """Imported while the map's workers run, where this process would only wait: a run's verdict
    needs the model, the verdicts and the captures' join after the map (~0.1 CPU-s)."""
    with collector.loading():
        import verifyprof.model.decision.whatif  # noqa: F401
        import verifyprof.pipeline.captures  # noqa: F401
        import verifyprof.pipeline.verdicts  # noqa: F401


def _forks(parallel: ParallelOptions | None) -> bool:
    """Whether the map's workers fork from this process (no other thread runs, or the caller's
    pause stops it), and so inherit the big tables read once here (a fork server's do not)."""
    paused = parallel is not None and parallel.pause is not None
    return sys.platform == "linux" and (paused or threading.active_count() == 1)


def kernels(
    source: str | Path | Trace, taxonomy: str | Path | None = None, step_regex: str | None = None
) -> KernelTable:
    """The trace's kernels by total time, with the phase the taxonomy gives each."""
    trace = source if isinstance(source, Trace) else load(source)
    return kernel_table(trace, load_taxonomy(taxonomy), step_regex=step_regex)


def read_breakdown_json(path: Path) -> BreakdownFrame:
    try:
        data = parse_json(
            read_bytes(path, "breakdown JSON", BREAKDOWN_JSON_LIMIT, gunzip=True),
            "breakdown JSON",
            path,
        )
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
    return breakdown(
        source, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace, parallel=parallel
    ).frame()
