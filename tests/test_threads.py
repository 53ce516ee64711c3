"""An iterable produced in a thread ahead of its consumer (the breakdown JSON's steps, encoded
while the summary is summed): every item in order, the producer's error where it happened, and
no thread left behind however the consumer leaves, and no thread at all on one CPU."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading

import pytest
from conftest import REPO

from verifyprof.contracts.plumbing.threads import ahead

NAME = "verifyprof-test-ahead"


def _alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == NAME]


def test_ahead_yields_every_item_in_order_each_made_in_its_own_thread():
    made_in = []

    def items():
        for n in range(50):
            made_in.append(threading.current_thread().name)
            yield n

    with ahead(items(), 4, NAME) as got:
        assert list(got) == list(range(50))
    assert set(made_in) == {NAME}
    assert not _alive()


def test_ahead_raises_the_producers_error_after_the_items_made_before_it():
    def items():
        yield from (0, 1)
        raise ValueError("row 2 cannot be encoded")

    seen = []
    with pytest.raises(ValueError, match="row 2 cannot be encoded"), ahead(items(), 4, NAME) as got:
        seen.extend(got)
    assert seen == [0, 1]
    assert not _alive()


def test_leaving_ahead_early_stops_its_thread_within_its_depth():
    made = itertools.count()

    def endless():
        while True:
            yield next(made)

    with ahead(endless(), 3, NAME) as got:
        assert [next(got), next(got)] == [0, 1]
    assert not _alive()
    assert next(made) <= 2 + 3 + 2  # taken, held, and the one it was on when told


def test_an_error_in_the_block_stops_the_thread_and_is_the_one_raised():
    def endless():
        yield from itertools.count()

    with pytest.raises(KeyError, match="summary"), ahead(endless(), 2, NAME):
        raise KeyError("summary")
    assert not _alive()


def test_leaving_ahead_early_closes_the_generator_it_was_given():
    closed = threading.Event()

    def endless():
        try:
            yield from itertools.count()
        finally:
            closed.set()  # a generator's own cleanup

    source = endless()  # still referenced here: only an explicit close runs its cleanup
    with ahead(source, 2, NAME) as got:
        next(got)
    assert closed.is_set() and not _alive()


ONE_CPU = """
import os, threading
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from verifyprof.contracts.plumbing.threads import ahead
made_in = []
def items():
    for n in range(3):
        made_in.append(threading.current_thread().name)
        yield n
with ahead(items(), 4, "verifyprof-test-ahead") as got:
    print(list(got), set(made_in))
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and two CPUs to confine a process to one",
)
def test_with_one_usable_cpu_ahead_iterates_in_the_consumers_thread():
    done = subprocess.run(
        [sys.executable, "-c", ONE_CPU], capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip() == "[0, 1, 2] {'MainThread'}", done.stderr
