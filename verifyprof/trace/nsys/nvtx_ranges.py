"""The export's NVTX events -> ``ranges``: names, domains, payloads and nesting depth.

Steps and phases are found from these ranges, so they keep what nsys records about them:

* push/pop (eventType 59) and start/end (60) ranges; marks and ranges with no end are dropped
  (the latter counted in a warning). Text is ``text`` or the registered ``textId`` string.
* ``domain_id`` names the domain (eventType 75 rows), ``"domain <n>"`` when the export lacks the
  domain's create row.
* ``payload`` is the first numeric payload column set.
* ``depth`` counts the ranges of the same kind still open on the thread when the range starts.

NCCL's typed (binary) payloads are read separately, by :mod:`verifyprof.trace.nsys.nccl_payloads`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from verifyprof.trace.events import (
    MISSING_TIME,
    NO_ID,
    RANGE_KIND_PUSHPOP,
    RANGE_KIND_STARTEND,
    StringTable,
)
from verifyprof.trace.integrity import Problem
from verifyprof.trace.nesting import nesting_depth
from verifyprof.trace.nsys.columns import Rows
from verifyprof.trace.nsys.export import (
    NVTX,
    NsysExport,
    NsysStrings,
    model_table,
    os_pid,
)

NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTX_DOMAIN_CREATE = 75
NVTX_PAYLOADS = (
    "uint64Value",
    "int64Value",
    "doubleValue",
    "uint32Value",
    "int32Value",
    "floatValue",
)

RANGE_DTYPES = {
    "start": "int64",
    "end": "int64",
    "pid": "int64",
    "tid": "int64",
    "name_id": "int32",
    "domain_id": "int32",
    "kind": "int8",
    "depth": "int16",
    "device": "int32",
    "payload": "float64",
}


def nvtx_query(export: NsysExport) -> str | None:
    if not export.has_rows(NVTX):
        return None
    have = set(export.cols(NVTX))
    payload = [f'"{c}" * 1.0' for c in NVTX_PAYLOADS if c in have]
    # 1e999 (inf) stands for "no payload" so that the column is always REAL (ADBC infers types from
    # the first rows)
    payload_expr = f"COALESCE({', '.join(payload + ['1e999'])})"
    text = "COALESCE(text, '')" if "text" in have else "''"
    select = export.select(
        NVTX,
        {
            "start": "start",
            "end": "end",
            "event_type": "eventType",
            "gtid": "globalTid",
            "text_id": "textId",
            "domain": "domainId",
        },
    )
    types = f"{NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTX_DOMAIN_CREATE}"
    where = f"eventType IN ({types})"
    mine = export.of_processes(NVTX)
    if mine:  # domain registrations of every process: as an export of all of them has them
        where = (
            f"eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}) AND {mine} OR eventType ="
            f" {NVTX_DOMAIN_CREATE}"
        )
    return f'SELECT {select}, {text} AS text, {payload_expr} AS payload FROM "{NVTX}" WHERE {where}'


def ranges_table(
    rows: Rows, names: NsysStrings, strings: StringTable
) -> tuple[pd.DataFrame, list[str], list[Problem]]:
    """The ranges, the warnings about them, and their integrity problems (texts that are not
    UTF-8, read with U+FFFD)."""
    if not rows.n:
        return model_table({}, RANGE_DTYPES), [], []
    event_type = rows.take("event_type", "int64")
    domain_raw = rows.take("domain", "int64", fill=0)
    end_null = rows.table.column("end").is_null().to_numpy(zero_copy_only=False)
    end = rows.take("end", "int64")
    text_col = rows.strings("text")

    # domain names from the create rows; a domain without one (time-sliced export) gets its number
    creates = np.flatnonzero(event_type == NVTX_DOMAIN_CREATE)
    domain_text = {int(domain_raw[i]): text_col[int(i)].as_py() for i in creates}
    is_range = (event_type == NVTX_PUSHPOP) | (event_type == NVTX_STARTEND)
    open_ended = is_range & end_null
    warnings = []
    if open_ended.any():
        warnings.append(
            f"{int(open_ended.sum())} NVTX range(s) without an end (open when the capture stopped)"
            " dropped"
        )
    sel = np.flatnonzero(is_range & ~end_null)
    if not len(sel):
        return model_table({}, RANGE_DTYPES), warnings, []
    start = rows.take("start", "int64", MISSING_TIME)[sel]  # NULL: dropped by trace.validation
    end = end[sel]
    tid = rows.take("gtid", "int64")[sel]
    kind = np.where(
        event_type[sel] == NVTX_PUSHPOP, RANGE_KIND_PUSHPOP, RANGE_KIND_STARTEND
    ).astype(np.int8)

    # name: the explicit text, else the registered string (textId); distinct texts interned once
    texts = pc.take(text_col, pa.array(sel))
    encoded = pc.dictionary_encode(texts).combine_chunks()
    dict_ids = strings.intern(encoded.dictionary.to_pylist())
    name_id = dict_ids[encoded.indices.to_numpy(zero_copy_only=False)]
    registered = rows.take("text_id", "int64")[sel]
    use_registered = pc.equal(texts, "").to_numpy(zero_copy_only=False) & (registered >= 0)
    name_id[use_registered] = names.map(registered[use_registered])

    domains = domain_raw[sel]
    domain_id = np.full(len(sel), NO_ID, dtype=np.int32)
    named = domains > 0
    if named.any():
        uniq, inverse = np.unique(domains[named], return_inverse=True)
        ids = strings.intern([domain_text.get(int(d)) or f"domain {int(d)}" for d in uniq])
        domain_id[named] = ids[inverse]

    payload = rows.take("payload", "float64", fill=np.nan)[sel]
    payload[~np.isfinite(payload)] = np.nan  # 1e999 (inf) marked "no payload" in the query
    cols = {
        "start": start,
        "end": end,
        "pid": os_pid(tid),
        "tid": tid,
        "name_id": name_id,
        "domain_id": domain_id,
        "kind": kind,
        "depth": nvtx_depth(tid, kind, start, end),
        "device": np.full(len(sel), NO_ID, dtype=np.int32),
        "payload": payload,
    }
    problems = _not_utf8(rows, sel, cols, strings)  # before model_table takes the columns
    return model_table(cols, RANGE_DTYPES), warnings, problems


def _not_utf8(
    rows: Rows, sel: np.ndarray, cols: dict[str, np.ndarray], strings: StringTable
) -> list[Problem]:
    """The ranges whose text was not UTF-8 (``cols``: the ranges' columns, in ``sel`` order)."""
    bad = np.flatnonzero(np.isin(sel, rows.invalid_utf8.get("text", np.empty(0, np.int64))))
    if not len(bad):
        return []
    first = int(bad[0])
    return [
        Problem(
            "invalid_utf8",
            "ranges",
            len(bad),
            len(sel),
            f"{strings[int(cols['name_id'][first])]!r} on thread {int(cols['tid'][first])}",
            cols["start"][bad].astype(np.int64),
            np.full(len(bad), NO_ID, np.int64),
        )
    ]


def nvtx_depth(tid: np.ndarray, kind: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per range: how many ranges of the same (thread, kind) are open when it starts (0 =
    outermost);
    push/pop and start/end ranges keep separate stacks."""
    group = pd.factorize(tid)[0].astype(np.int64) * 2 + kind.astype(np.int64)
    return nesting_depth(group, start, end)
