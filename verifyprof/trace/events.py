"""One columnar event model for every trace format.

Readers (nsys SQLite, Kineto JSON) produce a :class:`Trace`; everything downstream reads only
this. Tables are pandas DataFrames of numpy columns; times are int64 nanoseconds on one clock
per trace; names are int32 ids into ``Trace.strings`` so that millions of kernels cost one
string each per distinct name, and classification runs once per distinct name.

Keys that tie the tables together:

* ``pid``: a process key unique within the trace (nsys: the OS pid from ``globalPid``; Kineto:
  the file's pid, disambiguated per file when several rank files are merged).
* ``tid``: a thread key unique within the trace (nsys: ``globalTid``; Kineto: derived from
  file and tid). Ranges and API calls on the same ``tid`` are on the same host thread.
* ``correlation``: ties a GPU op to the API call that launched it, unique only within a
  ``pid``: always join on ``(pid, correlation)``. Every kernel of a replayed CUDA graph carries
  the correlation of its ``cudaGraphLaunch``.
* ``device``: the GPU ordinal as the trace names it (nsys ``deviceId``; Kineto ``pid`` of the
  GPU track, or ``args.device``). With several ranks in one trace, each rank's devices keep
  distinct numbers (readers offset them when merging files that reuse the same ordinal).

Missing values: -1 in integer id columns, NaN in float columns, "" in strings; a reader puts
``MISSING_TIME`` where a timestamp is NULL, and :mod:`verifyprof.trace.validation` drops and
counts such rows before the trace is handed on. What cannot be taken at face value is counted
and named in ``Trace.integrity`` (:mod:`verifyprof.trace.integrity`).

Optional tables (empty when the trace format or capture does not record them):

* ``collective_args``: message sizes of collective kernels, one row per kernel that has them
  (Kineto: the NCCL kernel's own args, or the tensor of the op that launched a symmetric-memory /
  custom allreduce; nsys: NCCL's NVTX payloads, only in exports made with
  ``--include-blobs=true``). ``kernel`` is the row in ``kernels``; ``bytes`` / ``out_bytes`` are
  the rank's input / output buffer (elements x dtype size: an allgather's output is ``group_size``
  times its input); ``collective`` names the call (``allreduce``, ``allgather``,
  ``reducescatter``, ``broadcast``, ``reduce``, ``alltoall``, ``sendrecv``, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from verifyprof.contracts.plumbing.paths import shown

if TYPE_CHECKING:  # pandas is imported where a table is made: the nsys read's modules load
    # without it, beside it (pipeline/read_ahead.py)
    import pandas as pd

NO_ID = -1
TIME_LIMIT_NS = 1 << 62  # beyond this a time is not one: sums of such values overflow int64
MISSING_TIME = np.iinfo(np.int64).min  # what a reader puts where a timestamp is NULL / absent

# Column -> numpy dtype, per table. Readers must produce exactly these columns (extra columns
# are allowed and ignored); ``Trace.validate`` checks it.
KERNEL_COLUMNS: dict[str, str] = {
    "start": "int64",
    "end": "int64",
    "device": "int32",
    "stream": "int64",
    "name_id": "int32",  # demangled name (nsys demangledName, shortName as fallback; Kineto name)
    "correlation": "int64",
    "pid": "int64",
    "graph_id": "int64",  # CUDA graph id (nsys 3.24+ graphId), -1 when not a graph kernel / unknown
    "graph_node_id": "int64",  # -1 when not launched as a graph node
}

COPY_KIND_MEMCPY = 0
COPY_KIND_MEMSET = 1

COPY_COLUMNS: dict[str, str] = {
    "start": "int64",
    "end": "int64",
    "device": "int32",
    "stream": "int64",
    "kind": "int8",  # COPY_KIND_MEMCPY or COPY_KIND_MEMSET
    "name_id": "int32",  # e.g. "Memcpy HtoD", "Memcpy DtoH", "Memset"
    "bytes": "int64",
    "correlation": "int64",
    "pid": "int64",
    "graph_node_id": "int64",
}

# Whole-graph executions recorded instead of their kernels (nsys --cuda-graph-trace=graph).
GRAPH_COLUMNS: dict[str, str] = {
    "start": "int64",
    "end": "int64",
    "device": "int32",
    "stream": "int64",
    "graph_id": "int64",
    "correlation": "int64",
    "pid": "int64",
}

API_KIND_RUNTIME = 0
API_KIND_DRIVER = 1

API_COLUMNS: dict[str, str] = {
    "start": "int64",
    "end": "int64",
    "pid": "int64",
    "tid": "int64",
    "correlation": "int64",
    "name_id": "int32",  # ABI suffix stripped: cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernelEx
    "kind": "int8",  # API_KIND_RUNTIME or API_KIND_DRIVER
}

RANGE_KIND_PUSHPOP = 0  # NVTX push/pop (eventType 59)
RANGE_KIND_STARTEND = 1  # NVTX start/end (eventType 60), may end on another thread
RANGE_KIND_ANNOTATION = 2  # PyTorch record_function / user_annotation (Kineto)
RANGE_KIND_GPU_ANNOTATION = 3  # Kineto gpu_user_annotation: a device-side span (device >= 0)

RANGE_COLUMNS: dict[str, str] = {
    "start": "int64",
    "end": "int64",
    "pid": "int64",
    "tid": "int64",  # -1 for GPU annotations
    "name_id": "int32",  # full text (NVTX text or registered string; annotation name)
    "domain_id": "int32",  # NVTX domain name id, -1 for the default domain / Kineto
    "kind": "int8",
    "depth": "int16",  # nesting level on its thread, 0 = outermost
    "device": "int32",  # -1 for host ranges
    "payload": "float64",  # NVTX numeric payload, NaN if none
}

DEVICE_COLUMNS: dict[str, str] = {
    "device": "int32",
    "name": "object",
    "sm_count": "int32",  # -1 unknown
    "memory_bytes": "int64",  # -1 unknown
    "compute_capability": "object",  # "9.0", "" unknown
}

PROCESS_COLUMNS: dict[str, str] = {
    "pid": "int64",
    "host_pid": "int64",  # the OS pid
    "name": "object",
    "rank": "int32",  # distributed rank, -1 unknown
    "device": "int32",  # the device this process drives, -1 unknown / several
}

COLLECTIVE_ARG_COLUMNS: dict[str, str] = {
    "kernel": "int64",  # row in kernels
    "bytes": "int64",  # input message: elements x dtype size, -1 unknown
    "out_bytes": "int64",  # output message, -1 unknown
    "group_size": "int32",  # ranks in the communicator, -1 unknown
    "collective": "int32",  # name id: allreduce, allgather, ..., -1 unknown
}

TABLES: dict[str, dict[str, str]] = {
    "kernels": KERNEL_COLUMNS,
    "copies": COPY_COLUMNS,
    "graphs": GRAPH_COLUMNS,
    "api": API_COLUMNS,
    "ranges": RANGE_COLUMNS,
    "devices": DEVICE_COLUMNS,
    "processes": PROCESS_COLUMNS,
    "collective_args": COLLECTIVE_ARG_COLUMNS,
}


def empty_table(columns: dict[str, str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({c: np.empty(0, dtype=dt) for c, dt in columns.items()})


def conform(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Cast a reader's frame to the table's column set and dtypes (cheap when already right)."""
    import pandas as pd

    out = {}
    for col, dtype in columns.items():
        if col not in frame:
            raise KeyError(f"missing column {col!r}")
        values = frame[col]
        if dtype == "object":
            out[col] = values.astype(object).to_numpy()
        else:
            out[col] = values.to_numpy(dtype=dtype, copy=False)
    return pd.DataFrame(out)


