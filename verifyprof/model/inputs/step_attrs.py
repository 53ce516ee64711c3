"""The step attributes the model reads (``tokens=4 bs=1 graph=1 sweep=1 accept_len=2``), as
columns of the steps frame."""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifyprof.contracts.ranges import CYCLE_WINDOW, phase_of
from verifyprof.contracts.schema import shared_objects


def with_attr_columns(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps with the attributes the model reads as columns: ``_width``, ``_batch``,
    ``_sweep``, ``_graph`` and ``_accept_len`` (NaN / None where a step does not say), and
    ``_phase``: the phase each step's name has in data/ranges.toml (``draft_propose`` is a
    draft), ``cycle`` for the derived cycle windows, "" for none. Each is worked out once per
    distinct attribute dict and step name, then spread over the steps (the steps of one range
    text share their dict: 6 dict objects for an 8-rank minute's 19k steps)."""
    attrs, codes = _attr_frame(steps["attrs"].tolist())
    out = steps.copy(deep=False)  # new columns only: the steps' own are shared, never written
    names, distinct = pd.factorize(out["name"], use_na_sentinel=False)
    phase = [("cycle" if n == CYCLE_WINDOW else phase_of(n) or "") for n in distinct]
    out["_phase"] = pd.Series(np.array(phase, dtype=object)[names], out.index, dtype=object)

    def spread(values: pd.Series) -> pd.Series:
        values = values.take(codes)
        values.index = out.index
        return values

    out["_width"] = spread(_first_number(attrs, ("tokens", "width", "num_tokens"), integer=True))
    out["_batch"] = spread(_first_number(attrs, ("bs", "batch"), integer=True))
    out["_accept_len"] = spread(_first_number(attrs, ("accept_len",), integer=False))
    out["_sweep"] = (
        attrs["sweep"].eq("1").to_numpy()[codes] if "sweep" in attrs else np.zeros(len(out), bool)
    )
    out["_graph"] = (
        spread(attrs["graph"].where(attrs["graph"].notna(), None))
        if "graph" in attrs
        else pd.Series([None] * len(out), index=out.index, dtype=object)
    )
    return out


def _attr_frame(objects: list) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct attribute dicts (by identity) as a frame, and each step's row in it."""
    if not objects:
        return pd.DataFrame(), np.zeros(0, np.int64)
    codes, firsts = shared_objects(objects)
    frame = pd.DataFrame.from_records([objects[i] for i in firsts])
    if len(frame) != len(firsts):  # dicts without a key: no columns, and no rows either
        frame = pd.DataFrame(index=pd.RangeIndex(len(firsts)))
    return frame, codes


def _first_number(attrs: pd.DataFrame, keys: tuple[str, ...], integer: bool) -> pd.Series:
    """Per step, the first of ``keys`` whose value parses as a number (int() of it for integers)."""
    found = pd.Series(np.nan, index=attrs.index, dtype=float)
    for key in reversed(keys):  # earlier keys win
        if key in attrs:
            values = pd.to_numeric(attrs[key], errors="coerce")
            values = np.trunc(values) if integer else values
            found = values.where(values.notna(), found)
    return found
