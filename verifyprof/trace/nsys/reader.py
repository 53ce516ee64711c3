"""Nsight Systems SQLite export -> :class:`Trace`: the entry point, which reads every table in
order.

Speed: an export has no indexes, and a real capture has millions of kernel and runtime rows.
Rows are read column-wise (:mod:`verifyprof.trace.nsys.columns`: ADBC into numpy, no Python
tuples), large tables in rowid slices on parallel connections, all in one parallel fetch, and
joined in numpy. The parts, each in its own module:

* :mod:`~verifyprof.trace.nsys.export`: the read-only export, its schema and metadata,
``StringIds``.
* :mod:`~verifyprof.trace.nsys.activity`: ``kernels``, ``copies``, ``graphs``, ``api``.
* :mod:`~verifyprof.trace.nsys.nvtx_ranges`: NVTX ``ranges`` (domains, payloads, nesting depth).
* :mod:`~verifyprof.trace.nsys.processes`: ``devices``, ``processes`` and ranks.
* :mod:`~verifyprof.trace.nsys.shared_read`: a share's kernel and API rows taken from one read
  of the export made for all its shares (when the map's process made one).
* :mod:`~verifyprof.trace.nsys.nccl_payloads`: ``collective_args`` from NCCL's NVTX payloads (only
exports
  made with ``--include-blobs=true`` hold them; a warning says when the schemas are there but the
  values are not).

Trace string ids are interned in the order the tables are built here (kernels, copies, api,
ranges, process names, collectives), so that order is part of the output.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.events import StringTable, Trace
from verifyprof.trace.integrity import Problem
from verifyprof.trace.nsys.activity import (
    api_candidates,
    api_table,
    copies_table,
    copy_query,
    correlation_key,
    graph_query,
    graph_warnings,
    graphs_table,
    kernels_table,
)
from verifyprof.trace.nsys.columns import NotNumeric, TableQuery, release_free_memory
from verifyprof.trace.nsys.export import (
    GRAPH_TRACE,
    MEMCPY,
    MEMSET,
    NVTX,
    NsysExport,
    NsysStrings,
    ProcessFilter,
    one_line,
    schema_warnings,
)
from verifyprof.trace.nsys.nccl_payloads import nccl_collective_args
from verifyprof.trace.nsys.nvtx_ranges import nvtx_query, ranges_table
from verifyprof.trace.nsys.processes import devices_table, gpu_uuids, processes_table
from verifyprof.trace.nsys.shared_read import API, KERNELS, big_jobs, take_share
from verifyprof.trace.validation import checked

__all__ = ["FORMAT", "read_nsys_sqlite"]

FORMAT = "nsys-sqlite"


def read_nsys_sqlite(path: Path, processes: ProcessFilter | None = None) -> Trace:
    """Read an nsys SQLite export (never modifying it) into the event model; with
    ``processes``, only those processes' events (one share of a per-process map)."""
    path = Path(path)
    try:
        with NsysExport(path, processes) as export:
            trace = _read(export)
    except NotNumeric as exc:  # text in a column of numbers (a timestamp, an id)
        raise TraceError(f"{exc}: not an export as nsys writes it", path) from None
    release_free_memory()
    return trace


def _read(export: NsysExport) -> Trace:
    export.check_is_export()
    strings = StringTable()
    names = NsysStrings(export, strings)
    warnings: list[str] = []
    meta = export.meta()
    warnings += schema_warnings(meta["nsys_schema_version"])

    api_names = api_candidates(export)
    shared = take_share(export)  # this share's kernel and API rows, read once for every share
    big = big_jobs(export, api_names) if shared is None else {}
    copy_jobs = {t: TableQuery(copy_query(export, t), t) for t in (MEMCPY, MEMSET)}
    graph_job = TableQuery(graph_query(export), GRAPH_TRACE)
    nvtx_job = TableQuery(nvtx_query(export), NVTX)
    export.fetch([*big.values(), *copy_jobs.values(), graph_job, nvtx_job])
    rows = shared or {name: job.rows() for name, job in big.items()}

    kernels, problems = kernels_table(rows[KERNELS], names, export)
    copies = copies_table({t: job.rows() for t, job in copy_jobs.items()}, strings)
    graphs = graphs_table(graph_job.rows())
    if not (len(kernels) or len(copies) or len(graphs)):
        raise TraceError(
            "empty capture: no GPU activity (kernels, memcpy, memset) recorded; capture with nsys"
            " profile --trace=cuda",
            export.path,
        )
    gpu_keys = np.concatenate(
        [correlation_key(t["pid"], t["correlation"]) for t in (kernels, copies, graphs)]
    )
    api = api_table(rows[API], api_names, strings, gpu_keys)
    ranges, nvtx_warnings, nvtx_problems = ranges_table(nvtx_job.rows(), names, strings)
    problems += nvtx_problems
    warnings += nvtx_warnings + [p.message() for p in problems]
    warnings += graph_warnings(kernels, graphs)
    devices = devices_table(export, kernels, copies, graphs)
    meta["gpu_uuids"] = gpu_uuids(export)
    processes = processes_table(export, names, kernels, copies, graphs, api, ranges)
    meta["graph_trace_rows"] = len(graphs)
    if names.not_utf8:  # the string table's, as the ranges' own texts are counted
        first = names.not_utf8[0]
        problems.append(
            Problem("invalid_utf8", "strings", len(names.not_utf8), 0, f"{names.text(first)!r}")
        )
        warnings.append(problems[-1].message())
    optional = {}
    try:
        collective_args, nccl_warnings = nccl_collective_args(
            export.con, export.uri, export.tables, kernels, api, ranges, strings, export.processes
        )
    except (
        sqlite3.DatabaseError,
        UnicodeDecodeError,
    ) as exc:  # the payload tables are read with plain queries
        raise TraceError(f"corrupt NVTX payload tables ({one_line(exc)})", export.path) from None
    warnings += nccl_warnings
    if collective_args is not None:
        optional["collective_args"] = collective_args
    return checked(
        Trace(
            source=[export.path],
            format=FORMAT,
            strings=strings,
            kernels=kernels,
            copies=copies,
            graphs=graphs,
            api=api,
            ranges=ranges,
            devices=devices,
            processes=processes,
            meta=meta,
            warnings=warnings,
            integrity=problems,
            **optional,
        )
    )
