"""Which Kineto files to read and what each one is: rank, world size, clock base, device numbering.

* **rank**: ``distributedInfo.rank``, else ``-TP-(\\d+)`` in the file name (SGLang's
  ``{id}-TP-{r}[-DP-..][-PP-..][-EP-..][-EXTEND|-DECODE].trace.json.gz``), else -1.
* **one clock**: a file's ``ts`` count from its ``baseTimeNanoseconds``; each file is shifted by
  ``base - min(base)`` (:func:`align_clocks`).
* **keys**: pid and tid become ``raw + (file_index << 32)`` (file 0 keeps the raw ids).
* **devices**: later ranks that reuse an ordinal an earlier rank drives are renumbered after it
  (:func:`assign_device_offsets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import NO_ID, TIME_LIMIT_NS
from verifyprof.trace.formats import KINETO_SUFFIXES
from verifyprof.trace.kineto.decode import decode_file
from verifyprof.trace.kineto.file_events import FileEvents, extract
from verifyprof.trace.path_checks import is_directory, list_directory

RANK_IN_NAME = re.compile(r"-TP-(\d+)")


FILE_KEY_SHIFT = 32
MAX_RUN_NS = 86_400 * 10**9  # rank files of one run lie within a day of each other


@dataclass
class RankFile:
    """One file's events plus what the merge derives for it."""

    index: int
    path: Path
    events: FileEvents
    header: dict[str, Any]
    rank: int
    world_size: int
    base_ns: int | None
    shift_ns: int = 0
    device_offset: int = 0

    @property
    def key_offset(self) -> int:
        return self.index << FILE_KEY_SHIFT

    def key(self, raw: np.ndarray) -> np.ndarray:
        """Raw pid/tid -> trace-wide key (missing stays -1)."""
        if self.index == 0:
            return raw
        return np.where(raw == NO_ID, NO_ID, raw + self.key_offset)

    def ordinals(self) -> np.ndarray:
        e = self.events
        devices = np.concatenate(
            [
                e.kernels.columns["device"],
                e.copies.columns["device"],
                e.gpu_annotations.columns["device"],
            ]
        )
        return np.unique(devices[devices != NO_ID])

    def gpu_span(self) -> tuple[int, int] | None:
        """(first start, last end) of the file's GPU work on the trace clock; None without any."""
        e = self.events
        starts = [t.columns["start"] for t in (e.kernels, e.copies, e.gpu_annotations) if len(t)]
        if not starts:
            return None
        ends = [t.columns["end"] for t in (e.kernels, e.copies, e.gpu_annotations) if len(t)]
        return (
            min(int(s.min()) for s in starts) + self.shift_ns,
            max(int(x.max()) for x in ends) + self.shift_ns,
        )


SMALL = 1 << 31  # ranks, world sizes, device ids and properties are int32 columns


def int_or_none(value: Any, bound: int | None = SMALL) -> int | None:
    """A header number as an int; None where it is not one, or (``bound``) does not fit the
    column it goes into (a world size of 1e30 is no world size)."""
    if isinstance(value, bool):
        return None
    number = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value)
    if number is None or (bound is not None and not -bound < number < bound):
        return None
    return number


def _rank_of(path: Path, header: dict[str, Any]) -> tuple[int, int]:
    """(rank, world_size), -1 where unknown."""
    info = header.get("distributedInfo")
    rank = world = None
    if isinstance(info, dict):
        rank = int_or_none(info.get("rank"))
        world = int_or_none(info.get("world_size"))
    if rank is None:
        match = RANK_IN_NAME.search(path.name)
        rank = int(match.group(1)) if match else None
    return (NO_ID if rank is None else rank), (NO_ID if world is None else world)


def trace_files_in(directory: Path) -> list[Path]:
    """The PyTorch-profiler trace files in ``directory`` (sorted; TraceError when there are
    none)."""
    paths = sorted(
        p for p in list_directory(directory) if p.name.endswith(KINETO_SUFFIXES) and p.is_file()
    )
    if not paths:
        raise TraceError(
            "directory holds no PyTorch-profiler trace files (*.json, *.json.gz)", directory
        )
    return paths


def trace_files(paths: list[Path] | Path | str) -> tuple[list[Path], list[str]]:
    """Files to read: directories expanded, SGLang's merged file dropped beside its rank files."""
    if isinstance(paths, (str, Path)):
        paths = [Path(paths)]
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        for file in trace_files_in(path) if is_directory(path) else [path]:
            if file not in files:
                files.append(file)
    if not files:
        raise TraceError("no PyTorch-profiler trace files given")
    return without_merged(files)


def without_merged(files: list[Path]) -> tuple[list[Path], list[str]]:
    """SGLang's ``merged-*`` file dropped beside the per-rank files it merges (and the warning
    saying so): every reader of several files drops it here."""
    merged = [f for f in files if f.name.startswith("merged-")]
    if not merged or len(merged) == len(files):
        return files, []
    names = ", ".join(f.name for f in merged)
    kept = [f for f in files if f not in merged]
    return kept, [f"skipped {names}: SGLang's merge of the per-rank files also given"]


