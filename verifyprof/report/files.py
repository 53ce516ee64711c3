"""Report files: breakdown JSON, per-step CSV/Parquet. Every one is written through
:mod:`verifyprof.contracts.plumbing.outputs` (atomic, fsynced), so a crash or Ctrl-C never leaves a
half-written report where a good one was."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson
import pandas as pd

from verifyprof.contracts.bounds import require_finite
from verifyprof.contracts.plumbing.outputs import atomic_path, stdout_bytes, write_bytes
from verifyprof.contracts.plumbing.text import undecodable_data
from verifyprof.contracts.plumbing.threads import ahead
from verifyprof.contracts.schema import flat_rows
from verifyprof.report.step_json import steps_json_batches

STEP_BATCH = 8192  # step rows encoded at a time: bounds the output's working memory
STEP_BATCHES_AHEAD = 4  # batches encoded while the summary is summed, before a byte is written


def dumps(data: Any) -> bytes:
    require_finite(data, "the JSON output")  # orjson would write NaN and infinity as null
    option = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    try:
        return orjson.dumps(data, option=option)
    except TypeError:  # a text quoting a file name that is not UTF-8: its bytes as \xff
        return orjson.dumps(undecodable_data(data), option=option)


def write_json(path: Path, data: Any) -> None:
    write_bytes(path, dumps(data) + b"\n")


def print_json(data: Any, stream: IO[str] | None = None) -> None:
    if stream is not None:
        stream.write(dumps(data).decode() + "\n")
        return
    with stdout_bytes() as out:
        out.write(dumps(data) + b"\n")


def stream_breakdown_json(
    result: Any, stream: IO[bytes], after: dict[str, Any] | None = None
) -> None:
    """``result.to_json()`` written piecewise: same bytes once parsed, but the steps are
    encoded a batch of rows at a time (column-wise, :mod:`~verifyprof.report.step_json`), so a
    million-kernel trace's output never sits in memory as one object tree. The first batches
    are encoded in a thread while this one sums the summary (Arrow's casts and joins run
    without the GIL), at most :data:`STEP_BATCHES_AHEAD` of them held. ``after``: keys
    written after the summary (``breakdown``'s verdict)."""
    options = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    batches = steps_json_batches(result.steps, STEP_BATCH)
    with ahead(batches, STEP_BATCHES_AHEAD, "verifyprof-json") as bodies:
        head, summary, after = result.header(), result.summary(), after or {}
        # before a byte
        require_finite({"trace": head, "summary": summary, **after}, "the breakdown JSON")
        header = orjson.dumps(head, option=options)
        stream.write(header[:-1] + b',"steps":[')
        for body in bodies:
            stream.write(body)
    stream.write(b'],"summary":' + orjson.dumps(summary, option=options))
    for key, value in after.items():
        stream.write(b"," + orjson.dumps(key) + b":" + orjson.dumps(value, option=options))
    stream.write(b"}\n")


def print_breakdown_json(result: Any, after: dict[str, Any] | None = None) -> None:
    with stdout_bytes() as out:
        stream_breakdown_json(result, out, after)


def step_frame(result: Any) -> pd.DataFrame:
    """Per-step rows for CSV/Parquet (the schema's flat form)."""
    return flat_rows(result.steps)


def write_steps_csv(result: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        step_frame(result).to_csv(tmp, index=False)


def write_steps_parquet(result: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        step_frame(result).to_parquet(tmp, index=False)
