"""Many trace files (one per rank, stage or node) -> one breakdown: map per file, reduce once.

Each file is read and broken down on its own (:func:`map_file`: a worker holds one file's events
at a time, so memory is bounded per file) into a compact
:class:`~verifyprof.attribution.rank_part.RankPart`;
the parent reduces the parts into the breakdown of all files read as one trace, collectives
matched across ranks (:mod:`verifyprof.attribution.reduce`). The map runs in this process
(``workers=1``), in a local pool of processes (one per file, ``workers`` at a time), or on a Dask
cluster (``scheduler``: ``tcp://host:port`` of a running scheduler, or ``dask`` for a local
cluster), the engine Nsight Systems' multi-node recipes use. On a cluster the files must be
where the workers can read them (a shared path).

A file that fails, or whose worker dies, is reported by name (``Breakdown.extra["failed_files"]``
and a trace warning) and the others' results are kept; ``strict`` raises instead.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.rank_part import RankPart
from verifyprof.attribution.reduce import reduce_parts
from verifyprof.contracts.errors import NoStepsError, TraceError, VerifyprofError
from verifyprof.contracts.plumbing.outputs import cleanup_on_signals
from verifyprof.pipeline.heap import keep_freed_memory
from verifyprof.pipeline.map_task import (
    Failure,
    MapOptions,
    MapTask,
    default_workers,
)
from verifyprof.trace.kineto.rank_files import without_merged
from verifyprof.trace.nsys.export import ProcessFilter
from verifyprof.trace.sources import expand


class ShareWithoutSteps(Exception):
    """A share of one file's processes has no matching range: the file is read whole instead
    (the shares' parts would leave that share's processes, devices and op counts out)."""


@dataclass(frozen=True)
class ParallelOptions:
    """How to map: ``workers`` local processes (default: one per file, at most one per CPU), or
    a Dask ``scheduler``; ``strict``: a failed file is an error, not a warning; ``report`` is
    told of each failed file as it fails (the CLI prints a warning line). ``own_process``: the
    caller's process ends with the run (the CLI), so the one-worker map may keep freed memory for
    the next file as a worker process does (:mod:`~verifyprof.pipeline.heap`); a library caller's
    allocator is left alone. ``pause``: a context in which the caller runs no other thread (the
    CLI's status line waits), so that local workers are forked from this process with everything
    imported; without it, a process running threads starts them from a fork server (~0.5 s).
    ``progress`` is told (done, total, "files") as each file is mapped ("parts": shares of one
    file's processes; (0, 0, "") when they are given up for a whole read). ``report`` is told
    each file skipped once the others made a breakdown (every file failed: one error instead)."""

    workers: int | None = None
    scheduler: str | None = None
    strict: bool = False
    report: Callable[[Failure], None] | None = None
    # this process exists for this run (the CLI): with one worker, it maps as a worker
    # does
    own_process: bool = False
    pause: Callable[[], AbstractContextManager[None]] | None = None
    progress: Callable[[int, int, str], None] | None = None
    # work this process does once its local workers have started, while it would only wait for
    # them (the imports the run needs after the map)
    meanwhile: Callable[[], None] | None = None


def rank_files(specs: list[str | Path]) -> tuple[list[Path], list[str]]:
    """Files named by paths, directories (their trace files) and globs, in order, each once;
    SGLang's ``merged-*`` file dropped beside its rank files (as the Kineto reader does)."""
    files: list[Path] = []
    for spec in specs:
        listed = expand(spec)  # a directory: its per-rank files, or a capture folder's one trace
        files += [f for f in listed if f not in files]
    return without_merged(files)


def breakdown_files(
    files: list[Path],
    options: MapOptions,
    parallel: ParallelOptions | None = None,
    warnings: list[str] | None = None,
    shares: list[ProcessFilter] | None = None,
    read_from: Path | None = None,
) -> Breakdown:
    """Map every file, reduce to one breakdown; failed files become warnings (or, strict, an error).
    With ``shares``, the one file is mapped once per share of its processes instead, read from its
    SQLite export ``read_from`` (a decompressed or exported copy; the results name the file)."""
    parallel = parallel or ParallelOptions()
    if shares:
        files = [files[0]] * len(shares)
    tasks: list[MapTask] = [
        (i, read_from or path if shares else path, shares[i] if shares else None)
        for i, path in enumerate(files)
    ]
    with cleanup_on_signals():  # SIGTERM / SIGHUP: the workers are stopped before this process ends
        outcomes = _outcomes(tasks, options, parallel)
        try:
            parts, failures = _collect(outcomes, files, parallel, bool(shares))
        finally:
            outcomes.close()  # stops the workers still running (strict, a failed share, a signal)
    failures.sort(key=lambda f: f[0])
    if not parts:  # one error naming every file, no 'skipped' warning before it
        first = failures[0][1]
        error = NoStepsError if all(f.no_steps for _, f in failures) else TraceError
        raise error(first.reason + _others(failures), first.path)
    for _, failure in failures:  # skipped only now that another file made a breakdown
        if parallel.report is not None:
            parallel.report(failure)
    notes = list(warnings or []) + [f"skipped {Path(f.path).name}: {f.reason}" for _, f in failures]
    result = reduce_parts(parts, notes, one_file=bool(shares))
    if shares:
        result.trace.source = [str(files[0])]  # one file, read in shares
        result.extra["process_shares"] = len(shares)
    result.extra["failed_files"] = [f for _, f in failures]
    return result


def _others(failures: list[tuple[int, Failure]]) -> str:
    """The files after the first when every file failed: named, with their problem where it is
    not the first's."""
    first, rest = failures[0][1], [f for _, f in failures[1:]]
    if not rest:
        return ""
    names = [Path(f.path).name for f in rest[:4]] + (["..."] if len(rest) > 4 else [])
    if all(f.reason == first.reason for f in rest):
        return f" (so does {', '.join(names)}: every file failed)"
    return f" (and {len(rest)} more files failed: {', '.join(names)})"


def _outcomes(
    tasks: list[MapTask], options: MapOptions, parallel: ParallelOptions
) -> Generator[tuple[int, RankPart | Failure], None, None]:
    if parallel.scheduler:
        from verifyprof.pipeline.dask_map import map_dask

        return map_dask(tasks, options, parallel.scheduler)
    from verifyprof.pipeline.local_map import map_local

    workers = parallel.workers or default_workers(len(tasks))
    if parallel.own_process and workers <= 1 and len(tasks) > 1:
        keep_freed_memory()
    return map_local(tasks, options, workers, parallel.pause, parallel.meanwhile)


def _collect(
    outcomes: Iterator[tuple[int, RankPart | Failure]],
    files: list[Path],
    parallel: ParallelOptions,
    shares: bool,
) -> tuple[list[RankPart], list[tuple[int, Failure]]]:
    """The parts, and the failures by index, as the map gives them; a failure that must stop the
    map (strict, a share) raises."""
    parts: list[RankPart] = []
    failures: list[tuple[int, Failure]] = []
    for index, outcome in outcomes:
        if parallel.progress is not None:
            parallel.progress(
                len(parts) + len(failures) + 1, len(files), "parts" if shares else "files"
            )
        if isinstance(outcome, Failure):
            if shares and outcome.no_steps:
                # its processes, devices and counts would be missing: read the file whole
                raise ShareWithoutSteps(outcome.reason)
            if parallel.strict or shares:  # a share that fails is the one file failing
                raise VerifyprofError(outcome.reason, files[index])
            failures.append((index, outcome))
        else:
            outcome.path = str(files[index])  # as the user spelled it (workers may get it absolute)
            parts.append(outcome)
    return parts, failures
