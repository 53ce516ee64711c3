"""Find and read verifyprof's data files: built-in ones, a user directory, or a given path.

Hardware specs, model configs, hook presets and the kernel taxonomy are TOML, not code, so users
describe their own box, model, server or kernels without touching verifyprof: put the file in
``$VERIFYPROF_DATA_DIR`` (default ``~/.config/verifyprof/``) at the place it has under
``verifyprof/data/`` (``hardware/NAME.toml``, ``models/NAME.toml``, ``hooks/NAME.toml``,
``taxonomy.toml``), or pass the file's path. User files shadow built-in ones.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.contracts.inputs import TOML_LIMIT, read_text

BUILTIN = Path(__file__).resolve().parent.parent / "data"


def user_dir() -> Path:
    env = os.environ.get("VERIFYPROF_DATA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".config" / "verifyprof"


def search_dirs(kind: str) -> list[Path]:
    """Where ``kind`` ("hardware" | "models" | "hooks") files are looked up, first match wins."""
    return [user_dir() / kind, BUILTIN / kind]


def locate(relative: str | Path) -> Path | None:
    """The user's file at ``relative`` (e.g. ``taxonomy.toml``, ``hooks/sglang.toml``) if there
    is one, else the built-in one, else None."""
    for root in (user_dir(), BUILTIN):
        if (root / relative).is_file():
            return root / relative
    return None


def names(kind: str) -> list[str]:
    """The stems of every ``kind`` file, user and built-in."""
    return sorted({p.stem for d in search_dirs(kind) if d.is_dir() for p in d.glob("*.toml")})


def read_toml(path: Path) -> dict[str, Any]:
    text = read_text(path, "TOML file", TOML_LIMIT)  # a regular file, size-checked, UTF-8
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise VerifyprofError(f"not valid TOML: {exc}", path) from None


def catalogue(kind: str, skip: tuple[str, ...] = ()) -> dict[str, Path]:
    """Every lookup key (file stem, ``name``, ``aliases``; lower-case) -> file, user files first."""
    found: dict[str, Path] = {}
    for directory in reversed(search_dirs(kind)):  # built-in first, user entries overwrite
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
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
            f"unknown {kind} {text!r}: known are {', '.join(stems)} (or give a TOML file; user"
            f" files go in {user_dir() / kind})"
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
