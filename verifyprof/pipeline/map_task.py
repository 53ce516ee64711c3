"""One file's map task, wherever it runs (this process, a local worker, a Dask worker): read
and break down one file (or one share of its processes) into its part, a failure named by file.
The map modules import this; :mod:`verifyprof.pipeline.parallel` drives them (no cycle)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verifyprof.contracts.errors import NoStepsError, VerifyprofError
from verifyprof.contracts.plumbing.cpus import usable_cpus
from verifyprof.trace import load_trace
from verifyprof.trace.nsys.export import ProcessFilter

if TYPE_CHECKING:  # the attribution where a file is mapped: default_workers imports no pandas
    # (pipeline/read_ahead.py)
    from verifyprof.attribution.rank_part import RankPart
    from verifyprof.attribution.taxonomy import Taxonomy

STAGE = re.compile(r"-(EXTEND|DECODE)(?=[.-]|$)")


@dataclass(frozen=True)
class Failure:
    path: str
    reason: str
    no_steps: bool = False  # the file has no matching range (an error only if no file has one)


@dataclass(frozen=True)
class MapOptions:
    step_regex: str | None = None  # the default ranges
    taxonomy: Taxonomy | None = None
    whole_trace: bool = False


def stage_of(path: Path | str) -> str:
    """SGLang's per-stage file suffix (``EXTEND`` / ``DECODE``), "" when the name has none."""
    match = STAGE.search(Path(str(path)).name)
    return match.group(1) if match else ""


MapTask = tuple[
    int, Path, ProcessFilter | None
]  # (index, file, share of its processes or None: all)


def map_file(
    path: str, index: int, options: MapOptions, share: ProcessFilter | None = None
) -> RankPart:
    """Read one file (or one share of its processes) and break it down into its part (runs in a
    worker)."""
    from verifyprof.attribution.rank_part import rank_part

    trace = load_trace(path, share)
    return rank_part(
        trace, index, options.step_regex, options.taxonomy, options.whole_trace, stage_of(path)
    )


def safe_map(
    path: str, index: int, options: MapOptions, share: ProcessFilter | None = None
) -> RankPart | Failure:
    """:func:`map_file`, with a failure returned (not raised) so that it names its file."""
    try:
        return map_file(path, index, options, share)
    except NoStepsError as err:
        return Failure(path, err.problem, no_steps=True)
    except VerifyprofError as err:
        return Failure(path, err.problem)
    except MemoryError:
        return Failure(path, "out of memory reading it")
    # a worker reports every failure by file, never dies silently
    except Exception as exc:
        return Failure(path, f"internal error: {type(exc).__name__}: {exc}")


def default_workers(n_files: int) -> int:
    return max(1, min(n_files, usable_cpus()))


def task_key(index: int) -> str:
    return f"verifyprof-map-{index}-{uuid.uuid4().hex[:8]}"


def map_inline(
    tasks: list[MapTask], options: MapOptions
) -> Iterator[tuple[int, RankPart | Failure]]:
    """The map in this process, one file after another (one file's events in memory at a time;
    the allocator as the caller has it, unless ``ParallelOptions.own_process``)."""
    for index, path, share in tasks:
        yield index, safe_map(str(path), index, options, share)
