"""The ``sys.meta_path`` finder that lets :mod:`~verifyprof.capture.hooks.targets` patch a module
right after it executes, before any ``from module import name`` elsewhere can copy the original.

It finds nothing itself: for a watched module name it asks the other finders for the spec and
wraps the loader's ``exec_module``. Nothing here raises into the host program.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable
from typing import Any


class _LoaderProxy:
    def __init__(self, loader: Any, exec_module: Callable[[Any], None]):
        self._loader = loader
        self.exec_module = exec_module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the other finders, then patches the module after it executes."""

    def __init__(
        self, watched: Callable[[], frozenset[str]], on_imported: Callable[[str, Any], None]
    ) -> None:
        self._busy = threading.local()
        self._watched = watched
        self._on_imported = on_imported

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if getattr(self._busy, "on", False):
            return None
        if fullname not in self._watched():
            return None
        self._busy.on = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        except Exception:
            return None
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        _patch_after_exec(spec, self._on_imported)
        return spec

    def invalidate_caches(self) -> None:
        pass


def _patch_after_exec(spec: Any, on_imported: Callable[[str, Any], None]) -> None:
    loader = spec.loader
    original_exec = loader.exec_module
    name = spec.name
    own_attribute = not isinstance(loader, type)

    def exec_module(module: Any) -> None:
        try:
            original_exec(module)
        finally:
            if own_attribute:
                loader.__dict__.pop("exec_module", None)
        try:
            on_imported(name, module)
        except Exception:
            pass

    if own_attribute:
        try:
            loader.exec_module = exec_module
            return
        except (AttributeError, TypeError):
            own_attribute = False
    spec.loader = _LoaderProxy(loader, exec_module)


_finder: _PatchOnImport | None = None


def install(watched: Callable[[], frozenset[str]], on_imported: Callable[[str, Any], None]) -> None:
    """Put the finder first on ``sys.meta_path`` (once): a module named in ``watched()`` gets
    ``on_imported(name, module)`` called right after it executes."""
    global _finder
    if _finder is None:
        _finder = _PatchOnImport(watched, on_imported)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
