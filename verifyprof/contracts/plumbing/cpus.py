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
    of its hierarchy that holds it (v2: the unified hierarchy; v1: the one with the ``cpu``
    controller); where no mount holds it (a path outside the cgroup namespace, ``/../x``), the
    mount's own folder alone, as the JVM reads it."""
    mine: dict[str, str] = {}  # hierarchy ("" for v2, else its controllers) -> this cgroup's path
    for line in groups:
        parts = line.split(":", 2)
        if len(parts) == 3:
            path = parts[2] or "/"  # "/../x": outside this cgroup namespace, kept as given
            mine[parts[1]] = path if ".." in path.split("/") else os.path.normpath(path)
    v1 = next((path for names, path in mine.items() if "cpu" in names.split(",")), None)
    folders: list[Path] = []
    for path, kind in ((mine.get(""), "cgroup2"), (v1, "cgroup")):
        if path is None:
            continue
        found = _mounts(mounts, kind)
        holding = [(root, point) for root, point in found if _under(path, root)]
        for root, point in holding:
            folder = point / os.path.relpath(path, root)
            folders.append(folder)
            while folder != point:  # each cgroup above, to the mount
                folder = folder.parent
                folders.append(folder)
        if found and not holding:
            folders.append(found[0][1])
    return folders


def _mounts(mounts: list[str], kind: str) -> list[tuple[str, Path]]:
    """(root, mount point) of each mount of ``kind`` (v1: those with the ``cpu`` controller)."""
    out = []
    for line in mounts:  # id parent dev root point options [tags] - type source super-options
        mount, _, described = line.partition(" - ")
        fields, tail = mount.split(), described.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] != kind:
            continue
        if kind == "cgroup" and "cpu" not in tail[2].split(","):
            continue
        out.append((os.path.normpath(fields[3]), Path(fields[4])))
    return out


def _under(path: str, root: str) -> bool:
    """The cgroup at ``path`` is inside a mount of the hierarchy at ``root``."""
    if ".." in path.split("/"):
        return False
    return root == "/" or path == root or path.startswith(root + "/")


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
