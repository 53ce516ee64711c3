"""The reduce side of a multi-file breakdown: per-file :class:`RankPart` s -> one
:class:`Breakdown`.

The result is the breakdown of all files read as one trace (what ``read_kineto`` of a rank
directory gives), rebuilt from the parts by the merge's own rules:

* **one clock**: each file shifted by its clock base (Kineto ``baseTimeNanoseconds``, nsys session
  start) minus the earliest file's;
* **keys**: Kineto pid/tid become ``raw + (file index << 32)``, as the Kineto merge does (nsys
  keys are already global: ``globalPid`` / ``globalTid``);
* **devices**: a later rank that reuses a device id an earlier rank drives is renumbered after
  it (several nodes); a rank's files (SGLang's per-stage files) share its devices;
* **steps** numbered as one trace numbers them (by thread, then start), **ranks** from the files,
  or for nsys inferred over all files' processes (each drives one distinct device);
* **collectives** matched across the files' devices, per stage (SGLang's ``-EXTEND`` and
  ``-DECODE`` files are separate captures: their calls are never matched with each other).
"""

from __future__ import annotations

import re
from pathlib import PurePath

import numpy as np
import pandas as pd

from verifyprof.attribution.breakdown import Breakdown
from verifyprof.attribution.collective_waits import (
    busbw_factor,
    collective_calls,
    step_collectives,
    summarize_kernels,
)
from verifyprof.attribution.placement import (
    Placement,
    global_steps,
    moved_devices,
    moved_keys,
    placed_rows,
    placements,
)
from verifyprof.attribution.rank_part import KERNEL_FIELDS, RankPart
from verifyprof.contracts.errors import TraceError
from verifyprof.trace import integrity
from verifyprof.trace.events import NO_ID, StringTable, Trace
from verifyprof.trace.kineto.rank_files import check_run_entries

SUMMED_META = ("files", "events", "python_function_events", "graph_trace_rows")
_COUNTED = re.compile(r"(\d+) (.+)")
_OF_COUNTED = re.compile(r"(\d+) of (\d+) (.+)")  # "3 of 1000 rows of kernels dropped: ..."


def reduce_parts(
    parts: list[RankPart], warnings: list[str] | None = None, one_file: bool = False
) -> Breakdown:
    """One multi-rank breakdown from the files' parts (any order); ``warnings`` go first. With
    ``one_file`` the parts are shares of one file's processes: one clock, one set of devices
    (processes of different shares may drive the same GPU), never separate runs."""
    if not parts:
        raise TraceError("no trace file could be read")
    parts = sorted(parts, key=lambda p: p.index)
    formats = {p.format for p in parts}
    if len(formats) > 1:
        raise TraceError(
            f"files of different formats ({', '.join(sorted(formats))}) cannot be one trace",
            parts[0].path,
        )
    notes = list(warnings or [])
    if parts[0].one_rank_per_file:
        check_run_entries([(p.path, p.rank, p.world_size, _gpu_span(p)) for p in parts])
    elif not one_file:
        _check_not_twice(parts)
        _check_concurrent(parts)
    places = [Placement(0, 0, 0) for _ in parts] if one_file else placements(parts, notes)
    notes += [] if one_file else shared_gpus(parts, places)
    mapping = global_steps(parts, places)
    processes = merged_processes(parts, places)
    rows = placed_rows(parts, places, mapping)
    rows["rank"] = _row_ranks(rows, processes)
    rows = rows.sort_values(["step", "device"], kind="stable").reset_index(drop=True)
    problems = integrity.merged(
        [p.extra.get("integrity", []) for p in parts],
        rows_read=[p.extra.get("rows_read", {}) for p in parts],
    )
    trace = Trace(
        source=[p.path for p in parts],
        format=parts[0].format,
        strings=StringTable(),
        devices=merged_devices(parts, places),
        processes=processes,
        meta=merged_meta(parts, places),
        warnings=merged_warnings(parts, notes, problems),
        integrity=problems,
    )
    result = Breakdown(
        trace=trace,
        steps=rows,
        options=parts[0].options,
        linked_ops=sum(p.linked_ops for p in parts),
        unlinked_ops=sum(p.unlinked_ops for p in parts),
        integrity=problems,
    )
    kernels = merged_collective_kernels(parts, places, mapping, trace.meta.get("world_size"))
    if kernels is not None:
        result.collective_kernels = summarize_kernels(
            kernels[["op", *KERNEL_FIELDS[1:], "group_size", "busbw_factor"]]
        )
        calls = matched_calls(kernels)
        if calls is not None:
            levels = [kernels[c].to_numpy() for c in kernels.columns if c.startswith("step_")]
            result.collectives = step_collectives(calls, levels, rows)
    return result


