"""Find and read verifyprof's data files: built-in ones, a user directory, or a given path.

Hardware specs, model configs, hook presets and the kernel taxonomy are TOML, not code, so users
describe their own box, model, server or kernels without touching verifyprof: put the file in
``$VERIFYPROF_DATA_DIR`` (default ``~/.config/verifyprof/``) at the place it has under
``verifyprof/data/`` (``hardware/NAME.toml``, ``models/NAME.toml``, ``hooks/NAME.toml``,
``taxonomy.toml``), or pass the file's path. User files shadow built-in ones.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from verifyprof.contracts.errors import VerifyprofError, path_error, path_problem
from verifyprof.contracts.plumbing.inputs import TOML_LIMIT, read_text

BUILTIN = Path(__file__).resolve().parent.parent / "data"


def user_dir() -> Path:
    env = os.environ.get("VERIFYPROF_DATA_DIR")
    if env:
        return Path(env).expanduser()
    try:
        return Path.home() / ".config" / "verifyprof"
    except RuntimeError:  # no HOME and no password entry (a container's arbitrary uid)
        return BUILTIN / "no-user-folder"  # never there: built-in files only


def search_dirs(kind: str) -> list[Path]:
    """Where ``kind`` ("hardware" | "models" | "hooks") files are looked up, first match wins."""
    return [user_dir() / kind, BUILTIN / kind]


def _is(test: str, path: Path) -> bool:
    """``path.is_file()`` / ``is_dir()``, where a user folder that cannot be searched (a service
    user's HOME, ``sudo -u`` with HOME kept) is one line naming it and what to do, not a
    traceback nor a silently ignored file of the user's."""
    try:
        return getattr(path, test)()
    except PermissionError as exc:
        fix = (
            "VERIFYPROF_DATA_DIR names it"
            if os.environ.get("VERIFYPROF_DATA_DIR")
            else "the folder is under HOME; set VERIFYPROF_DATA_DIR to a readable one"
        )
        raise VerifyprofError(
            f"cannot look for verifyprof's user data files: {path_problem(exc, path)} ({fix})",
            path,
        ) from None


def locate(relative: str | Path) -> Path | None:
    """The user's file at ``relative`` (e.g. ``taxonomy.toml``, ``hooks/sglang.toml``) if there
    is one, else the built-in one, else None."""
    for root in (user_dir(), BUILTIN):
        if _is("is_file", root / relative):
            return root / relative
    return None


def names(kind: str) -> list[str]:
    """The stems of every ``kind`` file, user and built-in."""
    return sorted({p.stem for d in search_dirs(kind) if _is("is_dir", d) for p in _toml_files(d)})


def _toml_files(directory: Path) -> list[Path]:
    try:
        return sorted(directory.glob("*.toml"))
    except OSError as exc:
        raise path_error(exc, directory, "cannot list the data folder: ") from None


T = TypeVar("T")
_READ: dict[tuple[Any, ...], Any] = {}  # (what, file identity) -> what the file held, parsed


def read_once(path: Path, what: str, parse: Callable[[Path], T]) -> T:
    """``parse(path)``, made once per process for each version of the file: a command that asks
    for the same data file from several places (the catalogue, then the hit; both sides of a
    comparison; every candidate) reads it once. The key is the file's identity (inode, size,
    modification time), so a file written again is read again; a file that cannot be read is
    never remembered (its error is raised at each ask)."""
    try:
        info = path.stat()
    except OSError:
        return parse(path)  # the reader names the problem
    key = (what, str(path.absolute()), info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _READ:
        _READ[key] = parse(path)
    return _READ[key]


def _parse_toml(path: Path) -> dict[str, Any]:
    text = read_text(path, "TOML file", TOML_LIMIT)  # a regular file, size-checked, UTF-8
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise VerifyprofError(f"not valid TOML: {exc}", path) from None


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML data file's tables, read once per process (:func:`read_once`); a copy, so that no
    caller's edit reaches the next."""
    return copy.deepcopy(read_once(path, "toml", _parse_toml))


def catalogue(kind: str, skip: tuple[str, ...] = ()) -> dict[str, Path]:
    """Every lookup key (file stem, ``name``, ``aliases``; lower-case) -> file, user files first."""
    found: dict[str, Path] = {}
    for directory in reversed(search_dirs(kind)):  # built-in first, user entries overwrite
        if not _is("is_dir", directory):
            continue
        for path in _toml_files(directory):
            if path.stem in skip:
                continue
            keys = {path.stem.lower()}
            try:
                data = read_toml(path)
            except VerifyprofError:
                data = {}  # reported when this file is actually asked for
            if isinstance(data.get("name"), str):
                keys.add(data["name"].lower())
            keys.update(a.lower() for a in data.get("aliases", []) if isinstance(a, str))
            for key in keys:
                found[key] = path
    return found


def resolve(kind: str, spec: str | Path, skip: tuple[str, ...] = ()) -> Path:
    """A path to an existing file, or a name / alias of a known one."""
    text = str(spec)
    path = Path(text).expanduser()
    if path.suffix == ".toml" or os.sep in text or path.is_file():
        if not path.is_file():
            raise VerifyprofError(f"no such {kind} file", path)
        return path
    known = catalogue(kind, skip)
    hit = known.get(text.lower())
    if hit is None:
        stems = sorted({p.stem for p in known.values()})
        raise VerifyprofError(
            f"unknown {kind.removesuffix('s')} {text!r}: known are {', '.join(stems)} (or give a"
            f" TOML file; user files go in {user_dir() / kind})"
        )
    return hit


def require(
    data: dict[str, Any], key: str, path: Path, kind: type | tuple[type, ...] = (int, float)
) -> Any:
    """A field that must be present, with a one-line error naming the file and the field."""
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise VerifyprofError(f"missing field {key!r}", path)
        node = node[part]
    if not isinstance(node, kind) or isinstance(node, bool) and kind is not bool:
        raise VerifyprofError(f"field {key!r} has the wrong type ({type(node).__name__})", path)
    return node
