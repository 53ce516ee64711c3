"""The CPUs this process may run on: its affinity set (``taskset``, a Slurm or container cpuset),
not every CPU of the machine. A read split into a thread per machine CPU on a 2-CPU share of a
16-CPU host runs 16 threads on 2 CPUs."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
