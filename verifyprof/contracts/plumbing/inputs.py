"""What a command reads, known before it writes anything.

* :class:`InputRegistry`: every file a run will read (the trace or traces, the files a folder or
  glob stands for, ``--manifest``, ``--taxonomy``, ``--prompts``, ``--hardware`` / ``--model``
  files, breakdown JSON, both sides of ``compare``), each with its role. ``check(output, option)``
  refuses an output that is one of them, however it is spelled (``./x``, a symlink: the resolved
  path; a hard link: the same ``(st_dev, st_ino)``), naming both. The run's registry is
  *active* (:func:`activate`): the atomic writer of
  :mod:`verifyprof.contracts.plumbing.outputs` asks it again at the moment it writes.
* :func:`check_file_option`: a file option that names a FIFO, a device, a socket or a directory
  is refused before anything opens it (``open()`` on a FIFO blocks until a writer comes,
  ``/dev/zero`` never ends).
* :func:`read_bytes` / :func:`read_text`: the one way a file read whole is read (taxonomy,
  manifest, prompts, breakdown JSON, TOML data files): opened without blocking, refused unless a
  regular file, at most ``limit`` bytes (gzip: decompressed size), UTF-8 decoded with a clear
  error. Every failure is a one-line :class:`VerifyprofError` naming the file.
* :func:`parse_json`: JSON text read so, Python's limits (huge numbers, deep nesting) one line.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError, path_problem

MiB = 1 << 20
TOML_LIMIT = 16 * MiB  # taxonomy, --hardware, --model, drafters, hook presets
MANIFEST_LIMIT = 16 * MiB  # a capture manifest, a program's results.json (decompressed size)
PROMPTS_LIMIT = 16 * MiB  # capture --prompts (JSONL)
BREAKDOWN_JSON_LIMIT = 1024 * MiB  # breakdown --json read back (whatif, compare, report)
_CHUNK = 1 * MiB

_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def require_regular(
    mode: int, path, directory: str | None, other: str, error: type = VerifyprofError
) -> None:
    """Refuse a directory (``directory``: the line; None: a directory is allowed) or anything
    else but a regular file (``other``), which would block or never end when read."""
    if stat.S_ISDIR(mode):
        if directory is not None:
            raise error(directory, path)
        return
    if not stat.S_ISREG(mode):
        raise error(other, path)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def _limit(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n:,} bytes"


# ---- reading a file whole ------------------------------------------------------------------


def read_bytes(
    path: str | Path, what: str, limit: int, *, gunzip: bool = False, missing: str = "no such file"
) -> bytes:
    """The bytes of ``path`` (a regular file, at most ``limit`` bytes; with ``gunzip`` a gzip file
    is decompressed, at most ``limit`` bytes of it), or VerifyprofError naming it."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise VerifyprofError(missing, path) from None
    except IsADirectoryError:
        raise VerifyprofError(f"is a directory, expected a {what} file", path) from None
    except OSError as exc:
        raise VerifyprofError(f"cannot read {what}: {_reason(exc)}", path) from None
    try:
        st = os.fstat(fd)
        require_regular(
            st.st_mode,
            path,
            f"is a directory, expected a {what} file",
            f"{kind_of(st.st_mode)}, not a regular file: a {what} is read from a file (this"
            " would block or never end)",
        )
        _check_size(st.st_size, what, limit, path)
        data = _read_at_most(fd, limit + 1, path, what)
    finally:
        os.close(fd)
    _check_size(len(data), what, limit, path)  # it grew while read
    if gunzip and data[:2] == b"\x1f\x8b":
        data = _gunzip(data, what, limit, path)
    return data


def read_text(
    path: str | Path, what: str, limit: int, *, gunzip: bool = False, missing: str = "no such file"
) -> str:
    """:func:`read_bytes` decoded as UTF-8; bad bytes are one line naming the first one."""
    data = read_bytes(path, what, limit, gunzip=gunzip, missing=missing)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerifyprofError(
            f"{what} is not UTF-8 text: {exc.reason} at byte {exc.start}", path
        ) from None


