"""The names a user types, as paths: the one place they are resolved (issue 34).

A name can hold any bytes the OS allows (``t\\377.sqlite.gz``): Python hands it over as text
with each byte that is not UTF-8 kept as a surrogate escape (``'\\udcff'``), and every ``os``
call turns it back into the same bytes. What must not happen is encoding it as UTF-8 text:
hashing it, quoting it into a URI, printing it. :func:`name_bytes` and :func:`sqlite_uri` are
the byte-exact forms; :func:`verifyprof.contracts.plumbing.text.safe_text` prints such a byte as
``\\xff``, as it prints a control character.

A name can also be relative to a working directory that no longer exists (``mkdir gone && cd
gone && rmdir ../gone``). Nothing relative can be opened there, and ``Path.resolve()`` raises,
so :func:`user_path` refuses such a name in one line, before anything is read or written, and
an absolute name is read as anywhere else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.plumbing.text import undecodable_escaped

STDOUT = "-"  # an output option's name for standard output: no path, no folder needed


def working_directory() -> Path | None:
    """The working directory, or None when it was deleted (or cannot be named)."""
    try:
        return Path(os.getcwd())
    except OSError:  # FileNotFoundError: deleted; EACCES: a parent cannot be searched
        return None


def user_path(name: str | os.PathLike[str] | bytes, option: str | None = None) -> Path:
    """``name`` as typed, as a :class:`~pathlib.Path` every command can open, or one line
    saying why it cannot be: a relative name in a deleted working directory. ``option`` (e.g.
    ``"--csv"``) names where it was given."""
    text = os.fsdecode(os.fspath(name))
    path = Path(text)
    if text == STDOUT or path.is_absolute() or working_directory() is not None:
        return path
    given = f"{option} " if option else ""
    raise VerifyprofError(
        f"{given}is relative to the working directory, which no longer exists (deleted):"
        " give an absolute path, or cd to a folder that exists",
        path,
    )


def user_paths(
    names: Iterable[str | os.PathLike[str] | bytes | None], option: str | None = None
) -> list[Path]:
    """:func:`user_path` for each name given (None: an option not given, skipped)."""
    return [user_path(name, option) for name in names if name is not None]


def name_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a name as the OS has them (for a hash or a key): never a UTF-8 encoding
    error, whatever bytes it holds."""
    return os.fsencode(os.fspath(path))


def sqlite_uri(path: str | os.PathLike[str], query: str = "mode=ro&immutable=1") -> str:
    """An SQLite ``file:`` URI for ``path`` (made absolute), every byte of its name kept:
    ``%``-quoted from the name's bytes, so ``?``, ``#``, ``%`` and bytes that are not UTF-8
    open the same file."""
    absolute = os.path.abspath(os.fspath(path))
    return f"file:{quote(name_bytes(absolute))}?{query}"


def shown(path: str | os.PathLike[str] | bytes) -> str:
    """A name as text that any encoder takes (JSON, HTML, Arrow, a terminal): each byte that is
    not UTF-8 written ``\\xff``, as messages write it; everything else as it is (a control
    character is the JSON encoder's or the console's to escape)."""
    return undecodable_escaped(os.fsdecode(os.fspath(path)))


def is_pattern(name: str | os.PathLike[str]) -> bool:
    """Whether a name the user gave is a glob to expand (``*``, ``?``, ``[``): not when a file or
    folder of that very name exists (``run[2]``, a name holding ``ESC [``), which is read as
    named."""
    text = os.fsdecode(os.fspath(name))
    return any(ch in text for ch in "*?[") and not os.path.lexists(text)
