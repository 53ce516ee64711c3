"""The map on a Dask cluster (``dask.distributed``, the optional extra ``verifyprof[dist]``).

``scheduler`` is the address of a running scheduler (``tcp://host:port``, checked first:
:mod:`~verifyprof.pipeline.dask_address`), or ``dask`` to start a local cluster (one
single-threaded worker process per file, at most one per CPU, on 127.0.0.1). Workers read the
files themselves, so the paths sent are absolute and must name the same files on every worker (a
shared file system). The client only receives the compact parts.

A task whose worker dies is not retried on the local cluster (``allowed-failures`` 0): the file
is reported as failed and the others' parts kept. An existing cluster keeps its own retry policy.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from verifyprof.attribution.rank_part import RankPart
from verifyprof.contracts.errors import VerifyprofError
from verifyprof.pipeline.dask_address import check_scheduler, scheduler_host_port
from verifyprof.pipeline.map_task import (
    Failure,
    MapOptions,
    MapTask,
    default_workers,
    safe_map,
    task_key,
)

LOCAL = "dask"


def map_dask(
    tasks: list[MapTask], options: MapOptions, scheduler: str
) -> Iterator[tuple[int, RankPart | Failure]]:
    """(index, part or failure) per task, as they finish on the cluster."""
    if scheduler != LOCAL:
        scheduler_host_port(scheduler)  # the address's form first: one line, nothing imported
    try:
        from distributed import as_completed
    except ImportError:
        raise VerifyprofError(
            "--scheduler needs dask.distributed: pip install 'verifyprof[dist]'"
        ) from None
    if scheduler != LOCAL:
        check_scheduler(scheduler)  # one line in seconds, not dask's retries and tracebacks
    with _client(scheduler, len(tasks)) as client:
        futures = {
            client.submit(
                safe_map,
                str(Path(path).resolve()),
                index,
                options,
                share,
                key=task_key(index),
                pure=False,
            ): (index, path)
            for index, path, share in tasks
        }
        try:
            for future in as_completed(futures):
                index, path = futures[future]
                try:
                    yield index, future.result()
                # KilledWorker, lost connection: report the file
                except Exception as exc:
                    yield (
                        index,
                        Failure(str(path), f"worker lost ({type(exc).__name__}: {str(exc)[:200]})"),
                    )
        finally:
            client.cancel(list(futures))


@contextmanager
def environment_kept() -> Iterator[None]:
    """This process's environment as it was, whatever dask did to it meanwhile: a nanny writes its
    pre-spawn variables (``MALLOC_TRIM_THRESHOLD_``, ``OMP_NUM_THREADS=1``, ``PYTHONHASHSEED``) into
    its own process's ``os.environ`` to hand them to the worker it spawns, and never takes them
    back; a caller's process (a notebook) would pass them to every program it starts after."""
    saved = dict(os.environ)
    try:
        yield
    finally:  # only what differs: the environment is never seen empty, nor others' keys undone
        for key in [k for k in os.environ if k not in saved]:
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


@contextmanager
def _client(scheduler: str, n_files: int):
    import dask
    from distributed import Client, LocalCluster

    if scheduler == LOCAL:
        with environment_kept(), dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            cluster = LocalCluster(
                n_workers=default_workers(n_files),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=":0",  # a free port: no 'port 8787 in use' warning
                silence_logs=logging.ERROR,
            )
            try:
                with Client(cluster) as client:
                    yield client
            finally:
                cluster.close()
        return
    try:
        client = Client(scheduler, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise VerifyprofError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        yield client
    finally:
        client.close()