def _check_not_twice(parts: list[RankPart]) -> None:
    """Two nsys files of the same session start, processes and row counts are one capture given
    twice (a copy), never two ranks (ranks on other nodes may reuse a pid, not a session start)."""
    seen: dict[tuple, str] = {}
    for part in parts:
        key = (part.base_ns, tuple(np.sort(part.driver_pids)), tuple(sorted(part.counts.items())))
        if part.base_ns is not None and key in seen:
            raise TraceError(
                f"is the same capture as {seen[key]} (same session start, processes and rows): one"
                " file given twice, not two ranks; give each rank's file once",
                part.path,
            )
        seen.setdefault(key, part.path)


def _check_concurrent(parts: list[RankPart]) -> None:
    """nsys files of one run (one per rank or node) ran at the same time; files whose GPU work
    shares no instant are separate runs, never one multi-rank trace."""
    spans = [(p, s) for p in parts if p.base_ns is not None and (s := _gpu_span(p)) is not None]
    if len(spans) < 2:
        return
    latest = max(spans, key=lambda ps: ps[1][0])
    earliest_end = min(spans, key=lambda ps: ps[1][1])
    if latest[1][0] >= earliest_end[1][1]:
        raise TraceError(
            f"this file and {latest[0].path} ran at different times (their GPU work shares no"
            " instant): separate runs, not one run's ranks; give one run's files (verifyprof"
            " compare A B sets two runs side by side)",
            earliest_end[0].path,
        )


def _gpu_span(part: RankPart) -> tuple[int, int] | None:
    """The file's step windows on the epoch clock (its own clock where it does not say)."""
    rows = part.rows[part.rows["device"] >= 0]
    if rows.empty:
        return None
    base = part.base_ns or 0
    return int(rows["start_ns"].min()) + base, int(rows["end_ns"].max()) + base


def shared_gpus(parts: list[RankPart], places: list[Placement]) -> list[str]:
    """A warning per physical GPU (nsys UUID) that files drive as different devices: processes
    sharing one GPU, captured apart, not two nodes. Each file's trace shows the GPU idle while it
    ran the other's work, so that time reads as host wait."""
    seen: dict[str, dict[int, str]] = {}  # uuid -> merged device -> a file driving it
    for part, place in zip(parts, places):
        driven = set(part.ordinals.tolist())
        for device, uuid in part.extra.get("gpu_uuids", {}).items():
            if device in driven:
                seen.setdefault(uuid, {}).setdefault(
                    int(device) + place.device_offset, PurePath(part.path).name
                )
    return [
        f"{', '.join(sorted(set(files.values())))} ran on one GPU (UUID {uuid}), read as devices"
        f" {sorted(files)}: each file's time waiting behind the others' work on it reads as host"
        " wait"
        for uuid, files in seen.items()
        if len(files) > 1
    ]


