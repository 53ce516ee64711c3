"""Split a multi-rank nsys SQLite export into one export per rank, as a capture that runs nsys
per rank (or per node) writes them: the same schema, each file holding one GPU process's rows.

Per table: rows of the rank's process (``globalPid``, or the process bits of ``globalTid``);
``TARGET_INFO_GPU`` / ``TARGET_INFO_CUDA_DEVICE`` of its GPUs / process; everything else
(``StringIds``, enums, metadata, the session start) whole. NVTX domain registrations (event type
75) go to every file: every process registers its own domains.

    python bench/split_nsys_ranks.py EXPORT.sqlite OUT_DIR     # -> OUT_DIR/rank-<r>.sqlite
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from pathlib import Path

NVTX_DOMAIN_CREATE = 75
PID_MASK = ~((1 << 24) - 1)  # globalTid -> its process's globalPid (hardware, vm and pid bits)


def gpu_processes(con: sqlite3.Connection) -> list[tuple[int, list[int]]]:
    """(globalPid, its device ids) of every process that ran kernels, ordered by first device."""
    rows = con.execute(
        "SELECT globalPid, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1, 2"
    ).fetchall()
    devices: dict[int, list[int]] = {}
    for gpid, device in rows:
        devices.setdefault(int(gpid), []).append(int(device))
    return sorted(devices.items(), key=lambda item: min(item[1]))


def _filter(table: str, columns: set[str], gpid: int, devices: list[int]) -> tuple[str, tuple]:
    """WHERE clause (and parameters) selecting one process's rows of ``table``."""
    if "globalPid" in columns:
        return "globalPid = ? OR globalPid IS NULL", (gpid,)
    if "globalTid" in columns:
        extra = f" OR eventType = {NVTX_DOMAIN_CREATE}" if table == "NVTX_EVENTS" else ""
        return f"(globalTid & {PID_MASK}) = ? OR globalTid IS NULL{extra}", (gpid,)
    if table == "TARGET_INFO_GPU" and "id" in columns:
        return f"id IN ({','.join('?' * len(devices))})", tuple(devices)
    if table.startswith("TARGET_INFO") and "pid" in columns:
        return "pid = ?", ((gpid >> 24) & 0xFFFFFF,)
    return "1", ()


def split(export: Path, out_dir: Path) -> list[Path]:
    """Write ``out_dir/rank-<r>.sqlite`` per GPU process of ``export`` (atomically); return them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    schema = src.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL"
    ).fetchall()
    columns = {
        name: {row[1] for row in src.execute(f'PRAGMA table_info("{name}")')} for name, _ in schema
    }
    processes = gpu_processes(src)
    src.close()
    written = []
    for rank, (gpid, devices) in enumerate(processes):
        path = out_dir / f"rank-{rank}.sqlite"
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.unlink(missing_ok=True)
        con = sqlite3.connect(f"file:{tmp}?mode=rwc", uri=True)
        con.execute("ATTACH DATABASE ? AS src", (f"file:{export.resolve()}?mode=ro",))
        for name, sql in schema:
            con.execute(sql)
            where, params = _filter(name, columns[name], gpid, devices)
            con.execute(
                f'INSERT INTO main."{name}" SELECT * FROM src."{name}" WHERE {where}', params
            )
        con.commit()
        con.execute("DETACH DATABASE src")
        con.close()
        os.replace(tmp, path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    for path in split(args.export, args.out_dir):
        print(path)


if __name__ == "__main__":
    main()
