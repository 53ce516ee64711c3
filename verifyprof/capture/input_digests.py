"""Fingerprints of the files a captured command names (issue 41): two captures whose commands
differ only in the path of an input (each ``capture --batches`` run handed its own copy of one
prompts file) are of one program when the files' contents are the same. Taken before the program
starts, relative paths from the directory it runs in."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from verifyprof.contracts.command_record import argument_value

WHOLE = 64 << 20  # files up to this size are hashed whole
ENDS = 1 << 20  # larger ones (checkpoints): their size and first and last MiB


def input_digests(target: list[str], cwd: Path | None = None) -> list[dict]:
    """Per argument after the first that names a regular file (``PATH`` or ``--opt=PATH``): its
    index in ``target``, size and digest (``sha256:`` of the whole file, ``sha256-ends:`` of its
    size and ends). Unreadable paths are left out: a fingerprint is evidence, never a need."""
    out = []
    for index, arg in enumerate(target[1:], start=1):
        value = argument_value(arg)
        found = _fingerprint(Path(value) if cwd is None else cwd / value) if value else None
        if found is not None:
            out.append({"arg": index, "bytes": found[0], "digest": found[1]})
    return out


def file_digest(path: Path) -> str | None:
    """One file's fingerprint, as :func:`input_digests` takes it; None where it is no regular
    file that can be read (a fingerprint is evidence, never a need)."""
    found = _fingerprint(path)
    return None if found is None else found[1]


def _fingerprint(path: Path) -> tuple[int, str] | None:
    """(size, digest) of a regular file; None for anything else, or one that cannot be read."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None
        return info.st_size, _digest(path, info.st_size)
    except (OSError, ValueError):  # ValueError: a NUL in the argument
        return None


def _digest(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        if size <= WHOLE:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return f"sha256:{h.hexdigest()}"
        h.update(str(size).encode())
        h.update(f.read(ENDS))
        f.seek(size - ENDS)
        h.update(f.read(ENDS))
        return f"sha256-ends:{h.hexdigest()}"
