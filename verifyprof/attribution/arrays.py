"""numpy helpers for the attribution's hot paths: the few distinct values of a large integer array
(devices, processes) and the rows of each, by hashing and one radix sort instead of a full sort
or a pass per value. Each returns exactly what the numpy expression it names returns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

CODE_TABLE_MAX = 1 << 20  # values below this are coded through a lookup table
# what pandas makes of a column of Python strings (pandas 3: its Arrow-backed str dtype)
TEXT_DTYPE = pd.Series(np.array(["-"], dtype=object)).dtype


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``: hashed, then only the distinct values sorted (integers; other
    dtypes take ``np.unique``)."""
    if values.dtype.kind not in "iu" or not len(values):
        return np.unique(values)
    return np.sort(pd.unique(values))


def codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of a 1-d array: the inverse through a lookup
    table where the values are small non-negative integers."""
    unique = distinct(values)
    if values.dtype.kind not in "iu" or not len(unique) or unique[0] < 0:
        return np.unique(values, return_inverse=True)
    if int(unique[-1]) >= CODE_TABLE_MAX:
        return np.unique(values, return_inverse=True)
    table = np.zeros(int(unique[-1]) + 1, np.intp)
    table[unique] = np.arange(len(unique))
    return unique, table[values]


def narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as int16 where every value fits (numpy radix-sorts 16-bit ints), else as is."""
    fits = len(values) and -(2**15) <= int(values.min()) and int(values.max()) < 2**15
    return values.astype(np.int16) if fits else values


def rows_by_value(values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Each distinct value, ascending, with its rows, ascending: ``np.flatnonzero(values == v)``
    for every ``v`` in ``np.unique(values)`` (integers), from one stable sort."""
    if len(values) == 0:
        return []
    small = narrow(values)
    order = np.argsort(small, kind="stable")  # a radix sort for 16-bit ints
    if len(order) < 2**31:  # half the memory while the caller holds the rows
        order = order.astype(np.int32)
    ordered = small[order]
    heads = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    del ordered
    starts = [0, *heads.tolist()]
    ends = [*heads.tolist(), len(order)]
    return [(int(values[order[h]]), order[h:e]) for h, e in zip(starts, ends)]


def dense_unique(values: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for ints in ``[0, bound)``, by a presence table
    instead of a sort (values are rows of the API table)."""
    seen = np.zeros(bound, bool)
    seen[values] = True
    rank = np.cumsum(seen, dtype=np.int64)
    rank -= 1
    return np.flatnonzero(seen), rank[values]


def text_column(
    labels: list[str] | pa.Array, code: np.ndarray
) -> pd.api.extensions.ExtensionArray | np.ndarray:
    """``np.array(labels, dtype=object)[code]`` as pandas would store it in a frame: built in
    Arrow from the few labels (a take), not converted string by string."""
    if TEXT_DTYPE == np.dtype(object):
        listed = labels.to_pylist() if isinstance(labels, pa.Array) else labels
        return np.array(listed, dtype=object)[code]
    arrow = labels if isinstance(labels, pa.Array) else pa.array(labels, pa.string())
    return pd.array(arrow.take(pa.array(code)), dtype=TEXT_DTYPE)
