"""Every file verifyprof writes goes through here: atomically (a temp file beside the target,
fsynced, then one rename, then the directory fsynced), so a crash, Ctrl-C or power loss never
leaves half a report or half a manifest where a good one was."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError


def _fsync_path(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (os.O_DIRECTORY if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError:
        if not directory:  # some filesystems refuse fsync on a directory; the data is synced
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temp path beside ``path`` to write; on success it is fsynced and replaces ``path``
    in one rename. On any failure the temp file is removed and ``path`` is untouched."""
    path = Path(path)
    if path.is_dir():
        raise VerifyprofError("is a directory, expected a file to write", path)
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=parent)
    except OSError as exc:
        raise VerifyprofError(f"cannot write: {exc.strerror}", path) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        _fsync_path(tmp)
        os.replace(tmp, path)
        _fsync_path(parent, directory=True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: str | Path, data: Any, *, indent: int | None = 2, default: Any = None) -> None:
    """``data`` as JSON plus a newline (stdlib formatting: ``indent``, ``default`` for odd values)."""
    write_text(path, json.dumps(data, indent=indent, default=default) + "\n")
