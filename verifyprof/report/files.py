"""Output files, written atomically (temp file in the same directory, then rename): a crash or
Ctrl-C never leaves a half-written report where a good one was."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import pandas as pd

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.schema import flat_rows


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success it replaces ``path`` in one rename."""
    path = Path(path)
    if path.exists() and path.is_dir():
        raise VerifyprofError("is a directory, expected a file to write", path)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise VerifyprofError(f"cannot write: {exc.strerror}", path) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def dumps(data: Any) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(dumps(data) + b"\n")


def print_json(data: Any, stream: IO[str] | None = None) -> None:
    (stream or sys.stdout).write(dumps(data).decode() + "\n")


def stream_breakdown_json(result: Any, stream: IO[bytes]) -> None:
    """``result.to_json()`` written piecewise: same bytes once parsed, but step records are
    made and serialised a batch at a time, so a million-kernel trace's output never sits in
    memory as one object tree."""
    options = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    header = orjson.dumps(result.header(), option=options)
    stream.write(header[:-1] + b',"steps":[')
    first = True
    for batch in result.step_record_batches():
        if batch:
            body = orjson.dumps(batch, option=options)[1:-1]
            stream.write(body if first else b"," + body)
            first = False
    stream.write(b'],"summary":' + orjson.dumps(result.summary(), option=options) + b"}\n")


def print_breakdown_json(result: Any) -> None:
    sys.stdout.flush()
    stream_breakdown_json(result, sys.stdout.buffer)
    sys.stdout.buffer.flush()


def step_frame(result: Any) -> pd.DataFrame:
    """Per-step rows for CSV/Parquet (the schema's flat form)."""
    return flat_rows(result.steps)


def write_steps_csv(result: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        step_frame(result).to_csv(tmp, index=False)


def write_steps_parquet(result: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        step_frame(result).to_parquet(tmp, index=False)
