"""The folder Python puts first on ``sys.path`` for a command, found the way the interpreter does.

``python script.py`` starts with the script's directory, ``python -m pkg.mod`` and ``python -c``
with the current directory; ``-I``/``-P`` (and ``PYTHONSAFEPATH``) add nothing. The hooks are
installed before that happens (``sitecustomize`` runs first), so a target in the program's own
modules is resolved lazily (pending until imported); this module lets ``verifyprof hooks`` and
``verifyprof capture`` look where the program will look when they check targets beforehand, and
say which module the program runs as ``__main__`` (:func:`is_main_module`: never hookable).
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


def _is_python(command: str) -> bool:
    name = Path(command).name
    return bool(_PYTHON.match(name)) or os.path.realpath(command) == os.path.realpath(
        sys.executable
    )


def program_folder(
    argv: Sequence[str], cwd: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The folder ``argv`` (a command line) starts ``sys.path`` with; None when that is not known
    (not a Python interpreter nor a ``.py`` script) or when it adds none (``-I``, ``-P``)."""
    cwd = Path(cwd or os.getcwd())
    kind, value, safe = _command(argv, environ)
    if kind is None or (safe and kind != "exec"):
        return None
    if kind in ("script", "exec"):
        return (cwd / value).resolve().parent
    return cwd.resolve()  # -m, -c and the interactive interpreter: the current folder


def is_main_module(
    module: str,
    argv: Sequence[str],
    cwd: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Whether ``module`` is what ``argv`` runs as ``__main__`` (the script, found by name or by
    file; ``-m pkg.mod``; ``pkg.__main__`` for ``-m pkg`` on a package; the script a launcher such
    as ``torchrun`` runs in each worker). Its functions are defined while it runs, after the hooks
    are installed: they can never be wrapped. Decided from the file system, never by importing."""
    cwd = Path(cwd or os.getcwd())
    kind, value, safe = _command(argv, environ)
    if kind == "module" and value in LAUNCHER_MODULES or kind is None and _is_launcher(argv):
        kind, value = "script", _launched_script(argv)
    if kind in ("script", "exec") and value:
        script = (cwd / value).resolve()
        folders = [script.parent, cwd] if not safe else [cwd]
        return module == script.stem or module_file(module, folders) == script
    if kind == "module" and value:
        folders = ([] if safe else [cwd]) + [Path(p) for p in sys.path if p]
        return module == (f"{value}.__main__" if _is_package(value, folders) else value)
    return False


LAUNCHERS = {"torchrun", "deepspeed"}  # run a script in each worker process, as __main__
LAUNCHER_MODULES = {"torch.distributed.run", "torch.distributed.launch"}


def _is_launcher(argv: Sequence[str]) -> bool:
    name = Path(argv[0]).name if argv else ""
    return name in LAUNCHERS or (name == "accelerate" and len(argv) > 1 and argv[1] == "launch")


def _launched_script(argv: Sequence[str]) -> str:
    """The launcher's script: its first ``.py`` argument (its own options come before it)."""
    return next((a for a in argv[1:] if a.endswith(".py")), "")


def module_file(module: str, folders: Sequence[Path]) -> Path | None:
    """The source file of ``module`` (``a/b.py`` or ``a/b/__init__.py``) in the first of ``folders``
    that has one, found on disk as the import system would, without importing it."""
    for base in folders:
        path = base.joinpath(*module.split("."))
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate.resolve()
    return None


def _is_package(module: str, folders: Sequence[Path]) -> bool:
    """Whether ``module`` names a package (a folder; ``-m`` then runs its ``__main__``), looked up
    as the import system would find it first, without importing it."""
    for base in folders:
        path = base.joinpath(*module.split("."))
        if path.with_suffix(".py").is_file():
            return False
        if path.is_dir() and ((path / "__init__.py").is_file() or (path / "__main__.py").is_file()):
            return True
    return False


def _command(
    argv: Sequence[str], environ: Mapping[str, str] | None
) -> tuple[str | None, str, bool]:
    """(kind, value, safe path) of a command line: ``exec`` (an executable ``.py``), ``script``,
    ``module`` (``-m``), ``code`` (``-c``), ``interactive``, or None (not Python). Short options
    combine as the interpreter reads them (``-um pkg``, ``-Wignore``, ``-IX dev``)."""
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
        if arg == "--check-hash-based-pycs":
            i += 2
            continue
        if arg.startswith("--"):  # --version, --help: no value
            i += 1
            continue
        if not arg.startswith("-") or arg == "-":
            return "script", arg, safe
        for j, flag in enumerate(arg[1:], start=1):
            rest = arg[j + 1 :]
            if flag in "mc":  # the rest of the word, or the next one, is its argument
                value = rest or (argv[i + 1] if i + 1 < len(argv) else "")
                return ("module" if flag == "m" else "code"), value, safe
            if flag in "WX":  # takes a value: the rest of the word, or the next one
                i += 0 if rest else 1
                break
            if flag in "IP":
                safe = True
        i += 1
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
