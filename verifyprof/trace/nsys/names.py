"""A kernel's name, from whichever of the export's name columns resolves.

nsys writes a kernel's name as ids into ``StringIds``: ``demangledName`` (read first),
``shortName`` and ``mangledName``. An id that is NULL or names no row of ``StringIds`` (a damaged
or hand-edited export) would make the kernel ``<string N>``, classified ``other`` with no word
said. Such a row takes its name from the next column that resolves, and the rows are counted
(integrity kind ``unnamed``, a warning line); when no kernel has a name at all, the export is
refused: a breakdown of nameless kernels would be all ``other``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from verifyprof.contracts.errors import TraceError
from verifyprof.trace.integrity import Problem
from verifyprof.trace.nsys.export import NsysExport, NsysStrings

NAME_COLUMNS = ("demangledName", "shortName", "mangledName")  # in the order they are tried
ALIASES = ("name", "name2", "name3")  # what the kernel query (and its fallback reads) call them


def name_columns(export: NsysExport, table: str) -> dict[str, str]:
    """Query alias -> column: the name columns the table has, in :data:`NAME_COLUMNS` order
    (an alias with no column left selects NULL)."""
    have = [c for c in NAME_COLUMNS if c in set(export.cols(table))]
    return {alias: (have[i] if i < len(have) else "") for i, alias in enumerate(ALIASES)}


def kernel_name_ids(
    ids: np.ndarray,
    names: NsysStrings,
    columns: dict[str, str],
    fallback: Callable[[str], np.ndarray],
    where: tuple[np.ndarray, ...],
    path,
) -> tuple[np.ndarray, list[Problem]]:
    """Trace string ids of the kernels' names (``ids``: the first name column's nsys ids), and
    the integrity record of those whose first name column resolved to nothing (``where``: the
    rows' starts and devices, for the steps it marks). ``fallback(alias)`` reads a further name
    column for every row, only when some row is left unnamed. TraceError when no kernel has a
    name in any column."""
    mapped = names.map(ids)
    unnamed = _unresolved(ids, names)
    if not unnamed.any():
        return mapped, []
    first_bad = unnamed.copy()
    taken: dict[str, int] = {}
    for alias in ALIASES[1:]:
        if not columns[alias] or not unnamed.any():
            continue
        todo = np.flatnonzero(unnamed)
        alt = fallback(alias)[todo]
        alt_mapped = names.map(alt)
        ok = ~_unresolved(alt, names)
        mapped[todo[ok]] = alt_mapped[ok]
        unnamed[todo[ok]] = False
        if ok.any():
            taken[columns[alias]] = int(ok.sum())
    if unnamed.all():
        tried = ", ".join(c for c in columns.values() if c) or "no name column"
        raise TraceError(
            f"no kernel has a name: every kernel's name id ({tried}) is NULL or absent from"
            " StringIds (a damaged export; export the .nsys-rep again)",
            path,
        )
    left = int(unnamed.sum())
    return mapped, [_problem(ids, first_bad, taken, left, columns["name"], where)]


def _unresolved(ids: np.ndarray, names: NsysStrings) -> np.ndarray:
    """NULL ids and ids that name no row of StringIds (``names.map`` has looked them up)."""
    dangling = np.fromiter(names.dangling, np.int64, len(names.dangling))
    return (ids < 0) | np.isin(ids, dangling)


def _problem(
    ids: np.ndarray,
    bad: np.ndarray,
    taken: dict[str, int],
    left: int,
    column: str,
    where: tuple[np.ndarray, ...],
) -> Problem:
    """The record: how many rows, the first one's id, what each fallback column named."""
    at = np.flatnonzero(bad)
    first = int(ids[at[0]])
    what = "NULL" if first < 0 else f"id {first}, not in StringIds"
    parts = [f"{column} {what}"]
    parts += [f"{n} named from {c}" for c, n in taken.items()]
    parts += [f"{left} left without a name (<string N>)"] if left else []
    start, device = where
    return Problem("unnamed", "kernels", len(at), len(ids), "; ".join(parts), start[at], device[at])
