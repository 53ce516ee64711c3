"""NCCL message sizes from an nsys export: NCCL's NVTX ranges and their extended payloads.

NCCL (2.17+) opens an NVTX range per API call (``ncclAllReduce``, ``ncclSend``, ``ncclGroupEnd``,
...) in its own domain and attaches a typed payload: the communicator id and ``Message size
[bytes]`` (older NCCL: ``Bytes``), described by ``NVTX_PAYLOAD_SCHEMAS`` /
``NVTX_PAYLOAD_SCHEMA_ENTRIES``; communicator-init ranges carry ``No. of ranks``.

What exports hold: the schema tables are written whenever NCCL registered them, but the payload
values (``NVTX_EVENTS.binaryData``) only when the report was exported with
``nsys export --type sqlite --include-blobs=true``. The public 2-GPU exports we have
(nsys 2026.2, ``EXPORT_PARAM_INCLUDE_BLOBS=false``) carry the schemas and no values: their
collective sizes are unknown, and the reader says so in a warning.

Blob layout (as nsys-ai decodes nsys 2026.2 exports; checked against real blobs of nsys 2025.3.1
and NCCL 2.28.9 in tests/data/nccl_payloads): a 32-byte header (domain id and schema id in its
first two 8-byte words), then the payload, whose fields sit at the schema entries' ``offset``
(NULL = 0).

Join to kernels: a collective's kernel is launched inside its API range on the same thread, so a
payload range that encloses the launch call gives its size. Inside ``ncclGroupStart`` /
``ncclGroupEnd`` (send/recv, all-to-all, coalesced calls) the kernel is launched in
``ncclGroupEnd``: it takes the payload ranges between the group's last ``ncclGroupStart`` and
that ``ncclGroupEnd`` (send/recv: bytes sent in, bytes received out). Kernels replayed from a
CUDA graph have no API range at replay: their size stays unknown. The join:
:mod:`~verifyprof.trace.nsys.nccl_join`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.trace.events import NO_ID, StringTable
from verifyprof.trace.nsys.activity import correlation_key
from verifyprof.trace.nsys.columns import Rows, TableQuery, run_queries
from verifyprof.trace.nsys.export import ProcessFilter
from verifyprof.trace.nsys.nccl_join import join_sizes
from verifyprof.trace.nsys.nvtx_ranges import NVTX_PUSHPOP, NVTX_STARTEND

HEADER_BYTES = 32
SIZE_FIELDS = ("Message size [bytes]", "Bytes")
COMM_FIELD = "NCCL communicator ID"
RANKS_FIELD = "No. of ranks"
NVTX_RANGE_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND)
MISSING_BLOBS_WARNING = (
    "NCCL's NVTX payloads (message sizes) are not in this export: collective bytes and bus"
    " bandwidth unknown; export the report with `nsys export --type sqlite --include-blobs=true`"
)


@dataclass
class _Schema:
    size_offset: int  # -1: no message size
    comm_offset: int  # -1: no communicator id
    ranks_offset: int  # -1: no rank count
    payload_size: int


def nccl_collective_args(
    con: sqlite3.Connection,
    uri: str,
    tables: set[str],
    kernels: pd.DataFrame,
    api: pd.DataFrame,
    ranges: pd.DataFrame,
    strings: StringTable,
    processes: ProcessFilter | None = None,
) -> tuple[pd.DataFrame | None, list[str]]:
    """``collective_args`` for the NCCL kernels whose size the export records, plus warnings;
    with ``processes``, only those processes' payload ranges are read (one share's)."""
    payloads, warnings = nccl_payload_ranges(con, uri, tables, processes)
    if payloads is None:
        return None, warnings
    launches = _nccl_launches(kernels, api, strings)
    if launches is None:
        return None, []
    groups = _group_ranges(ranges, strings)
    table = join_sizes(launches, payloads, groups, strings)
    return (table if len(table) else None), []


def nccl_payload_ranges(
    con: sqlite3.Connection, uri: str, tables: set[str], processes: ProcessFilter | None = None
) -> tuple[pd.DataFrame | None, list[str]]:
    """NCCL's API ranges with their decoded payloads (tid, start, end, text, bytes, comm, ranks),
    or None and why not; ``processes``: only theirs."""
    schemas = _schemas(con, tables)
    if not any(s.size_offset >= 0 for s in schemas.values()):
        return None, []  # NCCL registered no sized payloads: nothing to say
    columns = {row[1] for row in con.execute('PRAGMA table_info("NVTX_EVENTS")')}
    if "binaryData" not in columns:
        return None, [MISSING_BLOBS_WARNING]
    # CAST: the column is declared TEXT; a BLOB type for every row keeps Arrow's column binary
    job = TableQuery(
        'SELECT e.start AS start, e."end" AS "end", e.globalTid AS tid, COALESCE(NULLIF(e.text,'
        " ''), s.value, '') AS text, "
        "CAST(e.binaryData AS BLOB) AS blob FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id ="
        " e.textId "
        'WHERE e.binaryData IS NOT NULL AND e."end" IS NOT NULL AND e.eventType IN'
        f" {NVTX_RANGE_TYPES}"
        + (f" AND {processes.sql('globalTid')}" if processes is not None else "")
    )
    run_queries(uri, [job])
    rows = job.rows()
    if not rows.n:
        # a share's processes made no NCCL calls: a warning only if no process's payloads were kept
        return None, [MISSING_BLOBS_WARNING] if processes is None or not _any_payload(con) else []
    payloads = _decode(rows, schemas)
    if payloads is None:
        return None, [
            "NCCL NVTX payloads present but none matched a registered schema: collective bytes"
            " unknown"
        ]
    return payloads, []


def _any_payload(con: sqlite3.Connection) -> bool:
    return bool(
        con.execute(
            "SELECT EXISTS (SELECT 1 FROM NVTX_EVENTS WHERE binaryData IS NOT NULL AND eventType"
            f" IN {NVTX_RANGE_TYPES})"
        ).fetchone()[0]
    )


def _schemas(con: sqlite3.Connection, tables: set[str]) -> dict[tuple[int, int], _Schema]:
    if not {"NVTX_PAYLOAD_SCHEMA_ENTRIES", "NVTX_PAYLOAD_SCHEMAS"} <= tables:
        return {}
    sizes = {
        (d, s): n
        for d, s, n in con.execute(
            "SELECT domainId, schemaId, payloadSize FROM NVTX_PAYLOAD_SCHEMAS"
        )
    }
    out: dict[tuple[int, int], _Schema] = {}
    for domain, schema, name, offset in con.execute(
        'SELECT DISTINCT domainId, schemaId, name, "offset" FROM NVTX_PAYLOAD_SCHEMA_ENTRIES'
    ):  # a few dozen rows
        entry = out.setdefault(
            (domain, schema), _Schema(-1, -1, -1, int(sizes.get((domain, schema)) or 0))
        )
        where = int(offset or 0)
        if name in SIZE_FIELDS:
            entry.size_offset = where
        elif name == COMM_FIELD:
            entry.comm_offset = where
        elif name == RANKS_FIELD:
            entry.ranks_offset = where
    return out


def _u64(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Little-endian uint64 at each byte offset of ``data`` (as int64)."""
    index = starts[:, None] + np.arange(8)
    return data[index].copy().view("<u8").reshape(-1).astype(np.int64)


