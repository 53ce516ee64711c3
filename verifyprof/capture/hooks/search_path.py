"""The folder Python puts first on ``sys.path`` for a command, found the way the interpreter does.

``python script.py`` starts with the script's directory, ``python -m pkg.mod`` and ``python -c``
with the current directory; ``-I``/``-P`` (and ``PYTHONSAFEPATH``) add nothing. The hooks are
installed before that happens (``sitecustomize`` runs first), so a target in the program's own
modules is resolved lazily (pending until imported); this module lets ``verifyprof hooks`` and
``verifyprof capture`` look where the program will look when they check targets beforehand.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_TAKES_VALUE = {"-W", "-X", "--check-hash-based-pycs"}  # interpreter options followed by a value


def _is_python(command: str) -> bool:
    name = Path(command).name
    return bool(_PYTHON.match(name)) or os.path.realpath(command) == os.path.realpath(sys.executable)


def program_folder(argv: Sequence[str], cwd: str | Path | None = None,
                   environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder ``argv`` (a command line) starts ``sys.path`` with; None when that is not known
    (not a Python interpreter nor a ``.py`` script) or when it adds none (``-I``, ``-P``)."""
    cwd = Path(cwd or os.getcwd())
    kind, value, safe = _command(argv, environ)
    if kind is None or (safe and kind != "exec"):
        return None
    if kind in ("script", "exec"):
        return (cwd / value).resolve().parent
    return cwd.resolve()  # -m, -c and the interactive interpreter: the current folder


def main_module(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> str | None:
    """The module name of what ``argv`` runs as ``__main__``: ``pkg.mod`` for ``-m pkg.mod``, the
    script's stem for ``script.py``; None for ``-c``, the interactive interpreter or other programs.
    Its functions are defined while it runs, after the hooks are installed: they cannot be hooked."""
    kind, value, _ = _command(argv, environ)
    if kind in ("script", "exec"):
        return Path(value).stem if Path(value).stem.isidentifier() else None
    return value if kind == "module" else None


def _command(argv: Sequence[str], environ: Mapping[str, str] | None) -> tuple[str | None, str, bool]:
    """(kind, value, safe path) of a command line: ``exec`` (an executable ``.py``), ``script``,
    ``module`` (``-m``), ``code`` (``-c``), ``interactive``, or None (not Python)."""
    environ = os.environ if environ is None else environ
    if not argv:
        return None, "", False
    first = argv[0]
    if first.endswith(".py"):  # an executable script with a #! line
        return "exec", first, False
    if not _is_python(first):
        return None, "", False
    safe = bool(environ.get("PYTHONSAFEPATH"))
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-m", "-c"):
            return ("module" if arg == "-m" else "code"), (argv[i + 1] if i + 1 < len(argv) else ""), safe
        if arg in _TAKES_VALUE:
            i += 2
            continue
        if arg.startswith("-") and arg != "-":
            if not arg.startswith("--") and ("I" in arg[1:] or "P" in arg[1:]):
                safe = True
            if arg.startswith(("-m", "-c")) and len(arg) > 2:  # -mpkg.mod, -c'code'
                return ("module" if arg.startswith("-m") else "code"), arg[2:], safe
            i += 1
            continue
        return "script", arg, safe
    return "interactive", "", safe


def importable_from(module: str, folders: Sequence[Path]) -> bool:
    """Whether the top-level package of ``module`` is in one of ``folders`` or importable here."""
    top = module.partition(".")[0]
    if top in sys.modules:
        return True
    if importlib.machinery.PathFinder.find_spec(top, [str(f) for f in folders]) is not None:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False
