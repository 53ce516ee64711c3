"""Where each file's events land in the merged trace of a multi-file breakdown: its clock shift,
pid/tid key offset and device offset (:class:`Placement`), the merged step ids, and the files'
step rows moved there. The reduce (:mod:`verifyprof.attribution.reduce`) builds on these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

import numpy as np
import pandas as pd

from verifyprof.attribution.rank_part import RankPart
from verifyprof.trace.events import NO_ID
from verifyprof.trace.kineto.rank_files import device_offsets as kineto_device_offsets

KEY_SHIFT = 32  # the Kineto merge's per-file pid/tid offset


@dataclass(frozen=True)
class Placement:
    """Where one file's events land in the merged trace."""

    shift_ns: int
    key_offset: int
    device_offset: int


def placements(parts: list[RankPart], warnings: list[str]) -> list[Placement]:
    """Clock shift, pid/tid key offset and device offset of every file."""
    bases = [p.base_ns for p in parts if p.base_ns is not None]
    reference = min(bases) if bases else 0
    if len(parts) > 1 and len(bases) < len(parts):
        missing = ", ".join(PurePath(p.path).name for p in parts if p.base_ns is None)
        what = "baseTimeNanoseconds" if parts[0].one_rank_per_file else "session start time"
        warnings.append(f"no {what} in {missing}: assumed on the same clock as the other ranks")
    offsets = device_offsets(parts)
    kineto = parts[0].one_rank_per_file
    return [
        Placement(
            0 if p.base_ns is None else p.base_ns - reference,
            (p.index << KEY_SHIFT) if kineto else 0,
            offsets[i],
        )
        for i, p in enumerate(parts)
    ]


def device_offsets(parts: list[RankPart]) -> list[int]:
    """Renumber devices of later ranks that reuse an id an earlier rank already drives (the
    Kineto merge's rule, one function for both)."""
    return kineto_device_offsets([(p.rank, p.index, p.ordinals) for p in parts])


def moved_keys(values: np.ndarray, offset: int | np.ndarray) -> np.ndarray:
    """pid/tid keys moved by a file's offset (one, or one per row); NO_ID stays NO_ID."""
    values = np.asarray(values, dtype=np.int64)
    if np.isscalar(offset) and offset == 0:
        return values
    return np.where(values == NO_ID, NO_ID, values + offset)


def moved_devices(values: np.ndarray, offset: int | np.ndarray, dtype=np.int64) -> np.ndarray:
    """Device ids moved by a file's offset (one, or one per row); negative ids (none) stay."""
    values = np.asarray(values)
    moved = (
        values
        if np.isscalar(offset) and offset == 0
        else np.where(values < 0, values, values + offset)
    )
    return moved.astype(dtype)


def global_steps(parts: list[RankPart], places: list[Placement]) -> list[np.ndarray]:
    """Per file, its local step ids -> the step ids of all files read as one trace: steps sorted
    by (thread, start) as ``find_steps`` numbers them; whole-trace steps by device."""
    whole = "device" in parts[0].step_keys.columns
    primary, secondary, files, local = [], [], [], []
    for n, (part, place) in enumerate(zip(parts, places)):
        keys = part.step_keys
        if whole:
            primary.append(moved_devices(keys["device"].to_numpy(), place.device_offset))
            secondary.append(np.zeros(len(keys), np.int64))
        else:
            primary.append(moved_keys(keys["tid"].to_numpy(), place.key_offset))
            secondary.append(keys["start"].to_numpy(np.int64) + place.shift_ns)
        files.append(np.full(len(keys), n, np.int64))
        local.append(np.arange(len(keys), dtype=np.int64))
    order = np.lexsort(
        (
            np.concatenate(local),
            np.concatenate(files),
            np.concatenate(secondary),
            np.concatenate(primary),
        )
    )
    number = np.empty(len(order), np.int64)
    number[order] = np.arange(len(order))
    bounds = np.cumsum([0] + [len(p.step_keys) for p in parts])
    return [number[bounds[i] : bounds[i + 1]] for i in range(len(parts))]


def placed_rows(
    parts: list[RankPart], places: list[Placement], mapping: list[np.ndarray]
) -> pd.DataFrame:
    """Every file's step rows on the merged clock, keys, devices and step ids: one concatenation,
    then each column shifted by its file's placement (per row, vectorised; not a copy per file)."""
    rows = pd.concat([p.rows for p in parts], ignore_index=True)
    part = np.repeat(np.arange(len(parts)), [len(p.rows) for p in parts])
    shift = np.array([s.shift_ns for s in places], np.int64)[part]
    key_offset = np.array([s.key_offset for s in places], np.int64)[part]
    device_offset = np.array([s.device_offset for s in places], np.int64)[part]
    first_step = np.cumsum([0] + [len(m) for m in mapping[:-1]])  # where each file's mapping starts
    rows["step"] = np.concatenate(mapping)[first_step[part] + rows["step"].to_numpy(np.int64)]
    for col in ("start_ns", "end_ns"):
        rows[col] = rows[col].to_numpy() + shift
    for col in ("pid", "tid"):
        rows[col] = moved_keys(rows[col].to_numpy(), key_offset)
    rows["device"] = moved_devices(rows["device"].to_numpy(), device_offset)
    return rows
