"""A process that maps file after file keeps the memory one file frees for the next (no fresh
page faults), and the inline map gives it back when it is done. Each case runs in its own Python
process: the allocator's settings are process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from verifyprof.pipeline.heap import _glibc

pytestmark = pytest.mark.skipif(_glibc() is None, reason="the C library is not glibc: its allocator keeps its own policy")

PROBE = """
import json, resource, sys
import numpy as np
from verifyprof.pipeline import heap

def faults_of_a_file():  # what a file's map does to the heap: a 200 MB array, touched, then freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(25_000_000)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

def rss_kb():
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmRSS")).split()[1])

mode = sys.argv[1]
if mode == "worker":
    heap.keep_freed_memory()
    out = {"first": faults_of_a_file(), "second": faults_of_a_file()}
elif mode == "inline":
    with heap.freed_memory_kept():
        out = {"first": faults_of_a_file(), "second": faults_of_a_file()}
        kept = rss_kb()
    out |= {"kept_kb": kept, "after_kb": rss_kb()}
else:
    out = {"first": faults_of_a_file(), "second": faults_of_a_file()}
print(json.dumps(out))
"""


def probe(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60)
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


def test_the_inline_map_gives_the_kept_memory_back_when_it_ends():
    faults = probe("inline")
    assert faults["second"] < faults["first"] / 20
    assert faults["kept_kb"] - faults["after_kb"] > 150_000  # the 200 MB block, kept until the map ends