class StringTable:
    """Interned strings: ``ids`` are positions in ``values``."""

    def __init__(self, values: list[str] | np.ndarray | None = None):
        self.values: np.ndarray = np.asarray(values if values is not None else [], dtype=object)
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, sid: int) -> str:
        return "" if sid < 0 else self.values[sid]

    def lookup(self, ids: np.ndarray | pd.Series) -> np.ndarray:
        """Names for an array of ids (-1 -> "")."""
        ids = np.asarray(ids)
        padded = np.append(self.values, "")  # index -1 lands on the pad
        return padded[np.where(ids < 0, len(self.values), ids)]

    def intern(self, texts: np.ndarray | pd.Series | list[str]) -> np.ndarray:
        """Ids for texts, appending unseen ones. Vectorised via pandas factorisation."""
        import pandas as pd

        codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
        mapping = np.empty(len(uniques), dtype=np.int32)
        if self._index is None:
            self._index = {v: i for i, v in enumerate(self.values)}
        new: list[str] = []
        for j, text in enumerate(uniques):  # once per distinct string, not per event
            sid = self._index.get(text)
            if sid is None:
                sid = len(self.values) + len(new)
                self._index[text] = sid
                new.append(text)
            mapping[j] = sid
        if new:
            self.values = np.concatenate([self.values, np.asarray(new, dtype=object)])
        out = np.full(len(codes), NO_ID, dtype=np.int32)
        ok = codes >= 0
        out[ok] = mapping[codes[ok]]
        return out

    def matching(self, pattern: str) -> np.ndarray:
        """Boolean mask over ids whose string matches ``pattern`` (``re.search``)."""
        compiled = re.compile(pattern)
        return np.fromiter(
            (compiled.search(v) is not None for v in self.values),
            dtype=bool,
            count=len(self.values),
        )


