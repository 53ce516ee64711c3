"""The step attributes the model reads (``tokens=4 bs=1 graph=1 sweep=1 accept_len=2``), as
columns of the steps frame."""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifyprof.contracts.ranges import CYCLE_WINDOW, phase_of


def with_attr_columns(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps with the attributes the model reads as columns: ``_width``, ``_batch``,
    ``_sweep``, ``_graph`` and ``_accept_len`` (NaN / None where a step does not say), and
    ``_phase``: the phase each step's name has in data/ranges.toml (``draft_propose`` is a
    draft), ``cycle`` for the derived cycle windows, "" for none."""
    attrs = (
        pd.DataFrame.from_records(steps["attrs"].tolist(), index=steps.index)
        if len(steps)
        else pd.DataFrame(index=steps.index)
    )
    out = steps.copy()
    lookup = {n: "cycle" if n == CYCLE_WINDOW else phase_of(n) or "" for n in out["name"].unique()}
    out["_phase"] = out["name"].map(lookup).astype(object)
    out["_width"] = _first_number(attrs, ("tokens", "width", "num_tokens"), integer=True)
    out["_batch"] = _first_number(attrs, ("bs", "batch"), integer=True)
    out["_accept_len"] = _first_number(attrs, ("accept_len",), integer=False)
    out["_sweep"] = (
        attrs["sweep"].eq("1").to_numpy() if "sweep" in attrs else np.zeros(len(out), bool)
    )
    out["_graph"] = (
        attrs["graph"].where(attrs["graph"].notna(), None)
        if "graph" in attrs
        else pd.Series([None] * len(out), index=out.index, dtype=object)
    )
    return out


def _first_number(attrs: pd.DataFrame, keys: tuple[str, ...], integer: bool) -> pd.Series:
    """Per step, the first of ``keys`` whose value parses as a number (int() of it for integers)."""
    found = pd.Series(np.nan, index=attrs.index, dtype=float)
    for key in reversed(keys):  # earlier keys win
        if key in attrs:
            values = pd.to_numeric(attrs[key], errors="coerce")
            values = np.trunc(values) if integer else values
            found = values.where(values.notna(), found)
    return found
