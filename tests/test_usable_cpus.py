"""A process confined to some CPUs (taskset, a cpuset) or to a share of their time (a cgroup's
CPU quota) splits its work for those CPUs, not for every CPU of the machine: the export's read
threads and slices, the map's workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def _confined(probe: str, cgroup: Path | None = None) -> list[str]:
    """What ``probe`` prints, run in a fresh process (that confines itself to one CPU, or that
    joins the cgroup in folder ``cgroup`` before it starts)."""
    join = None if cgroup is None else lambda: (cgroup / "tasks").write_text(str(os.getpid()))
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        preexec_fn=join,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


# ---- a cgroup's CPU quota (docker --cpus, a Kubernetes CPU limit) ------------------------------


def _cpu_cgroup_folder() -> Path | None:
    """This process's cgroup folder of the ``cpu`` controller (v1), where a child cgroup with a
    quota can be made; None where it cannot (no v1 controller, not writable)."""
    from verifyprof.contracts.plumbing.cpus import PROC, _cpu_folders

    try:
        groups = (PROC / "cgroup").read_text().splitlines()
        mounts = (PROC / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    for folder in _cpu_folders(groups, mounts):
        if (folder / "cpu.cfs_quota_us").exists() and os.access(folder, os.W_OK):
            return folder
    return None


CGROUP = _cpu_cgroup_folder()
QUOTA = pytest.mark.skipif(CGROUP is None, reason="needs a writable v1 cpu cgroup")


@pytest.fixture
def cgroup(tmp_path):
    """Make child cgroups of this process's with quotas; each process started in one is reaped
    and the cgroups removed after the test."""
    made: list[Path] = []

    def make(cpus: float, parent: Path | None = None) -> Path:
        folder = (parent or CGROUP) / f"verifyprof-test-{os.getpid()}-{len(made)}"
        folder.mkdir()
        made.append(folder)
        period = int((folder / "cpu.cfs_period_us").read_text())
        if cpus:
            (folder / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
        return folder

    yield make
    for folder in reversed(made):
        folder.rmdir()


SPLIT = """
from verifyprof.contracts.plumbing.cpus import usable_cpus
from verifyprof.pipeline.map_task import default_workers
from verifyprof.trace.nsys.columns import rowid_slices
slices = rowid_slices("CUPTI_ACTIVITY_KIND_KERNEL", "start", "", 1, 1_000_000)
print(usable_cpus(), len(slices), default_workers(8))
"""


@QUOTA
def test_a_process_under_half_a_cpu_of_quota_reads_in_two_slices_and_maps_in_this_process(cgroup):
    assert _confined(SPLIT, cgroup(0.5)) == ["1", "2", "1"]  # half a CPU: one, rounded up


@QUOTA
@CONFINABLE
def test_a_quota_of_one_and_a_half_cpus_is_two(cgroup):
    assert _confined(SPLIT, cgroup(1.5))[0] == "2"


@QUOTA
def test_the_quota_of_a_cgroup_above_this_one_binds_too(cgroup):
    assert _confined(SPLIT, cgroup(0, parent=cgroup(0.5)))[0] == "1"  # no quota of its own


def test_a_cgroup_v2_quota_is_read_from_cpu_max_of_the_tightest_level(tmp_path):
    """/proc/self's files as a container on a cgroup v2 host shows them (the unified hierarchy
    mounted at its own cgroup), the cgroup file system's folders beside them."""
    from verifyprof.contracts.plumbing.cpus import quota_cpus

    mount = tmp_path / "fs"
    (mount / "job" / "step").mkdir(parents=True)
    (mount / "cpu.max").write_text("max 100000\n")  # the container: no limit of its own
    (mount / "job" / "cpu.max").write_text("300000 100000\n")  # 3 CPUs
    (mount / "job" / "step" / "cpu.max").write_text("250000 50000\n")  # 5 CPUs, the looser
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("0::/kubepods/pod1/job/step\n")
    (proc / "mountinfo").write_text(
        "25 30 0:22 / /proc rw,nosuid shared:13 - proc proc rw\n"
        f"28 25 0:26 /kubepods/pod1 {mount} rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    assert quota_cpus(proc) == 3


def _proc(tmp_path: Path, cgroup: str, mounts: list[tuple[str, Path]]) -> Path:
    """/proc/self's cgroup and mountinfo of a cgroup v2 process: its cgroup's path, and each
    unified mount's (root, folder)."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(f"0::{cgroup}\n")
    (proc / "mountinfo").write_text(
        "".join(
            f"{30 + i} 25 0:{26 + i} {root} {point} rw - cgroup2 cgroup2 rw\n"
            for i, (root, point) in enumerate(mounts)
        )
    )
    return proc


def test_a_cgroup_mount_that_does_not_hold_this_process_sets_it_no_quota(tmp_path):
    from verifyprof.contracts.plumbing.cpus import quota_cpus

    host, vm = tmp_path / "host", tmp_path / "vm"
    (host / "user.slice" / "s.scope").mkdir(parents=True)
    vm.mkdir()
    (vm / "cpu.max").write_text("100000 100000\n")  # another machine's cgroup: 1 CPU
    proc = _proc(tmp_path, "/user.slice/s.scope", [("/", host), ("/machine.slice/vm1", vm)])
    assert quota_cpus(proc) is None


def test_a_cgroup_outside_the_namespace_reads_its_mount_alone(tmp_path):
    """With a cgroup namespace, a process moved out of it shows ``/../x``: nothing above the
    mount is read; the mount's own folder is its cgroup as far as it can see."""
    from verifyprof.contracts.plumbing.cpus import quota_cpus

    mount = tmp_path / "fs"
    mount.mkdir()
    (mount / "cpu.max").write_text("200000 100000\n")
    (tmp_path / "cpu.max").write_text("100000 100000\n")  # above the mount: never read
    proc = _proc(tmp_path, "/../../system.slice/x.service", [("/", mount)])
    assert quota_cpus(proc) == 2


def test_no_cgroup_file_system_is_no_quota(tmp_path):
    from verifyprof.contracts.plumbing.cpus import quota_cpus

    assert quota_cpus(tmp_path) is None  # no /proc files there
