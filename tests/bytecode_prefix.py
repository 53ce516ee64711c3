"""Bytecode for the suite's interpreters where the environment forbids writing it.

With ``PYTHONDONTWRITEBYTECODE`` set (many CI images and sandbox shells set it, to keep
``__pycache__`` out of the checkout) every interpreter the suite starts (4 workers, a few hundred
real ``verifyprof`` processes) compiled the project's modules from source again, and pytest
rewrote every test module again: ~0.2 s of CPU per CLI process and ~6 s per worker, a tenth of
the suite. :func:`outside_the_tree` sends bytecode to one folder outside the checkout instead
(``PYTHONPYCACHEPREFIX``): the checkout stays as clean as the setting asked.
"""

from __future__ import annotations

import os
import site
import sys
import tempfile
from pathlib import Path

SEEDED = ".seeded"  # in the prefix: the installed bytecode is linked in already


def outside_the_tree() -> None:
    """Called in the controller before xdist starts its workers, so they and every process the
    tests start inherit it. A prefix the user chose is kept; nothing changes without the
    setting."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(
        Path(tempfile.gettempdir()) / f"verifyprof-tests-pycache-{os.getuid()}"
    )
    try:
        _seed(Path(prefix))
    except OSError:  # a prefix that cannot be written: bytecode stays off, as the setting asked
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix  # this process's own imports from here on
    sys.dont_write_bytecode = False  # pytest's rewritten test modules are cached too


def _seed(prefix: Path) -> None:
    """Links the bytecode installed beside the standard library and site-packages into a new
    prefix, once: with a prefix set Python looks for bytecode only there, and a fresh one would
    otherwise have every process compile torch and pandas (~10 s of CPU each) until one had
    written them. A link Python finds stale it replaces with a file of its own (an atomic
    rename: the installed file is never written)."""
    if (prefix / SEEDED).exists():
        return
    tag = f".{sys.implementation.cache_tag}.pyc"
    roots = {os.path.dirname(os.__file__), *site.getsitepackages()}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            if os.path.basename(folder) != "__pycache__":
                continue
            into = prefix / os.path.dirname(folder).lstrip(os.sep)
            into.mkdir(parents=True, exist_ok=True)
            for name in files:
                if name.endswith(tag):
                    _link(os.path.join(folder, name), into / name)
    (prefix / SEEDED).touch()


def _link(source: str, link: Path) -> None:
    """A hard link (no space of its own), or a symbolic one across file systems."""
    try:
        os.link(source, link)
    except FileExistsError:
        pass
    except OSError:
        try:
            link.symlink_to(source)
        except FileExistsError:
            pass