def parse_json(raw: bytes | str, what: str, path: Path) -> Any:
    """``json.loads``, with Python's own limits one line naming the file: a number of more
    digits than ``int()`` converts (its ValueError) and nesting deeper than the recursion limit
    (RecursionError). Not valid JSON (``json.JSONDecodeError``, ``UnicodeDecodeError``) is left
    to the caller, whose message names what it expected."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        digits = sys.get_int_max_str_digits()
        raise VerifyprofError(
            f"{what} holds a number of more than {digits} digits: not a number to read", path
        ) from None
    except RecursionError:
        raise VerifyprofError(
            f"{what} is nested too deeply to read (no writer nests so)", path
        ) from None


def _reason(exc: OSError) -> str:
    return path_problem(exc)


def _check_size(size: int, what: str, limit: int, path: Path) -> None:
    if size > limit:
        raise VerifyprofError(
            f"{what} is {size:,} bytes, more than the {_limit(limit)} a {what} may be", path
        )


def _read_at_most(fd: int, most: int, path: Path, what: str) -> bytes:
    chunks: list[bytes] = []
    got = 0
    try:
        while got < most:
            chunk = os.read(fd, min(_CHUNK, most - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise VerifyprofError(f"cannot read {what}: {_reason(exc)}", path) from None
    return b"".join(chunks)


def _gunzip(data: bytes, what: str, limit: int, path: Path) -> bytes:
    """Decompressed, never more than ``limit + 1`` bytes held (a gzip bomb is refused by size)."""
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, limit + 1)
    except zlib.error as exc:
        raise VerifyprofError(f"cannot read {what}: corrupt gzip ({exc})", path) from None
    if len(out) > limit:
        raise VerifyprofError(
            f"{what} is more than {_limit(limit)} decompressed, the most a {what} may be", path
        )
    if not inflate.eof:
        raise VerifyprofError(f"cannot read {what}: truncated gzip", path)
    return out


# ---- file options ------------------------------------------------------------------------


def check_file_option(path: str | Path, option: str) -> os.stat_result | None:
    """``path`` given to ``option`` can be read as a file: a regular file (symlinks followed), or
    missing (None: the reader says so, in its words). FIFOs, devices, sockets and directories are
    refused now, before anything opens them."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise VerifyprofError(f"{option}: cannot access: {_reason(exc)}", path) from None
    require_regular(
        st.st_mode,
        path,
        f"{option} is a directory, expected a file",
        f"{option} is {kind_of(st.st_mode)}, not a regular file (reading it would block or"
        " never end)",
    )
    return st


# ---- the run's inputs ------------------------------------------------------------------------


@dataclass
class InputRegistry:
    """Every file one run reads, by resolved path and by ``(st_dev, st_ino)``, with its role."""

    by_path: dict[str, tuple[Path, str]] = field(default_factory=dict)
    by_id: dict[tuple[int, int], tuple[Path, str]] = field(default_factory=dict)

    def add(self, path: str | Path, role: str) -> None:
        """Register ``path`` (as the user spelled it) as read in ``role`` ("the trace",
        "the --taxonomy file", "the capture folder's manifest", ...). A file that does not
        exist yet is kept by path: the reader will say it is missing."""
        path = Path(path)
        entry = (path, role)
        self.by_path.setdefault(os.path.realpath(path), entry)
        try:
            st = os.stat(path)
        except OSError:
            return
        self.by_id.setdefault((st.st_dev, st.st_ino), entry)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, (str, Path)) and self.role_of(path) is not None

    def role_of(self, path: str | Path) -> tuple[Path, str] | None:
        """(the input as given, its role) when ``path`` is one of the inputs, else None."""
        hit = self.by_path.get(os.path.realpath(path))
        if hit is not None:
            return hit
        try:
            st = os.stat(path)
        except OSError:
            return None
        hit = self.by_id.get((st.st_dev, st.st_ino))
        return hit if hit is not None and _same_file(hit[0], st) else None

    def check(self, output: str | Path | None, option: str | None = None) -> None:
        """VerifyprofError naming ``output`` (as given), ``option`` and the input it would
        overwrite; nothing when ``output`` is None or no input."""
        if output is None:
            return
        hit = self.role_of(output)
        if hit is None:
            return
        given, role = hit
        same = os.path.normpath(given) == os.path.normpath(output)
        what = role if same else f"{role}, {given}"
        writer = f"{option} would" if option else "would"
        raise VerifyprofError(f"{writer} overwrite an input of this command ({what})", output)


def _same_file(path: Path, st: os.stat_result) -> bool:
    """``path`` is still the file ``st`` describes (an input deleted since, its inode reused by
    a new file, is no longer an input)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


_active: InputRegistry | None = None


def activate(registry: InputRegistry | None) -> None:
    """Make ``registry`` the one the atomic writer consults (one run at a time: the next run's
    registry replaces it, so nothing accumulates in a long-lived process)."""
    global _active
    _active = registry


def check_output(path: str | Path) -> None:
    """The atomic writer's question: is ``path`` an input of the active run?"""
    if _active is not None:
        _active.check(path)
