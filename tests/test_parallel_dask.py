"""The per-file map on a real dask.distributed cluster (two worker processes on 127.0.0.1),
reduced in the client: the same breakdown as the local pool; failures cost only their file."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from golden_cases import differences
from test_kineto_reader import A100
from test_parallel import as_json, rank_file

from verifyprof import pipeline
from verifyprof.pipeline.dask_map import environment_kept
from verifyprof.pipeline.parallel import Failure, MapOptions, ParallelOptions

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    import dask

    # the nannies' variables (at start, and at a killed worker's restart) stay out of this test
    # process's environment and so out of every later test's children
    with (
        environment_kept(),
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),  # a dead worker fails
    ):
        local = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=":0",  # a free port: two xdist processes never both want 8787
            silence_logs=50,
        )
    with environment_kept():
        yield local
        local.close()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ranks")
    for rank in range(3):
        rank_file(
            A100, folder / f"run-TP-{rank}.trace.json.gz", rank, base_shift_ns=rank * 1_000_000
        )
    return folder


def test_a_dask_cluster_gives_the_local_result(cluster, ranks):
    local = as_json(
        pipeline.breakdown(ranks, step_regex="ProfilerStep", parallel=ParallelOptions(workers=2))
    )
    remote = as_json(
        pipeline.breakdown(
            ranks,
            step_regex="ProfilerStep",
            parallel=ParallelOptions(scheduler=cluster.scheduler_address),
        )
    )
    assert local["summary"]["collectives"]["allreduce"]["devices"] == 3
    assert differences(local, remote) == []


def test_a_corrupt_file_on_the_cluster_is_reported_by_name(cluster, ranks, tmp_path):
    for f in ranks.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "run-TP-3.trace.json.gz").write_bytes(
        (ranks / "run-TP-0.trace.json.gz").read_bytes()[:100_000]
    )
    seen: list[Failure] = []
    result = pipeline.breakdown(
        tmp_path,
        step_regex="ProfilerStep",
        parallel=ParallelOptions(scheduler=cluster.scheduler_address, report=seen.append),
    )
    assert [f.path for f in seen] == [
        str(tmp_path / "run-TP-3.trace.json.gz")
    ] and "truncated gzip" in seen[0].reason
    assert json.loads(json.dumps(result.to_json()))["trace"]["ranks"] == [0, 1, 2]


def test_a_worker_killed_mid_task_costs_only_its_files(cluster, ranks):
    from verifyprof.pipeline.dask_map import map_dask

    client = distributed.Client(cluster)
    pids = client.run(os.getpid)  # worker address -> its process id
    killed: list[str] = []

    def kill_a_busy_worker() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            busy = [address for address, keys in client.processing().items() if keys]
            if busy:
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.01)

    files = sorted(ranks.iterdir())
    watcher = threading.Thread(target=kill_a_busy_worker, daemon=True)
    watcher.start()
    outcomes = dict(
        map_dask(
            [(i, f, None) for i, f in enumerate(files)],
            MapOptions(step_regex="ProfilerStep"),
            cluster.scheduler_address,
        )
    )
    watcher.join(timeout=5)
    client.close()
    failures = [o for o in outcomes.values() if isinstance(o, Failure)]
    assert killed and len(outcomes) == 3
    assert 1 <= len(failures) < 3 and all("worker lost (KilledWorker" in f.reason for f in failures)


def test_a_local_dask_run_leaves_the_callers_environment_as_it_was(ranks, monkeypatch):
    """``scheduler="dask"`` from a notebook: dask's nannies write MALLOC_TRIM_THRESHOLD_,
    OMP_NUM_THREADS=1 and PYTHONHASHSEED into the process that starts them, which would hand
    them to every program the notebook starts after (glibc's malloc without its dynamic
    thresholds, numpy on one thread)."""
    import dask

    # none of them set to begin with (a restarted worker of this module's cluster may have)
    for key in [*dask.config.get("distributed.nanny.pre-spawn-environ"), "PYTHONHASHSEED"]:
        monkeypatch.delenv(key, raising=False)
    before = dict(os.environ)
    result = pipeline.breakdown(
        ranks, step_regex="ProfilerStep", parallel=ParallelOptions(scheduler="dask")
    )
    assert result.summary()["collectives"]["allreduce"]["devices"] == 3
    assert dict(os.environ) == before