def merged_processes(parts: list[RankPart], places: list[Placement]) -> pd.DataFrame:
    """Every file's processes on the merged keys; nsys ranks inferred over all of them."""
    frames = []
    for part, place in zip(parts, places):
        frame = part.processes.copy()
        frame["pid"] = moved_keys(frame["pid"].to_numpy(), place.key_offset)
        frame["device"] = moved_devices(frame["device"].to_numpy(), place.device_offset, np.int32)
        frames.append(frame)
    processes = pd.concat(frames, ignore_index=True)
    if not parts[0].one_rank_per_file:
        drivers = np.isin(
            processes["pid"].to_numpy(), np.concatenate([p.driver_pids for p in parts])
        )
        device = processes["device"].to_numpy()
        # ranks only where unambiguous over all files
        rank = np.full(len(processes), NO_ID, dtype=np.int32)
        if (
            drivers.sum() > 1
            and (device[drivers] >= 0).all()
            and len(np.unique(device[drivers])) == drivers.sum()
        ):
            # the nsys reader's rule, over all files
            rank[drivers] = np.argsort(np.argsort(device[drivers]))
        processes["rank"] = rank
    return processes


def _row_ranks(rows: pd.DataFrame, processes: pd.DataFrame) -> np.ndarray:
    """Rank of each row: by the process that drives its device, else by the step's process."""
    known = processes[processes["rank"].to_numpy() >= 0]
    by_device = (
        known[known["device"].to_numpy() >= 0].drop_duplicates("device").set_index("device")["rank"]
    )
    by_pid = known.drop_duplicates("pid").set_index("pid")["rank"]
    device = rows["device"].to_numpy()
    ranks = by_device.reindex(device).to_numpy(dtype=float)
    from_pid = by_pid.reindex(rows["pid"].to_numpy()).to_numpy(dtype=float)
    ranks = np.where(np.isnan(ranks), from_pid, ranks)
    ranks = np.nan_to_num(ranks, nan=NO_ID).astype(np.int64)
    return np.where(device < 0, NO_ID, ranks)  # steps that launched nothing have no rank


def merged_devices(parts: list[RankPart], places: list[Placement]) -> pd.DataFrame:
    frames = []
    for part, place in zip(parts, places):
        frame = part.devices.copy()
        frame["device"] = moved_devices(frame["device"].to_numpy(), place.device_offset, np.int32)
        frames.append(frame)
    devices = pd.concat(frames, ignore_index=True).drop_duplicates("device", keep="first")
    return devices.sort_values("device", kind="stable").reset_index(drop=True)


def merged_meta(parts: list[RankPart], places: list[Placement]) -> dict:
    """Scalar metadata of all files: counts summed, clocks from the earliest, the rest where all
    agree."""
    keys = list(dict.fromkeys(k for p in parts for k in p.meta))
    meta: dict = {}
    for key in keys:
        values = [p.meta[key] for p in parts if key in p.meta]
        shifted = [
            p.meta[key] + s.shift_ns
            for p, s in zip(parts, places)
            if isinstance(p.meta.get(key), int)
        ]
        if key in SUMMED_META:
            meta[key] = sum(values)
        elif key in ("base_time_ns", "capture_start_utc_ns"):
            bases = [p.base_ns for p in parts if p.base_ns is not None]
            meta[key] = min(bases) if bases else values[0]
        elif key == "world_size":
            sizes = [v for v in values if isinstance(v, int) and v > 0]
            meta[key] = max(sizes) if sizes else NO_ID
        elif key in ("capture_start_ns", "capture_end_ns") and shifted:
            meta[key] = min(shifted) if key == "capture_start_ns" else max(shifted)
        elif all(v == values[0] for v in values):
            meta[key] = values[0]
    meta["released_counts"] = {k: sum(p.counts[k] for p in parts) for k in parts[0].counts}
    return meta


