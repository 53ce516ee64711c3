"""One nsys export read in shares of its processes, so that a many-rank file is mapped like
many per-rank files: each worker reads and breaks down only its processes' rows (bounded memory,
one core each), and the reduce matches collectives across the shares as across files.

The shares partition the export's rows: every share but the last names its processes; the last
takes every other process and the rows that name none, so no row is lost or read twice.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from verifyprof.trace.nsys.columns import readonly_uri
from verifyprof.trace.nsys.export import KERNEL, ProcessFilter

SAMPLE_ROWS = 4096  # kernel rows looked at to find the GPU processes, their devices and weights
SHARE_MIN_KERNELS = (
    200_000  # smaller exports are read whole: a share's process costs more than it saves
)


def process_shares(
    path: Path, shares: int, min_kernels: int | None = None
) -> list[ProcessFilter] | None:
    """Up to ``shares`` filters splitting the export's GPU processes by their kernel counts (a
    sample of rows spread over the table), or None when the export is small, holds one GPU
    process, or cannot be sampled (it is then read whole, as always)."""
    if shares < 2:
        return None
    min_kernels = SHARE_MIN_KERNELS if min_kernels is None else min_kernels
    try:
        con = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            lo = con.execute(f'SELECT min(rowid) FROM "{KERNEL}"').fetchone()[0]
            hi = con.execute(f'SELECT max(rowid) FROM "{KERNEL}"').fetchone()[0]
            if lo is None or hi - lo + 1 < min_kernels:
                return None
            step = max(1, (hi - lo + 1) // SAMPLE_ROWS)
            rowids = ",".join(str(r) for r in range(lo, hi + 1, step))
            sample = con.execute(
                f'SELECT globalPid, deviceId, count(*) FROM "{KERNEL}" WHERE rowid IN ({rowids})'
                " GROUP BY 1, 2"
            ).fetchall()
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError):  # a garbled schema: the whole read names it
        return None
    weights = _units(sample)
    if len(weights) < 2:
        return None
    groups: list[list[int]] = [[] for _ in range(min(shares, len(weights)))]
    load = [0] * len(groups)
    for n, gpids in weights:  # heaviest first, each onto the lightest share
        lightest = load.index(min(load))
        groups[lightest] += gpids
        load[lightest] += n
    named = [tuple(sorted(g)) for g in groups[:-1]]
    return [ProcessFilter(g) for g in named] + [
        ProcessFilter(tuple(sorted(p for g in named for p in g)), rest=True)
    ]


def _units(sample: list[tuple]) -> list[tuple[int, list[int]]]:
    """(sampled rows, globalPids) of each set of processes that must share a share, heaviest first:
    processes keyed as the filters compare them (``globalPid >> 24``), and processes that drive one
    GPU together (a device's busy time is only right with all its work in one share)."""
    parent: dict[object, object] = {}

    def root(x: object) -> object:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    rows: dict[int, int] = {}
    pid_of: dict[int, int] = {}
    for gpid, device, n in sample:
        if not isinstance(gpid, int):
            continue
        key = gpid >> 24
        pid_of.setdefault(key, gpid)
        rows[key] = rows.get(key, 0) + int(n)
        parent[root(("process", key))] = root(("device", device))
    units: dict[object, tuple[int, list[int]]] = {}
    for key, n in rows.items():
        total, gpids = units.get(root(("process", key)), (0, []))
        units[root(("process", key))] = (total + n, [*gpids, pid_of[key]])
    return sorted(units.values(), key=lambda u: (-u[0], u[1]))