def _u32(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    index = starts[:, None] + np.arange(4)
    return data[index].copy().view("<u4").reshape(-1).astype(np.int64)


def _decode(rows: Rows, schemas: dict[tuple[int, int], _Schema]) -> pd.DataFrame | None:
    """One row per payload range: tid, start, end, text, bytes, communicator, ranks (-1 unknown)."""
    text = rows.strings("text").to_numpy(zero_copy_only=False).astype(object)
    blobs = rows.table.column("blob").combine_chunks()
    n = len(blobs)
    offsets = np.frombuffer(blobs.buffers()[1], dtype=np.int32, count=blobs.offset + n + 1)[
        blobs.offset :
    ].astype(np.int64)
    values = blobs.buffers()[2]
    data = np.concatenate(
        [
            np.frombuffer(values, dtype=np.uint8) if values is not None else np.empty(0, np.uint8),
            np.zeros(8, np.uint8),
        ]
    )
    base, lengths = offsets[:-1], np.diff(offsets)
    ok = lengths >= HEADER_BYTES
    domain = np.where(ok, _u32(data, np.where(ok, base, 0)), NO_ID)
    schema = np.where(ok, _u64(data, np.where(ok, base + 8, 0)), NO_ID)
    size_at, comm_at, ranks_at = (np.full(n, NO_ID, dtype=np.int64) for _ in range(3))
    known = np.zeros(n, dtype=bool)
    pairs = pd.DataFrame({"domain": domain, "schema": schema})
    for (d, sid), index in pairs[ok].groupby(["domain", "schema"]).indices.items():  # per schema
        entry = schemas.get((d, sid)) or schemas.get((d, sid & 0xFFFFFFFF))
        if entry is None:
            continue
        mine = np.flatnonzero(ok)[index]
        size_at[mine], comm_at[mine], ranks_at[mine] = (
            entry.size_offset,
            entry.comm_offset,
            entry.ranks_offset,
        )
        known[mine] = True
    if not known.any():
        return None

    def field(offset: np.ndarray, width: int) -> np.ndarray:
        take = known & (offset >= 0) & (HEADER_BYTES + offset + width <= lengths)
        out = np.full(n, NO_ID, dtype=np.int64)
        at = base[take] + HEADER_BYTES + offset[take]
        out[take] = _u64(data, at) if width == 8 else _u32(data, at)
        return out

    return pd.DataFrame(
        {
            "tid": rows.take("tid", "int64"),
            "start": rows.take("start", "int64"),
            "end": rows.take("end", "int64"),
            "text": text,
            "bytes": field(size_at, 8),
            "comm": field(comm_at, 8),
            "ranks": field(ranks_at, 4),
        }
    )[known].reset_index(drop=True)


def _nccl_launches(
    kernels: pd.DataFrame, api: pd.DataFrame, strings: StringTable
) -> pd.DataFrame | None:
    """NCCL kernels with the thread and time of the call that launched them."""
    is_nccl = strings.matching(r"(?i)nccl") if len(strings) else np.zeros(0, bool)
    names = kernels["name_id"].to_numpy()
    rows = (
        np.flatnonzero(is_nccl[np.maximum(names, 0)] & (names >= 0))
        if len(names)
        else np.zeros(0, np.int64)
    )
    if not len(rows):
        return None
    calls = pd.Index(correlation_key(api["pid"], api["correlation"]))
    first = ~calls.duplicated(keep="first")
    where = calls[first].get_indexer(
        correlation_key(kernels["pid"].to_numpy()[rows], kernels["correlation"].to_numpy()[rows])
    )
    linked = where >= 0
    call = np.flatnonzero(first)[where[linked]]
    return pd.DataFrame(
        {
            "kernel": rows[linked],
            "tid": api["tid"].to_numpy()[call],
            "start": api["start"].to_numpy()[call],
            "end": api["end"].to_numpy()[call],
        }
    )


def _group_ranges(ranges: pd.DataFrame, strings: StringTable) -> dict[str, pd.DataFrame]:
    names = strings.lookup(ranges["name_id"].to_numpy()) if len(ranges) else np.empty(0, object)
    pick = lambda text: ranges.loc[names == text, ["tid", "start", "end"]].reset_index(drop=True)
    return {"start": pick("ncclGroupStart"), "end": pick("ncclGroupEnd")}
