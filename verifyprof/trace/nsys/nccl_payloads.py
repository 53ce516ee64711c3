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
CUDA graph have no API range at replay: their size stays unknown.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.trace.collectives import collective_args_table, family
from verifyprof.trace.events import NO_ID, StringTable
from verifyprof.trace.nsys.activity import correlation_key
from verifyprof.trace.nsys.columns import Rows, TableQuery, run_queries
from verifyprof.trace.nsys.export import ProcessFilter
from verifyprof.trace.nsys.ranges import NVTX_PUSHPOP, NVTX_STARTEND

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
    table = _join(launches, payloads, groups, strings)
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
    if (
        not rows.n
    ):  # a share's processes made no NCCL calls: a warning only if no process's payloads were kept
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
    for (d, sid), index in (
        pairs[ok].groupby(["domain", "schema"]).indices.items()
    ):  # once per schema
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


class _Timeline:
    """Per-thread ordering of many (tid, time) pairs as one sortable key: thread code, time rank."""

    def __init__(self, tids: list[np.ndarray], times: list[np.ndarray]):
        self.tid_codes = pd.Index(pd.unique(np.concatenate(tids)))
        self.times = np.unique(np.concatenate(times))

    def key(self, tid: np.ndarray, time: np.ndarray, side: str = "left") -> np.ndarray:
        code = self.tid_codes.get_indexer(tid).astype(np.int64)
        rank = np.searchsorted(self.times, time, side=side).astype(np.int64)
        return code * (len(self.times) + 1) + rank


