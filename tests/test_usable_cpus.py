"""A process confined to some CPUs (taskset, a cpuset) splits its work for those CPUs, not for
every CPU of the machine: the export's read threads and slices, the map's workers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

CONFINABLE = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and two CPUs to confine a process to one",
)

PROBE = """
import os
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one CPU of those given
from verifyprof.pipeline.map_task import default_workers
from verifyprof.trace.nsys.columns import rowid_slices
slices = rowid_slices("CUPTI_ACTIVITY_KIND_KERNEL", "start", "", 1, 1_000_000)
print(len(slices), default_workers(8))
"""


@CONFINABLE
def test_a_process_confined_to_one_cpu_reads_in_two_slices_and_maps_in_this_process():
    assert _confined(PROBE) == ["2", "1"]  # 2 slices a CPU, one worker


QUERIES = """
import os, threading
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from verifyprof.trace.nsys.columns import Query, run_queries
class Seen(Query):
    queries = ["q1", "q2", "q3", "q4"]
    threads = set()
    def run(self, uri, i):
        self.threads.add(threading.get_ident())
run_queries("file:unused", [Seen()])
print(Seen.threads == {threading.get_ident()})
"""


@CONFINABLE
def test_a_process_confined_to_one_cpu_runs_its_queries_on_its_own_thread():
    assert _confined(QUERIES) == ["True"]  # no pool of threads for one CPU


def _confined(probe: str) -> list[str]:
    """What ``probe`` prints, run in a fresh process that confines itself to one CPU."""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()