def load_file(index: int, path: Path, fast: bool) -> RankFile:
    decoded = decode_file(path, fast=fast)
    events = extract(decoded)
    rank, world = _rank_of(path, decoded.header)
    base = int_or_none(decoded.header.get("baseTimeNanoseconds"), bound=None)
    if base is not None and not -TIME_LIMIT_NS < base < TIME_LIMIT_NS:
        raise TraceError(
            f"baseTimeNanoseconds {decoded.header['baseTimeNanoseconds']!r:.40} is not a time (it"
            " lies beyond 2^62 ns, 146 years from the epoch): a corrupt or edited header",
            path,
        )
    return RankFile(index, path, events, decoded.header, rank, world, base)


def align_clocks(files: list[RankFile], warnings: list[str]) -> int:
    """Shift each file onto the earliest file's clock; returns that file's base (epoch ns)."""
    bases = [f.base_ns for f in files if f.base_ns is not None]
    reference = min(bases) if bases else 0
    for f in files:
        f.shift_ns = 0 if f.base_ns is None else f.base_ns - reference
    if len(files) > 1 and len(bases) < len(files):
        missing = ", ".join(f.path.name for f in files if f.base_ns is None)
        warnings.append(
            f"no baseTimeNanoseconds in {missing}: assumed on the same clock as the other ranks"
        )
    return reference


def check_one_run(files: list[RankFile]) -> None:
    """Refuse rank files that cannot be one run's (see :func:`check_run_entries`)."""
    check_run_entries([(f.path, f.rank, f.world_size, f.gpu_span()) for f in files])


def check_run_entries(entries: list[tuple[object, int, int, tuple[int, int] | None]]) -> None:
    """Per file (path, rank, world size, GPU span on one clock): refuse files that cannot be one
    run's: world sizes that disagree, one rank whose GPU work appears twice at the same time (a
    copy, or two captures), clocks days apart. A rank may own several files that follow each
    other (SGLang's per-stage EXTEND/DECODE files). Also the multi-file reduce's check."""
    sized = [e for e in entries if e[2] > 0]
    for e in sized[1:]:
        if e[2] != sized[0][2]:
            raise TraceError(
                f"says world size {sized[0][2]}, {e[0]} says {e[2]}: traces of different runs; "
                "give one run's rank files",
                sized[0][0],
            )
    spans = [(e, e[3]) for e in entries if e[3] is not None]
    for i, (a, sa) in enumerate(spans):
        for b, sb in spans[i + 1 :]:
            if a[1] >= 0 and a[1] == b[1] and sa[0] < sb[1] and sb[0] < sa[1]:
                raise TraceError(
                    f"claims rank {a[1]}, as does {b[0]}, and their GPU work overlaps in time: one"
                    " rank captured twice, or one file given twice; give one capture's rank files",
                    a[0],
                )
    for e, (start, end) in spans:  # one file alone: no run is that long
        if end - start > MAX_RUN_NS:
            raise TraceError(
                f"corrupt timestamps: its GPU work spans {(end - start) / 86_400e9:.1f} days"
                " (one event's ts or dur is far off the others); not a trace as captured",
                e[0],
            )
    if spans:
        first = min(spans, key=lambda es: es[1][0])
        last = max(spans, key=lambda es: es[1][1])
        if last[1][1] - first[1][0] > MAX_RUN_NS:
            days = (last[1][1] - first[1][0]) / 86_400e9
            raise TraceError(
                f"and {last[0][0]} were captured {days:.1f} days apart: not one run's rank files",
                first[0][0],
            )


def assign_device_offsets(files: list[RankFile]) -> None:
    """Renumber devices of later ranks that reuse an ordinal an earlier rank already drives."""
    for f, offset in zip(files, device_offsets([(f.rank, f.index, f.ordinals()) for f in files])):
        f.device_offset = offset


def device_offsets(ranks: list[tuple[int, int, np.ndarray]]) -> list[int]:
    """Per (rank, file index, device ordinals), the offset that renumbers a later rank's devices
    when an earlier rank already drives an ordinal: one offset per rank, so a rank's files share
    its devices. Also the multi-file reduce's rule (attribution.reduce)."""
    owner_of_device: dict[int, object] = {}
    offset_of_owner: dict[object, int] = {}
    offsets = [0] * len(ranks)
    for i in sorted(range(len(ranks)), key=lambda i: (ranks[i][0] < 0, ranks[i][0], ranks[i][1])):
        rank, index, ordinals = ranks[i]
        owner: object = rank if rank >= 0 else ("file", index)
        if owner in offset_of_owner:
            offset = offset_of_owner[owner]
        elif any(owner_of_device.get(int(d), owner) != owner for d in ordinals):
            offset = max(owner_of_device) + 1 - int(ordinals.min())
        else:
            offset = 0
        offset_of_owner[owner] = offset
        offsets[i] = offset
        for d in ordinals:
            owner_of_device[int(d) + offset] = owner
    return offsets