def merged_warnings(
    parts: list[RankPart], leading: list[str], problems: list[integrity.Problem] | None = None
) -> list[str]:
    """``leading``, then each file's warnings once; ``N <what>`` and ``N of M <what>`` warnings
    summed over files (the shares of one export count its rows once, not once per share); the
    files' integrity lines give way to those of the merged ``problems``."""
    totals: dict[str, list[int] | None] = {}
    for part in parts:
        own = {p.message() for p in part.extra.get("integrity", [])}
        for warning in (w for w in part.warnings if w not in own):
            match = _OF_COUNTED.fullmatch(warning) or _COUNTED.fullmatch(warning)
            if not match:
                totals.setdefault(warning, None)
                continue
            *numbers, key = match.groups()
            key = key if len(numbers) == 1 else f"of {key}"
            counts = totals.get(key) or [0] * len(numbers)
            totals[key] = [a + int(b) for a, b in zip(counts, numbers)]
    return (
        list(leading)
        + [_counted(k, n) for k, n in totals.items()]
        + [p.message() for p in problems or []]
    )


def _counted(key: str, numbers: list[int] | None) -> str:
    if numbers is None:
        return key
    if len(numbers) == 1:
        return f"{numbers[0]} {key}"
    return f"{numbers[0]} of {numbers[1]} {key.removeprefix('of ')}"


def merged_collective_kernels(
    parts: list[RankPart], places: list[Placement], mapping: list[np.ndarray], world
) -> pd.DataFrame | None:
    """All files' collective kernels on the merged clock, devices and step ids, in the merged
    trace's kernel order, with the communicator size (args, else the world, else the devices)."""
    frames = []
    for n, (part, place) in enumerate(zip(parts, places)):
        if part.collectives is None or part.collectives.empty:
            continue
        frame = part.collectives.copy()
        frame["start"] += place.shift_ns
        frame["end"] += place.shift_ns
        frame["device"] = moved_devices(
            frame["device"].to_numpy(), place.device_offset, frame["device"].dtype
        )
        for col in [c for c in frame.columns if c.startswith("step_")]:
            local = frame[col].to_numpy()
            frame[col] = np.where(local >= 0, mapping[n][np.maximum(local, 0)], NO_ID)
        frame["stage"] = part.stage
        frames.append(frame)
    if not frames:
        return None
    kernels = pd.concat(frames, ignore_index=True)
    kernels = kernels.iloc[np.argsort(kernels["start"].to_numpy(), kind="stable")].reset_index(
        drop=True
    )
    for col in [c for c in kernels.columns if c.startswith("step_")]:
        # files with fewer nesting levels
        kernels[col] = kernels[col].fillna(NO_ID).astype(np.int64)
    kernels["op"] = np.arange(len(kernels), dtype=np.int64)
    group = kernels.pop("group").to_numpy()
    fallback = world if isinstance(world, int) and world >= 2 else int(kernels["device"].nunique())
    n = np.where(group >= 2, group, fallback)
    kernels["group_size"] = n.astype(np.int32)
    code, families = pd.factorize(kernels["family"])  # hashed once, not compared per family
    factor = np.full(len(kernels), np.nan, dtype=np.float32)
    for c, fam in enumerate(families):
        mine = code == c
        factor[mine] = busbw_factor(str(fam), n[mine])
    kernels["busbw_factor"] = factor
    return kernels


def matched_calls(kernels: pd.DataFrame) -> pd.DataFrame | None:
    """Calls matched across devices, within each stage; call numbers (``seq``) kept distinct."""
    columns = ["op", *KERNEL_FIELDS[1:], "group_size", "busbw_factor"]
    found = []
    next_seq: dict[str, int] = {}
    for _, group in kernels.groupby("stage", sort=True):
        table = group[columns].reset_index(drop=True)
        calls = collective_calls(None, None, table)  # type: ignore[arg-type]
        if calls is None:
            continue
        if next_seq:
            # a later stage: its calls numbered after the earlier stages' (dict lookup, vectorised)
            base = calls["family"].map(next_seq).fillna(0).to_numpy(np.int64)
            calls["seq"] = calls["seq"].to_numpy() + base
        for family, top in calls.groupby("family")["seq"].max().items():
            next_seq[family] = int(top) + 1
        found.append(calls)
    if not found:
        return None
    return found[0] if len(found) == 1 else pd.concat(found, ignore_index=True)
