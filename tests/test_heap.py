"""A map worker keeps the memory one file frees for the next (no fresh page faults). Each case runs
in its own Python process: the allocator's settings are process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import PUBLIC
from test_parallel import rank_file

from verifyprof.pipeline.heap import _glibc

pytestmark = pytest.mark.skipif(
    _glibc() is None, reason="the C library is not glibc: its allocator keeps its own policy"
)

PROBE = """
import json, resource, sys
import numpy as np
from verifyprof.pipeline import heap

def faults_of_a_file():  # what a file's map does to the heap: a 200 MB array, touched, then freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(25_000_000)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

# 8 MB blocks, as pandas makes: glibc soon keeps them (dynamic threshold)
def faults_of_small_blocks():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        block = np.ones(1_000_000)
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

mode = sys.argv[1]
if mode == "worker":
    heap.keep_freed_memory()
    out = {"first": faults_of_a_file(), "second": faults_of_a_file()}
elif mode == "after-inline-map":
    # the caller's own process maps several files (--workers 1, a notebook)
    from verifyprof import pipeline
    pipeline.breakdown(
        [sys.argv[2]], whole_trace=True, parallel=pipeline.ParallelOptions(workers=1)
    )
    out = {"small": faults_of_small_blocks()}
elif mode == "after-cli-map":  # the CLI's own process, which ends with the run, maps them itself
    from verifyprof import pipeline
    pipeline.breakdown(
        [sys.argv[2]],
        whole_trace=True,
        parallel=pipeline.ParallelOptions(workers=1, own_process=True),
    )
    out = {"first": faults_of_a_file(), "second": faults_of_a_file()}
elif mode == "untouched":
    out = {"small": faults_of_small_blocks()}
else:
    out = {"first": faults_of_a_file(), "second": faults_of_a_file()}
print(json.dumps(out))
"""


def probe(mode: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# 200 MB is 100 faults in 2 MiB transparent huge pages, ~49k in 4 KiB pages: at least 100 either way
FIRST_TOUCH = 100


def test_by_default_every_file_faults_its_memory_in_afresh():
    faults = probe("default")
    assert faults["first"] >= FIRST_TOUCH
    assert faults["second"] > faults["first"] / 2  # given back, taken again


def test_a_worker_serves_the_next_file_from_the_memory_the_last_one_freed():
    faults = probe("worker")
    assert faults["first"] >= FIRST_TOUCH
    assert faults["second"] < faults["first"] / 20


def test_a_map_in_the_callers_own_process_leaves_its_allocator_as_it_was(tmp_path):
    source = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
    for rank in (0, 1):  # two real rank files, mapped one after another in the probe's own process
        rank_file(
            source, tmp_path / f"run-TP-{rank}.trace.json.gz", rank, base_shift_ns=rank * 1_000_000
        )
    after = probe("after-inline-map", str(tmp_path))["small"]
    untouched = probe("untouched")["small"]
    # a mallopt call (even one "restoring" 128 KiB) ends glibc's dynamic threshold for good: every
    # 8 MB block would then be mapped and faulted afresh (~2k faults each, 200k for the 100)
    assert after <= 2 * untouched + 500, (after, untouched)


def test_the_clis_own_process_mapping_several_files_keeps_freed_memory_as_a_worker_does(tmp_path):
    source = PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz"
    for rank in (0, 1):
        rank_file(
            source, tmp_path / f"run-TP-{rank}.trace.json.gz", rank, base_shift_ns=rank * 1_000_000
        )
    faults = probe("after-cli-map", str(tmp_path))
    assert faults["second"] < max(faults["first"] / 20, 10)
