"""The CPUs this process may use: its affinity set (``taskset``, a Slurm or container cpuset),
not every CPU of the machine, and no more than its cgroup's CPU quota grants (``docker --cpus
2``, a Kubernetes CPU limit: every CPU is in the affinity set, but the process gets 2 CPUs'
time a period). A read split into a thread per machine CPU on a 2-CPU share of a 16-CPU host
runs 16 threads on 2 CPUs; under a quota they also stall, each period, once the quota is spent.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

PROC = Path("/proc/self")


def usable_cpus() -> int:
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    quota = quota_cpus()
    return cpus if quota is None else max(1, min(cpus, quota))


@functools.cache  # a process's cgroup and its quota are its container's: read once
def quota_cpus(proc: Path = PROC) -> int | None:
    """The CPUs' time the cgroup quota grants this process, rounded up (as Go's runtime and
    the JVM round it), the tightest of its cgroup and every cgroup above it up to the mount;
    None without one (no quota, no cgroup file system, not Linux)."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    quotas = [q for folder in _cpu_folders(groups, mounts) if (q := _quota(folder)) is not None]
    return math.ceil(min(quotas)) if quotas else None


def _cpu_folders(groups: list[str], mounts: list[str]) -> list[Path]:
    """The folders of this process's CPU cgroup and of each cgroup above it, inside the mount
    of its hierarchy (v2: the one unified hierarchy; v1: the one with the ``cpu`` controller)."""
    mine: dict[str, str] = {}  # hierarchy ("" for v2, else its controllers) -> this cgroup's path
    for line in groups:
        parts = line.split(":", 2)
        if len(parts) == 3:
            mine[parts[1]] = parts[2]
    v1 = next((path for names, path in mine.items() if "cpu" in names.split(",")), None)
    folders: list[Path] = []
    for line in mounts:  # id parent dev root point options [tags] - type source super-options
        mount, _, kind = line.partition(" - ")
        fields, described = mount.split(), kind.split()
        if len(fields) < 5 or len(described) < 3:
            continue
        if described[0] == "cgroup2" and "" in mine:
            path = mine[""]
        elif described[0] == "cgroup" and v1 is not None and "cpu" in described[2].split(","):
            path = v1
        else:
            continue
        root, point = Path(fields[3]), Path(fields[4])
        inside = Path(path).relative_to(root) if Path(path).is_relative_to(root) else Path()
        folder = point / inside
        folders.append(folder)
        while folder != point and folder.parent != folder:  # each cgroup above, to the mount
            folder = folder.parent
            folders.append(folder)
    return folders


def _quota(folder: Path) -> float | None:
    """CPUs a period the cgroup in ``folder`` grants (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``
    over ``cpu.cfs_period_us``); None: no limit there."""
    try:
        if (folder / "cpu.max").exists():
            quota, period = (folder / "cpu.max").read_text().split()[:2]
        else:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        if quota in ("max", "-1") or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        return None
