"""The export's CUPTI activity tables -> ``kernels``, ``copies``, ``graphs`` and ``api``.

These are the big tables (millions of kernel and runtime rows in a real capture, no indexes), so
each is read as its own query list (kernels and runtime/driver calls in parallel rowid slices)
and turned into a model table in numpy. Only what the model needs is fetched: runtime/driver rows
whose name is a launch, copy, memset or synchronize call (filtered in SQL by ``nameId``), then
kept if a GPU op references their correlation id or they synchronize.

* Event tables are sorted by ``start``.
* Runtime API names lose their ABI suffix (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``).
  nsys 2022.2 records every runtime call twice under one correlation id (with and without the
  suffix); one row per (process, correlation id) is kept, the suffixed one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from verifyprof.trace.events import (
    API_COLUMNS,
    API_KIND_DRIVER,
    API_KIND_RUNTIME,
    COPY_COLUMNS,
    COPY_KIND_MEMCPY,
    COPY_KIND_MEMSET,
    GRAPH_COLUMNS,
    KERNEL_COLUMNS,
    MISSING_TIME,
    NO_ID,
    StringTable,
)
from verifyprof.trace.integrity import Problem
from verifyprof.trace.nsys.columns import Rows, SlicedQuery
from verifyprof.trace.nsys.export import (
    DRIVER,
    GRAPH_TRACE,
    KERNEL,
    MEMCPY,
    NsysExport,
    NsysStrings,
    model_table,
    os_pid,
)
from verifyprof.trace.nsys.names import kernel_name_ids, name_columns

if TYPE_CHECKING:  # pandas where a table is made (trace/events.py says why)
    import pandas as pd

# CUPTI memcpy kinds (ENUM_CUDA_MEMCPY_OPER, stable across schema versions) -> copy names
COPY_NAMES = {
    0: "Memcpy",
    1: "Memcpy HtoD",
    2: "Memcpy DtoH",
    3: "Memcpy HtoA",
    4: "Memcpy AtoH",
    5: "Memcpy AtoA",
    6: "Memcpy AtoD",
    7: "Memcpy DtoA",
    8: "Memcpy DtoD",
    9: "Memcpy HtoH",
    10: "Memcpy PtoP",
    11: "Memcpy UVM HtoD",
    12: "Memcpy UVM DtoH",
    13: "Memcpy UVM DtoD",
}
MEMSET_NAME = "Memset"

# Runtime/driver calls the model keeps: they launch GPU work or block the host on it.
API_CANDIDATE_SQL = (
    "value GLOB 'cu*' AND (value LIKE '%Launch%' OR value LIKE '%Memcpy%' OR value LIKE '%Memset%'"
    " OR value LIKE '%Synchronize%')"
)
API_NAME = re.compile(r"^cu(da)?[A-Z]\w*$")
VERSION_SUFFIX = re.compile(r"_v\d+$")
SYNC_NAME = re.compile(r"Synchronize")

GRAPH_WARNING = (
    "{n} CUDA graph launch(es) recorded only as whole graphs (CUPTI_ACTIVITY_KIND_GRAPH_TRACE)"
    " without their kernels: captured with --cuda-graph-trace=graph; per-kernel phases inside"
    " graphs are unavailable, re-capture with --cuda-graph-trace=node"
)

# NULL -> fill; a NULL timestamp becomes MISSING_TIME, which trace.validation drops and counts
TIMES = {"start": ("int64", MISSING_TIME), "end": ("int64", MISSING_TIME)}
KERNEL_SPEC = {
    **TIMES,
    **{
        c: ("int64", NO_ID)
        for c in (
            "device",
            "stream",
            "correlation",
            "gpid",
            "name",
            "graph_node_id",
            "graph_id",
        )
    },
}
API_SPEC = {
    **TIMES,
    **{c: ("int64", NO_ID) for c in ("gtid", "correlation", "name")},
    "from_driver": ("int8", 0),
}
# the event model's schema (trace/events.py), one definition: the tables this module builds
KERNEL_DTYPES = KERNEL_COLUMNS
COPY_DTYPES = COPY_COLUMNS
GRAPH_DTYPES = GRAPH_COLUMNS
API_DTYPES = API_COLUMNS


def correlation_key(pid: np.ndarray | pd.Series, correlation: np.ndarray | pd.Series) -> np.ndarray:
    """One int64 per (process, correlation id): pids have 24 bits, CUPTI correlation ids 32."""
    return (np.asarray(pid, dtype=np.int64) << 32) | (
        np.asarray(correlation, dtype=np.int64) & 0xFFFFFFFF
    )


# --- queries ----------------------------------------------------------------------------------


def kernel_slices(export: NsysExport) -> list[tuple[str, int]]:
    """The kernel columns the model needs; of the name columns only the first (the others are
    read only for rows it leaves unnamed: :func:`fallback_names`)."""
    export.require(KERNEL, ("start", "end"))
    select = export.select(
        KERNEL,
        {
            "start": "start",
            "end": "end",
            "device": "deviceId",
            "stream": "streamId",
            "correlation": "correlationId",
            "gpid": "globalPid",
            "name": name_columns(export, KERNEL)["name"],
            "graph_node_id": "graphNodeId",
            "graph_id": "graphId",
        },
    )
    return export.sliced(KERNEL, select)


def fallback_names(export: NsysExport, alias: str) -> np.ndarray:
    """One fallback name column (``name2``, ``name3``) of every kernel row the kernel query read,
    in its order (the same rowid slices and filter: a damaged export's second read)."""
    select = export.select(KERNEL, {alias: name_columns(export, KERNEL)[alias]})
    job = SlicedQuery(export.sliced(KERNEL, select), {alias: ("int64", NO_ID)}, KERNEL)
    export.fetch([job])
    return job.rows().take(alias, "int64")


def copy_query(export: NsysExport, table: str) -> str | None:
    if not export.has_rows(table):
        return None
    export.require(table, ("start", "end"))
    wanted = {
        "start": "start",
        "end": "end",
        "device": "deviceId",
        "stream": "streamId",
        "correlation": "correlationId",
        "gpid": "globalPid",
        "bytes": "bytes",
        "graph_node_id": "graphNodeId",
    }
    if table == MEMCPY:
        wanted["copy_kind"] = "copyKind"
    return _where(
        f'SELECT {export.select(table, wanted)} FROM "{table}"', export.of_processes(table)
    )


def graph_query(export: NsysExport) -> str | None:
    if not export.has_rows(GRAPH_TRACE):
        return None
    export.require(GRAPH_TRACE, ("start", "end"))
    select = export.select(
        GRAPH_TRACE,
        {
            "start": "start",
            "end": "end",
            "device": "deviceId",
            "stream": "streamId",
            "graph_id": "graphId",
            "correlation": "correlationId",
            "gpid": "globalPid",
        },
    )
    return _where(f'SELECT {select} FROM "{GRAPH_TRACE}"', export.of_processes(GRAPH_TRACE))


def _where(query: str, condition: str) -> str:
    return f"{query} WHERE {condition}" if condition else query


def api_candidates(export: NsysExport) -> dict[int, str]:
    """nsys string id -> API name, for calls that may launch work or synchronize."""
    rows = export.sql(f"SELECT id, value FROM StringIds WHERE {API_CANDIDATE_SQL}")
    return {
        sid: value
        for sid, value in rows
        if isinstance(sid, int) and isinstance(value, str) and API_NAME.match(value)
    }  # an edited id or value: not a call


def api_slices(export: NsysExport, table: str, candidates: dict[int, str]) -> list[tuple[str, int]]:
    if not candidates or not export.has_rows(table) or "nameId" not in export.cols(table):
        return []
    export.require(table, ("start", "end"))
    select = export.select(
        table,
        {
            "start": "start",
            "end": "end",
            "gtid": "globalTid",
            "correlation": "correlationId",
            "name": "nameId",
        },
    )
    ids = ",".join(str(i) for i in sorted(candidates))
    return export.sliced(
        table, select + f", {1 if table == DRIVER else 0} AS from_driver", f"nameId IN ({ids})"
    )


# --- query results -> model tables -------------------------------------------------------------


def kernels_table(
    rows: Rows, names: NsysStrings, export: NsysExport
) -> tuple[pd.DataFrame, list[Problem]]:
    """The kernels, and the integrity record of those whose name had to come from another
    column or could not (:mod:`~verifyprof.trace.nsys.names`)."""
    if not rows.n:
        return model_table({}, KERNEL_DTYPES), []
    start, device = rows.take("start", "int64"), rows.take("device", "int32")
    columns = name_columns(export, KERNEL)
    name_id, problems = kernel_name_ids(
        rows.take("name", "int64"),
        names,
        columns,
        lambda alias: fallback_names(export, alias),
        (start, device),
        export.path,
    )
    cols = {
        "start": start,
        "end": rows.take("end", "int64"),
        "device": device,
        "stream": rows.take("stream", "int64"),
        "name_id": name_id,
        "correlation": rows.take("correlation", "int64"),
        "pid": os_pid(rows.take("gpid", "int64")),
        "graph_id": rows.take("graph_id", "int64"),
        "graph_node_id": rows.take("graph_node_id", "int64"),
    }
    return model_table(cols, KERNEL_DTYPES), problems


def copies_table(tables: dict[str, Rows | None], strings: StringTable) -> pd.DataFrame:
    parts = []
    for table, rows in tables.items():
        if rows is None or not rows.n:
            continue
        n = rows.n
        if table == MEMCPY:
            kinds = rows.take("copy_kind", "int64", fill=0)
            labels = np.unique(kinds)
            ids = strings.intern([COPY_NAMES.get(int(k), f"Memcpy kind {int(k)}") for k in labels])
            name_id = ids[np.searchsorted(labels, kinds)]
            kind = np.full(n, COPY_KIND_MEMCPY, dtype=np.int8)
        else:
            name_id = np.full(n, strings.intern([MEMSET_NAME])[0], dtype=np.int32)
            kind = np.full(n, COPY_KIND_MEMSET, dtype=np.int8)
        parts.append(
            {
                "start": rows.take("start", "int64", MISSING_TIME),
                "end": rows.take("end", "int64", MISSING_TIME),
                "device": rows.take("device", "int32"),
                "stream": rows.take("stream", "int64"),
                "kind": kind,
                "name_id": name_id,
                "bytes": rows.take("bytes", "int64"),
                "correlation": rows.take("correlation", "int64"),
                "pid": os_pid(rows.take("gpid", "int64")),
                "graph_node_id": rows.take("graph_node_id", "int64"),
            }
        )
    if not parts:
        return model_table({}, COPY_DTYPES)
    return model_table({c: np.concatenate([p[c] for p in parts]) for c in COPY_DTYPES}, COPY_DTYPES)


def graphs_table(rows: Rows) -> pd.DataFrame:
    if not rows.n:
        return model_table({}, GRAPH_DTYPES)
    cols = {
        c: rows.take(c if c != "pid" else "gpid", dt, MISSING_TIME if c in TIMES else NO_ID)
        for c, dt in GRAPH_DTYPES.items()
    }
    cols["pid"] = os_pid(cols["pid"])
    return model_table(cols, GRAPH_DTYPES)


def api_table(
    rows: Rows, candidates: dict[int, str], strings: StringTable, gpu_keys: np.ndarray
) -> pd.DataFrame:
    import pandas as pd

    if not rows.n:
        return model_table({}, API_DTYPES)
    nsys_name = rows.take("name", "int64")
    tid = rows.take("gtid", "int64")
    pid = os_pid(tid)
    correlation = rows.take("correlation", "int64")
    from_driver = rows.take("from_driver", "int8", fill=0)
    # per candidate name: base name (ABI suffix stripped), suffixed?, synchronizing?, driver API?
    cand_ids = np.array(sorted(candidates), dtype=np.int64)
    raw = [candidates[i] for i in cand_ids]
    base = [VERSION_SUFFIX.sub("", r) for r in raw]
    lut = np.searchsorted(cand_ids, nsys_name)
    name_id = strings.intern(base)[lut]
    suffixed = np.array([b != r for b, r in zip(base, raw)])[lut]
    is_sync = np.array([bool(SYNC_NAME.search(b)) for b in base])[lut]
    driver = np.array([not b.startswith("cuda") for b in base])[lut] | (from_driver == 1)

    keys = correlation_key(pid, correlation)
    keep = pd.Series(keys).isin(gpu_keys).to_numpy() | is_sync
    unsuffixed = {r for r, b in zip(raw, base) if r == b}
    if unsuffixed & {b for r, b in zip(raw, base) if r != b}:
        # nsys 2022.2: each call twice under one correlation id, "X" (eventClass 67) and "X_vNNNN"
        order = np.lexsort((~suffixed, keys))
        first = np.r_[True, keys[order][1:] != keys[order][:-1]]
        dup = np.ones(len(keys), dtype=bool)
        dup[order[first]] = False
        keep &= ~dup
    cols = {
        "start": rows.take("start", "int64")[keep],
        "end": rows.take("end", "int64")[keep],
        "pid": pid[keep],
        "tid": tid[keep],
        "correlation": correlation[keep],
        "name_id": name_id[keep],
        "kind": np.where(driver[keep], API_KIND_DRIVER, API_KIND_RUNTIME).astype(np.int8),
    }
    return model_table(cols, API_DTYPES)


def graph_warnings(kernels: pd.DataFrame, graphs: pd.DataFrame) -> list[str]:
    """Whole-graph rows whose kernels were not recorded (--cuda-graph-trace=graph)."""
    import pandas as pd

    if not len(graphs):
        return []
    kernel_keys = correlation_key(kernels["pid"], kernels["correlation"])
    opaque = int(
        (~pd.Series(correlation_key(graphs["pid"], graphs["correlation"])).isin(kernel_keys)).sum()
    )
    return [GRAPH_WARNING.format(n=opaque)] if opaque else []