@dataclass
class Trace:
    """A trace in the columnar model. ``meta`` holds format, versions and reader warnings."""

    source: list[Path]
    format: str  # "nsys-sqlite" | "kineto"
    strings: StringTable
    kernels: pd.DataFrame = field(default_factory=lambda: empty_table(KERNEL_COLUMNS))
    copies: pd.DataFrame = field(default_factory=lambda: empty_table(COPY_COLUMNS))
    graphs: pd.DataFrame = field(default_factory=lambda: empty_table(GRAPH_COLUMNS))
    api: pd.DataFrame = field(default_factory=lambda: empty_table(API_COLUMNS))
    ranges: pd.DataFrame = field(default_factory=lambda: empty_table(RANGE_COLUMNS))
    devices: pd.DataFrame = field(default_factory=lambda: empty_table(DEVICE_COLUMNS))
    processes: pd.DataFrame = field(default_factory=lambda: empty_table(PROCESS_COLUMNS))
    collective_args: pd.DataFrame = field(
        default_factory=lambda: empty_table(COLLECTIVE_ARG_COLUMNS)
    )
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    integrity: list[Any] = field(default_factory=list)  # integrity.Problem, one per kind/table

    def validate(self) -> None:
        """Assert the model's contract: columns, dtypes, end >= start. Readers call it in tests."""
        for table, columns in TABLES.items():
            frame: pd.DataFrame = getattr(self, table)
            for col, dtype in columns.items():
                assert col in frame.columns, f"{table}.{col} missing"
                if dtype != "object":
                    assert frame[col].dtype == np.dtype(dtype), (
                        f"{table}.{col} is {frame[col].dtype}, want {dtype}"
                    )
            if "start" in columns and len(frame):
                assert (frame["end"].to_numpy() >= frame["start"].to_numpy()).all(), (
                    f"{table}: end < start"
                )
        for table in ("kernels", "copies", "api", "ranges"):
            ids = getattr(self, table)["name_id"].to_numpy()
            if len(ids):
                assert ids.max() < len(self.strings), f"{table}.name_id out of range"
        args = self.collective_args
        if len(args) and "released_counts" not in self.meta:
            rows = args["kernel"].to_numpy()
            assert rows.min() >= 0 and rows.max() < len(self.kernels), (
                "collective_args.kernel out of range"
            )
            assert args["collective"].to_numpy().max() < len(self.strings), (
                "collective_args.collective out of range"
            )

    def report(self, problem: Any) -> None:
        """Record an integrity problem (:class:`~verifyprof.trace.integrity.Problem`): its
        record, and its line among the warnings."""
        self.integrity.append(problem)
        self.warnings.append(problem.message())

    def release_events(self) -> None:
        """Drop the per-event tables (kernels, copies, graphs, api) once an analysis has taken
        what it needs from them: a one-shot CLI run then peaks lower on million-kernel traces.
        Ranges, strings, devices, processes and collective_args (whose ``kernel`` rows keep
        their meaning for the op arrays taken before) stay; ``describe()`` keeps reporting the
        counts.
        """
        self.meta["released_counts"] = {
            t: int(len(getattr(self, t))) for t in ("kernels", "copies", "ranges")
        }
        for table in ("kernels", "copies", "graphs", "api"):
            setattr(self, table, empty_table(TABLES[table]))

    def names(self, table: str) -> np.ndarray:
        """The name strings of a table's rows."""
        return self.strings.lookup(getattr(self, table)["name_id"].to_numpy())

    @property
    def ranks(self) -> list[int]:
        ranks = self.processes["rank"].to_numpy()
        return sorted(int(r) for r in np.unique(ranks[ranks >= 0]))

    def describe(self) -> dict[str, Any]:
        """The ``trace`` object of the breakdown JSON."""
        devices = [
            {k: v.item() if hasattr(v, "item") else v for k, v in row.items()}
            for row in self.devices.to_dict("records")
        ]
        counts = self.meta.get("released_counts") or {
            t: int(len(getattr(self, t))) for t in ("kernels", "copies", "ranges")
        }
        return {
            "path": [shown(p) for p in self.source],  # a name that is not UTF-8: \xff
            "format": self.format,
            **{
                k: v
                for k, v in self.meta.items()
                if isinstance(v, (str, int, float, bool)) or v is None
            },
            **counts,
            "devices": devices,
            "ranks": self.ranks,
            "warnings": list(self.warnings),
            # only where there is something to say: a clean trace's block stays as it was
            **({"integrity": [p.record() for p in self.integrity]} if self.integrity else {}),
        }
