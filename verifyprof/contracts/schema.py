"""The breakdown schema (``verifyprof.breakdown/1``) in one place: the per-step frame, its JSON
records, its flat CSV/Parquet rows, and the JSON read back into the same frame.

The frame is what attribution produces and what the model consumes: one row per (step, device)
with scalar columns, ``attrs`` (a dict per row), one int64 column per phase (ns), ``total_<p>``
for collectives and copies including hidden time, ``count_<p>`` GPU ops per busy phase and,
with several ranks, the ``comm_*`` columns. Fields are only ever added, so a reader fills
phases an older file lacks with zeros.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from verifyprof.contracts import phases
from verifyprof.contracts.breakdown_checks import check_steps
from verifyprof.contracts.errors import NoStepsError, VerifyprofError

SCHEMA = "verifyprof.breakdown/1"
SCHEMA_PREFIX = "verifyprof.breakdown/"
KERNELS_SCHEMA = "verifyprof.kernels/1"  # ``kernels --json``
WHATIF_SCHEMA = "verifyprof.whatif/1"  # ``whatif --json`` (a ranking's or plain numbers')
SUPPORTED_MAJOR = 1
WHOLE_TRACE = "whole_trace"  # the step name of ``breakdown --whole-trace``

SCALAR_FIELDS = (
    "name",
    "text",
    "step",
    "rank",
    "device",
    "pid",
    "tid",
    "start_ns",
    "end_ns",
    "wall_ns",
    "cost_ns",
    "gpu_span_ns",
    "kernels",
    "launches",
    "graph_launches",
    "mode",
    "host_syncs",  # blocking host calls inside the step (stream/device/event syncs, sync copies)
    "sync_ns",  # host time blocked in them
    "post_sync_ns",  # GPU idle after them until the process's next op (capped at the wall)
)
TEXT_FIELDS = ("name", "text", "mode")
INT_FIELDS = tuple(f for f in SCALAR_FIELDS if f not in TEXT_FIELDS)
FLAT_SCALARS = ("step", *(f for f in SCALAR_FIELDS if f != "step"))  # the flat rows' order
COMM_COLUMNS = ("comm_calls", "comm_wait_ns", "comm_transfer_ns")
TOTAL_COLUMNS = tuple(f"total_{p}" for p in phases.TOTALS)
COUNT_COLUMNS = tuple(f"count_{p}" for p in phases.PRIORITY)
SIGNED_FIELDS = frozenset(
    {"start_ns", "end_ns", "rank", "device", "step", "index", "pid", "tid"}
)  # -1 = unknown


VOLATILE_ATTRS = frozenset({"step", "index", "iter", "accepted", "accept_len", "seq", "id"})


def variant(attrs: dict[str, str]) -> str:
    """The attributes that make steps of one name comparable (``tokens=4 graph=1 sweep=1``): the
    summary's groups and the model's choice of steps use the same rule."""
    return " ".join(f"{k}={v}" for k, v in attrs.items() if k not in VOLATILE_ATTRS)


def group_label(name: str, variant: str) -> str:
    """A step group (name and :func:`variant`) as every output names it: ``name [attributes]``."""
    return f"{name} [{variant}]" if variant else name


def variants(attrs: pd.Series | list) -> np.ndarray:
    """:func:`variant` of every row, each distinct attrs object computed once (steps of one range
    text share theirs)."""
    values = list(attrs)
    codes, firsts = shared_objects(values)
    return np.array([variant(values[i]) for i in firsts], dtype=object)[codes]


def shared_objects(values: list) -> tuple[np.ndarray, list[int]]:
    """Per value, a code of its object (by identity), and where each code's object first occurs:
    per-row work on shared objects (attrs dicts) done once per object."""
    ids = np.fromiter(map(id, values), np.int64, len(values))
    codes, _ = pd.factorize(ids)
    return codes, np.unique(codes, return_index=True)[1].tolist()


@dataclass
class BreakdownFrame:
    """A breakdown as the model consumes it: the steps frame plus what the JSON says of the
    trace."""

    steps: pd.DataFrame
    trace: dict[str, Any] = field(
        default_factory=dict
    )  # the JSON's "trace" block: path, devices, ...
    options: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None

    @property
    def source(self) -> str:
        paths = self.trace.get("path") or [""]
        return str(paths[0]) if paths else ""

    @property
    def integrity(self) -> list[dict[str, Any]]:
        """The trace's integrity records (``trace.integrity``): what every command that reads
        the trace says about it (issue 22)."""
        return list(self.trace.get("integrity") or [])

    @property
    def device_names(self) -> list[str]:
        return [
            str(d.get("name", "")) for d in self.trace.get("devices", []) if isinstance(d, dict)
        ]


# ---- frame -> JSON records and flat rows ---------------------------------------------------


RECORD_SCALARS = tuple((f, f) for f in SCALAR_FIELDS if f != "step") + (
    ("index", "step"),
)  # (JSON key, column), in order


def record_blocks(columns: Iterable[str]) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """The nested objects of a step record, in order: (key, their keys, the frame's columns);
    ``comm`` only where the frame has the comm columns (several ranks)."""
    blocks = [
        ("phases", phases.ALL, phases.ALL),
        ("totals", phases.TOTALS, TOTAL_COLUMNS),
        ("counts", phases.PRIORITY, COUNT_COLUMNS),
    ]
    if set(COMM_COLUMNS) <= set(columns):
        blocks.append(("comm", COMM_COLUMNS, COMM_COLUMNS))
    return [(b, tuple(keys), tuple(cols)) for b, keys, cols in blocks]


def marks(rows: pd.DataFrame) -> tuple[str, ...]:
    """The per-step marks a frame carries, last in each record and row: ``integrity`` (how many
    of the trace's problem rows fall in the step) where the trace has any; a clean trace's
    records are as before."""
    column = rows.get("integrity")
    return ("integrity",) if column is not None and column.to_numpy().any() else ()


def step_records(
    rows: pd.DataFrame, mark_columns: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """The JSON ``steps`` records of a steps frame (one dict per row: output assembly): the
    scalars of :data:`RECORD_SCALARS`, ``attrs``, then the :func:`record_blocks`, then the
    marks (``mark_columns``: those of the whole frame, when ``rows`` is a slice of it)."""
    keys = [key for key, _ in RECORD_SCALARS]
    scalars = [rows[column].tolist() for _, column in RECORD_SCALARS]
    blocks = [
        (block, names, rows[list(cols)].to_numpy(dtype=np.int64).tolist())
        for block, names, cols in record_blocks(rows.columns)
    ]
    attrs = rows["attrs"].tolist()
    mark_columns = marks(rows) if mark_columns is None else mark_columns
    marked = [(m, rows[m].to_numpy(dtype=np.int64).tolist()) for m in mark_columns]
    records = []
    for i, values in enumerate(zip(*scalars)):
        record = dict(zip(keys, values))
        record["attrs"] = attrs[i]
        for block, names, matrix in blocks:
            record[block] = dict(zip(names, matrix[i]))
        for mark, values_of in marked:
            record[mark] = values_of[i]
        records.append(record)
    return records


def flat_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Per-step rows for CSV/Parquet: scalar columns plus ``<phase>_ns``, ``total_<p>_ns``,
    ``count_<p>``."""
    out = rows[list(FLAT_SCALARS)].rename(columns={"step": "index"}).copy()
    for phase in phases.ALL:
        out[f"{phase}_ns"] = rows[phase].to_numpy()
    for phase in phases.TOTALS:
        out[f"total_{phase}_ns"] = rows[f"total_{phase}"].to_numpy()
    for phase in phases.PRIORITY:
        out[f"count_{phase}"] = rows[f"count_{phase}"].to_numpy()
    for col in (*(c for c in COMM_COLUMNS if c in rows.columns), *marks(rows)):
        out[col] = rows[col].to_numpy()
    return out


# ---- JSON -> frame ---------------------------------------------------------------------------


def check_header(data: Any, path: Path | str | None = None) -> list[dict[str, Any]]:
    """The document's step list, after checking it is a breakdown of a schema this version reads."""
    if not isinstance(data, dict):
        raise VerifyprofError("not a breakdown: expected a JSON object", path)
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise VerifyprofError(
            f"not a verifyprof breakdown (schema {schema!r}, expected {SCHEMA})", path
        )
    major = schema.removeprefix(SCHEMA_PREFIX)
    if major != str(SUPPORTED_MAJOR):
        raise VerifyprofError(
            f"breakdown schema {schema!r} is not one this verifyprof reads ({SCHEMA})", path
        )
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise VerifyprofError("breakdown has no 'steps' list", path)
    if not steps:
        raise NoStepsError(
            "breakdown has no steps: nothing to model (check --range of `verifyprof breakdown`)",
            path,
        )
    return steps


def frame_from_json(data: Any, path: Path | str | None = None) -> BreakdownFrame:
    """A breakdown document (``breakdown --json``) read back into the steps frame, every step
    checked.

    A step that lacks a field, or holds a string, null or list where a number or object belongs,
    is an error naming the step and the field: the model never sees half a breakdown.
    """
    steps = check_header(data, path)
    columns: dict[str, list[Any]] = {f: [] for f in SCALAR_FIELDS}
    attrs: list[dict[str, str]] = []
    blocks = {
        "phases": list(phases.ALL),
        "totals": list(phases.TOTALS),
        "counts": list(phases.PRIORITY),
    }
    block_values: dict[str, list[list[int]]] = {b: [] for b in blocks}
    comm: list[list[int]] | None = []
    marked = any(isinstance(step, dict) and "integrity" in step for step in steps)
    integrity: list[int] = []
    for i, step in enumerate(steps):  # one record per step: input-sized, checked once
        if not isinstance(step, dict):
            raise VerifyprofError(f"breakdown step {i} is not an object", path)
        for key in ("name", "wall_ns", "phases"):
            if key not in step:
                raise VerifyprofError(f"breakdown step {i} lacks {key!r}", path)
        columns["name"].append(_string(step, "name", i, path))
        columns["text"].append(_string(step, "text", i, path, default=columns["name"][-1]))
        columns["mode"].append(_string(step, "mode", i, path, default="none"))
        columns["step"].append(_integer(step, "index", i, path, default=i))
        for name in INT_FIELDS:
            if name != "step":
                default = (
                    step.get("wall_ns")
                    if name in ("gpu_span_ns", "cost_ns")
                    else (-1 if name in ("rank", "device") else 0)
                )
                columns[name].append(_integer(step, name, i, path, default=default))
        attrs.append(_attrs(step, i, path))
        if marked:
            integrity.append(_integer(step, "integrity", i, path, default=0))
        for block, names in blocks.items():
            block_values[block].append(
                _int_block(step, block, names, i, path, required=block == "phases")
            )
        if comm is not None:
            if isinstance(step.get("comm"), dict):
                comm.append(_int_block(step, "comm", list(COMM_COLUMNS), i, path, required=False))
            else:
                comm = None
    frame = pd.DataFrame({f: columns[f] for f in SCALAR_FIELDS})
    for f in INT_FIELDS:
        frame[f] = frame[f].astype(np.int64)
    frame["attrs"] = pd.Series(attrs, dtype=object)
    _put_block(frame, list(phases.ALL), block_values["phases"])
    _put_block(frame, list(TOTAL_COLUMNS), block_values["totals"])
    _put_block(frame, list(COUNT_COLUMNS), block_values["counts"])
    if comm:
        _put_block(frame, list(COMM_COLUMNS), comm)
    if marked:
        frame["integrity"] = np.asarray(integrity, dtype=np.int64)
    check_steps(frame, path)  # wall > 0, end >= start, phases sum to the wall
    trace = data.get("trace") if isinstance(data.get("trace"), dict) else {}
    options = data.get("options") if isinstance(data.get("options"), dict) else {}
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else None
    if path is not None and not trace.get("path"):
        trace = dict(trace, path=[str(path)])
    return BreakdownFrame(steps=frame, trace=trace, options=options, summary=summary)


def _put_block(frame: pd.DataFrame, names: list[str], values: list[list[int]]) -> None:
    matrix = np.array(values, dtype=np.int64).reshape(len(frame), len(names))
    for j, name in enumerate(names):
        frame[name] = matrix[:, j]


def _where(i: int, key: str) -> str:
    return f"breakdown step {i}: {key!r}"


def _string(step: dict[str, Any], key: str, i: int, path: Any, default: str | None = None) -> str:
    value = step.get(key, default)
    if not isinstance(value, str):
        raise VerifyprofError(f"{_where(i, key)} must be a string, got {value!r:.60}", path)
    return value


def _integer(
    step: dict[str, Any], key: str, i: int, path: Any, default: Any = 0, where: str | None = None
) -> int:
    value = step.get(key, default)
    where = where or key
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise VerifyprofError(f"{_where(i, where)} must be an integer, got {value!r:.60}", path)
    if not -(2**62) <= value <= 2**62:
        raise VerifyprofError(f"{_where(i, where)} is out of range: {value}", path)
    if where not in SIGNED_FIELDS and value < 0:
        raise VerifyprofError(f"{_where(i, where)} must not be negative, got {value}", path)
    return value


def _attrs(step: dict[str, Any], i: int, path: Any) -> dict[str, str]:
    value = step.get("attrs") or {}
    if not isinstance(value, dict):
        raise VerifyprofError(f"{_where(i, 'attrs')} must be an object, got {value!r:.60}", path)
    return {str(k): str(v) for k, v in value.items()}


def _int_block(
    step: dict[str, Any], block: str, names: list[str], i: int, path: Any, required: bool
) -> list[int]:
    value = step.get(block)
    if value is None and not required:
        return [0] * len(names)
    if not isinstance(value, dict):
        raise VerifyprofError(
            f"{_where(i, block)} must be an object of integers, got {value!r:.60}", path
        )
    return [
        _integer(value, name, i, path, where=f"{block}.{name}") if name in value else 0
        for name in names
    ]
