"""Message sizes of a Kineto file's collective kernels (``collective_args`` before the merge).

NCCL kernels carry their message in ``args`` (``In msg nelems``, ``dtype``, ``Group size``);
collective kernels without them (symmetric-memory, one/two-shot, fused allreduces) take the
first tensor of the ``cpu_op`` that launched them, joined on ``External id``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifyprof.trace.collectives import dtype_bytes
from verifyprof.trace.events import NO_ID
from verifyprof.trace.kineto.decode import EventFields, decode_raw
from verifyprof.trace.kineto.fields import EventGroups, Table, ids, numbers

# Kernels that perform a collective without NCCL's args (symmetric-memory, custom one/two-shot,
# fused allreduces): their size is the tensor of the op that launched them.
COLLECTIVE_KERNEL = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|multimem|cross_device_reduce|one_?shot|two_?shot|lamport",
    re.IGNORECASE,
)


@dataclass
class CollectiveArgs:
    """Message sizes of some of a file's kernels (``kernel``: row in the file's kernel table)."""

    kernel: np.ndarray
    nbytes: np.ndarray
    out_bytes: np.ndarray
    group_size: np.ndarray
    names: list[
        str
    ]  # the collective as the trace names it ("allreduce", "_allgather_base", an op name)


def file_collective_args(
    rows: EventFields, events: list, kernels: Table, ok: np.ndarray, groups: EventGroups
) -> CollectiveArgs | None:
    """NCCL kernels carry their message in ``args`` (``In msg nelems``, ``dtype``, ...); other
    collective kernels take the first tensor of the ``cpu_op`` that launched them (same External
    id).
    """
    if not events:
        return None
    args = rows.args(events)
    in_nelems = numbers(rows.column(args, "in_nelems"))
    row_of = np.cumsum(ok) - 1  # event index -> row in the kernel table (events without ts dropped)
    nccl = np.flatnonzero(np.isfinite(in_nelems) & ok)
    kernel = [row_of[nccl]]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, list]] = []
    if len(nccl):
        sub = [args[i] for i in nccl.tolist()]  # the collective kernels only
        size = _per_value(rows.column(sub, "dtype"), dtype_bytes).astype(np.int64)
        out_nelems = numbers(rows.column(sub, "out_nelems"))
        nbytes = np.where(size > 0, in_nelems[nccl] * size, NO_ID)
        out_bytes = np.where(
            (size > 0) & np.isfinite(out_nelems), np.nan_to_num(out_nelems) * size, NO_ID
        )
        group = ids(rows.column(sub, "group_size"))
        names = _per_value(
            rows.column(sub, "collective_name"), lambda n: n if isinstance(n, str) else ""
        ).tolist()
        parts.append((nbytes.astype(np.int64), out_bytes.astype(np.int64), group, names))
    by_op = _op_launched(rows, args, kernels, ok, in_nelems, groups)
    if by_op is not None:
        kernel.append(by_op[0])
        parts.append(by_op[1:])
    if not parts:
        return None
    return CollectiveArgs(
        kernel=np.concatenate(kernel).astype(np.int64),
        nbytes=np.concatenate([p[0] for p in parts]),
        out_bytes=np.concatenate([p[1] for p in parts]),
        group_size=np.concatenate([p[2] for p in parts]).astype(np.int32),
        names=[n for p in parts for n in p[3]],
    )


def _per_value(values: list, fn) -> np.ndarray:
    """``fn`` of each value, computed once per distinct value (unhashable ones give fn(None))."""
    series = pd.Series(
        [v if isinstance(v, (str, int, float)) or v is None else None for v in values], dtype=object
    )
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    mapped = np.asarray([fn(u) for u in uniques] + [fn(None)], dtype=object)
    return mapped[np.where(codes >= 0, codes, len(uniques))]


def _op_launched(
    rows: EventFields,
    args: list,
    kernels: Table,
    ok: np.ndarray,
    in_nelems: np.ndarray,
    groups: EventGroups,
):
    """(kernel rows, bytes, out bytes, group size, names) for collective kernels without NCCL
    args."""
    uniques = kernels.names.uniques
    collective_names = np.array(
        [bool(COLLECTIVE_KERNEL.search(u)) for u in uniques] + [False]
    )  # once per name
    codes = kernels.names.codes
    wanted_rows = np.flatnonzero(collective_names[np.where(codes >= 0, codes, len(uniques))])
    if not len(wanted_rows):
        return None
    event_index = np.flatnonzero(ok)[wanted_rows]
    keep = ~np.isfinite(in_nelems[event_index])
    event_index, wanted_rows = event_index[keep], wanted_rows[keep]
    ops = groups.role("op") if len(event_index) else []
    if not ops:
        return None
    external = ids(rows.column([args[i] for i in event_index.tolist()], "external_id"))
    op_args = rows.args(ops)
    op_external = ids(rows.column(op_args, "external_id"))
    launched = np.flatnonzero(np.isin(op_external, external[external != NO_ID]))
    if not len(launched):
        return None
    chosen = [
        op_args[i] for i in launched.tolist()
    ]  # the few ops that launched a collective kernel
    sizes = [
        _first_tensor_bytes(d, t)
        for d, t in zip(rows.column(chosen, "input_dims"), rows.column(chosen, "input_type"))
    ]
    op_names = rows.column([ops[i] for i in launched.tolist()], "name")
    by_external = pd.DataFrame(
        {"bytes": [NO_ID if b is None else b for b in sizes], "name": op_names},
        index=op_external[launched],
    )
    by_external = by_external[
        ~by_external.index.duplicated(keep="first") & (by_external["bytes"].to_numpy() > 0)
    ]
    found = by_external.reindex(external)
    hit = ~found["bytes"].isna().to_numpy()
    if not hit.any():
        return None
    nbytes = found["bytes"].to_numpy()[hit].astype(np.int64)
    names = [n if isinstance(n, str) else "" for n in found["name"].to_numpy()[hit]]
    return (
        wanted_rows[hit],
        nbytes,
        nbytes.copy(),
        np.full(len(nbytes), NO_ID, dtype=np.int32),
        names,
    )  # allreduce: out = in


def _first_tensor_bytes(dims_value, types_value) -> int | None:
    """Bytes of an op's first tensor input (``Input Dims`` / ``Input type``): dims product x dtype
    size."""
    dims, types = decode_raw(dims_value), decode_raw(types_value)
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    for shape, dtype in zip(dims, types):
        if isinstance(shape, list) and shape and all(isinstance(d, int) and d >= 0 for d in shape):
            size = dtype_bytes(dtype)
            return math.prod(shape) * size if size > 0 else None
    return None
