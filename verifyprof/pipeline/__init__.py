"""The one way through the stages: trace path(s) -> Trace -> Breakdown -> what-if.

The CLI, the benchmarks and the notebooks call these functions, so every entry reads, attributes
and models a trace the same way. Each function does one hop and hands the result on; the model
receives a :class:`~verifyprof.contracts.schema.BreakdownFrame` (from a trace or from a breakdown
JSON read back) and never sees a trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.breakdown import breakdown as attribute
from verifyprof.attribution.kernels import KernelTable, kernel_table
from verifyprof.attribution.taxonomy import load_taxonomy
from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.inputs import BREAKDOWN_JSON_LIMIT, read_bytes
from verifyprof.contracts.ranges import DEFAULT_STEP_REGEX
from verifyprof.contracts.schema import BreakdownFrame, frame_from_json
from verifyprof.model.candidates import Ranking
from verifyprof.model.compare import Comparison, check_change
from verifyprof.model.compare import compare as compare_frames
from verifyprof.model.profile import verify_profile
from verifyprof.model.verdict import verdict as verdict_line
from verifyprof.model.whatif import (
    WhatifOptions,
    check_options,
    from_breakdown,
    plain_numbers,
)
from verifyprof.pipeline.parallel import (
    MapOptions,
    ParallelOptions,
    ShareWithoutSteps,
    breakdown_files,
    default_workers,
    rank_files,
)
from verifyprof.trace import load_trace
from verifyprof.trace.events import Trace
from verifyprof.trace.nsys.export import ProcessFilter, readable_database
from verifyprof.trace.shares import process_shares
from verifyprof.trace.sources import NSYS_KINDS, nsys_sqlite, sniff

__all__ = [
    "load",
    "breakdown",
    "ParallelOptions",
    "breakdown_frame",
    "kernels",
    "whatif",
    "whatif_plain",
    "verdict",
    "is_breakdown_json",
    "load_input",
    "compare",
    "whatif_of",
    "report",
]

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
            options = MapOptions(
                step_regex or DEFAULT_STEP_REGEX, load_taxonomy(taxonomy), whole_trace
            )
            return breakdown_files(files, options, parallel, notes)
        source = specs[0] if notes and len(specs) == 1 else files[0]  # one file: read as always
        export, shares = _process_shares(files[0], parallel)
        # a large many-process nsys export: mapped in shares of its processes, like per-rank
        # files
        if shares:
            options = MapOptions(
                step_regex or DEFAULT_STEP_REGEX, load_taxonomy(taxonomy), whole_trace
            )
            try:
                return breakdown_files(
                    [files[0]], options, parallel, notes, shares, read_from=export
                )
            except ShareWithoutSteps:  # some process has no matching range: read whole, as always
                if parallel is not None and parallel.progress is not None:
                    parallel.progress(0, 0, "")  # no count of the parts any more
    trace = source if isinstance(source, Trace) else load(source)
    return attribute(
        trace,
        step_regex=step_regex or DEFAULT_STEP_REGEX,
        taxonomy=load_taxonomy(taxonomy),
        whole_trace=whole_trace,
        release=release,
    )


def _process_shares(
    path: Path, parallel: ParallelOptions | None
) -> tuple[Path | None, list[ProcessFilter] | None]:
    """The SQLite export of an nsys file (``.sqlite``, ``.sqlite.gz``, ``.nsys-rep``) and shares of
    its
    processes, one per local worker; (None, None) for other files or when it is read whole."""
    path = Path(path)
    kind = sniff(path) if path.is_file() else None
    if kind not in NSYS_KINDS:
        return None, None
    workers = (
        parallel.workers if parallel is not None and parallel.workers else default_workers(1 << 30)
    )
    if workers < 2:
        return None, None
    export = readable_database(
        nsys_sqlite(path, kind)
    )  # the same cached copy, export or WAL checkpoint the whole read makes
    return export, process_shares(export, workers)


def kernels(
    source: str | Path | Trace, taxonomy: str | Path | None = None, step_regex: str | None = None
) -> KernelTable:
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
    return bool(_SCHEMA_HEAD.search(head)) or (
        path.suffix == ".json" and b'"steps"' in head and b'"traceEvents"' not in head
    )


def read_breakdown_json(path: Path) -> BreakdownFrame:
    try:
        data = json.loads(read_bytes(path, "breakdown JSON", BREAKDOWN_JSON_LIMIT))
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


def whatif(options: WhatifOptions, parallel: ParallelOptions | None = None) -> Ranking:
    """``whatif --from``: the breakdown of ``options.source`` (JSON, trace, or several trace
    files by directory or glob) ranked into candidates."""
    if options.source is None:
        raise VerifyprofError("give --from a breakdown JSON or a trace")
    check_options(options)  # a bad option fails before a trace is read
    if options.manifest is None and (found := _manifest_beside(options.source)) is not None:
        options.manifest = found
    frame = breakdown_frame(
        options.source, options.step_range, options.whole_trace, parallel=parallel
    )
    return from_breakdown(frame, options)


def verdict(
    result: Breakdown, accept_len: float | None = None, manifest: Path | None = None
) -> str | None:
    """The verdict line under ``breakdown``: the verify step in words and, when an accept length
    is known, the first fix of the plan; None when the breakdown has no verify steps."""
    frame = result.frame()
    try:
        if accept_len is not None or manifest is not None:
            return from_breakdown(
                frame, WhatifOptions(accept_len=accept_len, manifest=manifest)
            ).to_json()["verdict"]
        return verdict_line(verify_profile(frame), None, [], [])
    except NoStepsError:
        return None


def whatif_plain(options: WhatifOptions) -> dict:
    """``whatif --verify-ms ... --accept-len ...``: plain numbers, no breakdown."""
    return plain_numbers(options)


# ---- compare and report (issue 13) ------------------------------------------------------------

VERIFY_KERNELS_REGEX = (  # kernel families: the verify ranges' kernels
    r"^verifyprof\.verify(\s|$)|TARGET_VERIFY"
)


@dataclass
class Loaded:
    """One input of compare/report: its breakdown frame and, for a trace, what only a trace has."""

    frame: BreakdownFrame
    result: Breakdown | None = None  # None for a breakdown JSON
    kernel_table: KernelTable | None = None
    verify_kernels: Any = None  # kernel table (DataFrame) of the verify ranges, for kernel families

    @property
    def trace(self) -> Trace | None:
        return self.result.trace if self.result is not None else None


def load_input(
    source: str | Path,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    whole_trace: bool = False,
) -> Loaded:
    """A breakdown JSON read back, or a trace broken down with its kernel tables (the trace is kept:
    the report's timeline needs it)."""
    path = Path(str(source))
    if is_breakdown_json(path):
        return Loaded(frame=read_breakdown_json(path))
    files, _ = rank_files([source])
    if len(files) > 1 and any(
        sniff(f) in NSYS_KINDS for f in files
    ):  # per-rank nsys files: mapped, no one trace
        result = breakdown(
            [source],
            step_regex=step_regex,
            taxonomy=taxonomy,
            whole_trace=whole_trace,
            release=True,
        )
        return Loaded(frame=result.frame(), result=result)
    trace = load(source)
    result = breakdown(trace, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace)
    rules = load_taxonomy(taxonomy)
    table = kernel_table(trace, rules)
    try:
        verify = kernel_table(trace, rules, step_regex=VERIFY_KERNELS_REGEX).table
    except VerifyprofError:  # no verify ranges or none with kernels: families from the whole trace
        verify = table.table
    return Loaded(frame=result.frame(), result=result, kernel_table=table, verify_kernels=verify)


def _input(
    source: str | Path | Loaded,
    step_regex: str | None,
    taxonomy: str | Path | None,
    whole_trace: bool = False,
) -> Loaded:
    return (
        source
        if isinstance(source, Loaded)
        else load_input(source, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace)
    )


def whatif_of(
    frame: BreakdownFrame, accept_len: float | None = None, manifest: str | Path | None = None
) -> Ranking | None:
    """The what-if of a breakdown when an accept length is known (``accept_len`` or a manifest),
    else None."""
    if accept_len is None and manifest is None:
        return None
    options = WhatifOptions(accept_len=accept_len, manifest=Path(manifest) if manifest else None)
    return from_breakdown(frame, options)


def compare(
    before: str | Path | Loaded,
    after: str | Path | Loaded,
    accept_len: float | None = None,
    manifest: str | Path | None = None,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    whole_trace: bool = False,
) -> Comparison:
    """``verifyprof compare BEFORE AFTER``: the verify steps side by side and, when an accept length
    is known, BEFORE's what-if prediction for the change beside AFTER's measured cycle."""
    b, a = (
        _input(before, step_regex, taxonomy, whole_trace),
        _input(after, step_regex, taxonomy, whole_trace),
    )
    after_step = _decode_step_if_no_verify(a.frame)
    result = compare_frames(b.frame, a.frame, b.verify_kernels, a.verify_kernels, after_step)
    if accept_len is None and manifest is None:
        result.prediction_note = (
            "no accept length: give --accept-len or --manifest for the prediction check"
        )
        return result
    from verifyprof.model.whatif import prepare

    try:
        before_state = prepare(
            b.frame, WhatifOptions(accept_len=accept_len, manifest=_path(manifest))
        )
        after_manifest = _manifest_beside(after)
        after_options = WhatifOptions(
            accept_len=1.0
            if after_step
            else (None if after_manifest else before_state.scenario.accept_len),
            manifest=after_manifest,
            step=after_step,
        )
        after_state = prepare(a.frame, after_options)
    except VerifyprofError as err:
        result.prediction_note = f"no prediction check: {err.problem}"
        return result
    triton = any("triton" in row["family"] for row in result.families.get("appeared", []))
    check_change(result, before_state, after_state, triton_appeared=triton)
    return result


def _path(value: str | Path | None) -> Path | None:
    return Path(value) if value is not None else None


def _manifest_beside(source: Any) -> Path | None:
    """A capture folder's manifest, when the input is one."""
    path = Path(str(source)) if not isinstance(source, Loaded) else None
    found = path / "manifest.json" if path is not None and path.is_dir() else None
    return found if found is not None and found.is_file() else None


def _decode_step_if_no_verify(frame: BreakdownFrame) -> str | None:
    """A run with speculation off has decode steps and no verify: those are what it measured."""
    from verifyprof.contracts.ranges import is_phase

    names = frame.steps["name"].astype(str).unique().tolist()
    if any(is_phase(n, "verify") for n in names):
        return None
    decodes = [n for n in names if is_phase(n, "decode")]
    return decodes[0] if decodes else None


def median_verify_windows(frame: BreakdownFrame, summary: dict[str, Any]) -> list[tuple[int, int]]:
    """The (step, device) windows a report's timeline draws: per rank (or device), the step
    nearest the median wall of the first summary group (the verify steps come first)."""
    from verifyprof.contracts.schema import variant

    groups = summary.get("groups") or []
    if not groups:
        return []
    first = groups[0]
    steps = frame.steps
    rows = steps[(steps["name"] == first["name"]).to_numpy() & (steps["device"] >= 0).to_numpy()]
    rows = (
        rows[[variant(a) == first["variant"] for a in rows["attrs"]]] if first["variant"] else rows
    )
    windows = []
    for _, group in rows.groupby(["rank", "device"], sort=True):  # ranks: a handful
        wall = group["wall_ns"].to_numpy()
        pick = group.iloc[int(abs(wall - float(np.median(wall))).argmin())]
        windows.append((int(pick["step"]), int(pick["device"])))
    return windows[:16]


def report(
    source: str | Path,
    compare_with: str | Path | None = None,
    accept_len: float | None = None,
    manifest: str | Path | None = None,
    step_regex: str | None = None,
    taxonomy: str | Path | None = None,
    top_kernels: int = 40,
    whole_trace: bool = False,
):
    """``verifyprof report``: everything the HTML report shows (a ReportData), from a trace or
    breakdown JSON."""
    from verifyprof.attribution.summary import summarize
    from verifyprof.attribution.timeline import step_timelines
    from verifyprof.contracts import phases as phase_names
    from verifyprof.report.data import ReportData

    loaded = load_input(source, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace)
    frame = loaded.frame
    summary = (
        loaded.result.summary()
        if loaded.result is not None
        else (frame.summary or summarize(frame.steps))
    )
    data = ReportData(
        source=str(source),
        trace=frame.trace,
        phases=list(phase_names.ALL),
        steps=frame.steps,
        summary=summary,
    )
    try:
        ranking = whatif_of(frame, accept_len, manifest)
        data.whatif = ranking.to_json() if ranking is not None else None
        data.whatif_note = (
            ""
            if ranking is not None
            else "no plan: give an accept length (--accept-len A or --manifest M)"
        )
    except VerifyprofError as err:
        data.whatif_note = f"no plan: {err.problem}"
    if (
        loaded.kernel_table is not None and loaded.trace is not None
    ):  # a trace read whole (not per-rank files)
        data.kernels = loaded.kernel_table.to_json(top_kernels)
        windows = median_verify_windows(frame, summary)
        per_window = max(
            400, 4000 // max(len(windows), 1)
        )  # the page stays a few MB with many ranks
        data.timelines = step_timelines(
            loaded.trace,
            loaded.result,
            windows,
            taxonomy=load_taxonomy(taxonomy),
            max_ops=per_window,
        )
    elif loaded.result is not None:
        data.timeline_note = (
            "the timeline and the kernel table need one trace: per-rank nsys files are broken down"
            " rank by rank and keep no events; give one rank's file for its timeline"
        )
    else:
        data.timeline_note = (
            "the timeline and the kernel table need the trace (a breakdown JSON has no kernels):"
            " give the trace"
        )
    if compare_with is not None:
        after = load_input(
            compare_with, step_regex=step_regex, taxonomy=taxonomy, whole_trace=whole_trace
        )
        data.compare = compare(loaded, after, accept_len=accept_len, manifest=manifest).to_json()
    return data