def _last_at_or_before(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index of the last sorted key <= each key, -1 if none."""
    return np.searchsorted(sorted_keys, keys, side="right") - 1


def _join(
    launches: pd.DataFrame,
    payloads: pd.DataFrame,
    groups: dict[str, pd.DataFrame],
    strings: StringTable,
) -> pd.DataFrame:
    texts = payloads["text"]
    fam_of = {
        t: family(t) if isinstance(t, str) and t.lower().startswith("nccl") else ""
        for t in pd.unique(texts)
    }  # per API name
    fam = texts.map(fam_of).to_numpy(dtype=object)
    sized = (payloads["bytes"].to_numpy() >= 0) & (fam != "") & (fam != "other")
    inits = payloads[(payloads["comm"].to_numpy() >= 0) & (payloads["ranks"].to_numpy() > 0)]
    ranks_by_comm = inits.drop_duplicates("comm").set_index("comm")[
        "ranks"
    ]  # communicator -> ranks, from its init range
    p = payloads[sized].reset_index(drop=True)
    fam = fam[sized]
    if p.empty:
        return collective_args_table([], [], [], [], [], strings)
    group = p["comm"].map(ranks_by_comm).fillna(NO_ID).to_numpy(dtype=np.int64)
    gs, ge = groups["start"], groups["end"]
    line = _Timeline(
        [
            p["tid"].to_numpy(),
            launches["tid"].to_numpy(),
            gs["tid"].to_numpy(),
            ge["tid"].to_numpy(),
        ],
        [
            p["start"].to_numpy(),
            p["end"].to_numpy(),
            launches["start"].to_numpy(),
            launches["end"].to_numpy(),
            gs["start"].to_numpy(),
            ge["start"].to_numpy(),
            ge["end"].to_numpy(),
        ],
    )
    order = np.lexsort((p["start"].to_numpy(), line.tid_codes.get_indexer(p["tid"].to_numpy())))
    p, fam, group = p.iloc[order].reset_index(drop=True), fam[order], group[order]
    p_key = line.key(p["tid"].to_numpy(), p["start"].to_numpy())
    l_tid, l_start, l_end = (launches[c].to_numpy() for c in ("tid", "start", "end"))

    # (a) a sized range encloses the launch call
    cand = _last_at_or_before(p_key, line.key(l_tid, l_start))
    ok = cand >= 0
    ok[ok] = (p["tid"].to_numpy()[cand[ok]] == l_tid[ok]) & (
        p["end"].to_numpy()[cand[ok]] >= l_end[ok]
    )
    kernel, nbytes, out_bytes, size_group, names = (
        [launches["kernel"].to_numpy()[ok]],
        [],
        [],
        [group[cand[ok]]],
        [fam[cand[ok]]],
    )
    b = p["bytes"].to_numpy()[cand[ok]]
    n = group[cand[ok]]
    f = fam[cand[ok]]
    in_b = np.where(f == "reducescatter", np.where(n > 0, b * n, NO_ID), b)
    out_b = np.where(f == "allgather", np.where(n > 0, b * n, NO_ID), b)
    nbytes.append(in_b)
    out_bytes.append(out_b)

    # (b) the launch is inside ncclGroupEnd: the sized ranges since the group's ncclGroupStart
    rest = np.flatnonzero(~ok)
    if len(rest) and len(ge) and len(gs):
        ge_order = np.lexsort(
            (ge["start"].to_numpy(), line.tid_codes.get_indexer(ge["tid"].to_numpy()))
        )
        ge = ge.iloc[ge_order].reset_index(drop=True)
        ge_key = line.key(ge["tid"].to_numpy(), ge["start"].to_numpy())
        g = _last_at_or_before(ge_key, line.key(l_tid[rest], l_start[rest]))
        inside = g >= 0
        inside[inside] = (ge["tid"].to_numpy()[g[inside]] == l_tid[rest][inside]) & (
            ge["end"].to_numpy()[g[inside]] >= l_end[rest][inside]
        )
        rest, g = rest[inside], g[inside]
        gs_order = np.lexsort(
            (gs["start"].to_numpy(), line.tid_codes.get_indexer(gs["tid"].to_numpy()))
        )
        gs = gs.iloc[gs_order].reset_index(drop=True)
        gs_key = line.key(gs["tid"].to_numpy(), gs["start"].to_numpy())
        end_key = line.key(ge["tid"].to_numpy()[g], ge["start"].to_numpy()[g])
        s = _last_at_or_before(gs_key, end_key)
        opened = s >= 0
        opened[opened] = gs["tid"].to_numpy()[s[opened]] == ge["tid"].to_numpy()[g[opened]]
        rest, g, s = rest[opened], g[opened], s[opened]
        lo = np.searchsorted(
            p_key, line.key(gs["tid"].to_numpy()[s], gs["start"].to_numpy()[s]), side="right"
        )
        hi = np.searchsorted(p_key, end_key[opened], side="left")
        members = hi > lo
        rest, lo, hi = rest[members], lo[members], hi[members]
        if len(rest):
            kind = _group_kind(fam, lo, hi)
            keep = kind != ""
            rest, lo, hi, kind = rest[keep], lo[keep], hi[keep], kind[keep]
            total = lambda mask: np.r_[0, np.cumsum(np.where(mask, p["bytes"].to_numpy(), 0))]
            sent, received, everything = (
                total(fam == "send"),
                total(fam == "recv"),
                total(np.ones(len(p), bool)),
            )
            in_b = np.where(
                kind == "sendrecv", sent[hi] - sent[lo], everything[hi] - everything[lo]
            )
            out_b = np.where(kind == "sendrecv", received[hi] - received[lo], in_b)
            kernel.append(launches["kernel"].to_numpy()[rest])
            nbytes.append(in_b)
            out_bytes.append(out_b)
            size_group.append(group[lo])
            names.append(kind)
    return collective_args_table(
        np.concatenate(kernel),
        np.concatenate(nbytes),
        np.concatenate(out_bytes),
        np.concatenate(size_group),
        np.concatenate(names).tolist(),
        strings,
    )


def _group_kind(fam: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The collective of each group of payload ranges ``fam[lo:hi]``: its one family, ``sendrecv``
    for sends and receives, "" for a mix (size left unknown). Prefix counts per family, no loop
    over groups."""
    codes, kinds = pd.factorize(pd.Series(fam))
    present = np.zeros((len(lo), len(kinds)), dtype=bool)
    for k in range(len(kinds)):  # a handful of families
        counts = np.r_[0, np.cumsum(codes == k)]
        present[:, k] = counts[hi] - counts[lo] > 0
    p2p_kinds = np.isin(np.asarray(kinds, dtype=object), ["send", "recv"])
    only_p2p = ~(present & ~p2p_kinds).any(axis=1)
    single = present.sum(axis=1) == 1
    first = (
        np.asarray(kinds, dtype=object)[np.argmax(present, axis=1)]
        if len(kinds)
        else np.empty(len(lo), object)
    )
    return np.where(only_p2p, "sendrecv", np.where(single, first, "")).astype(object)
