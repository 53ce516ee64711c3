"""What a hook target names (``module:Class.method``) and finding it in a module: the
attribute to replace, which part is missing, and whether it can be hooked at all. No state: the
patching (:mod:`~verifyprof.capture.hooks.targets`) holds that.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from dataclasses import dataclass
from typing import Any

_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Target:
    module: str
    qualname: str

    @classmethod
    def parse(cls, text: str) -> Target:
        """``package.module:Class.method`` or ``package.module:function``; ValueError says what is
        wrong."""
        module, sep, qualname = text.strip().partition(":")
        if not sep:
            raise ValueError(
                f"target {text!r} has no ':' between module and name (e.g. pkg.mod:Class.method)"
            )
        if not _DOTTED.match(module):
            raise ValueError(f"target {text!r}: {module!r} is not a dotted module name")
        if not _DOTTED.match(qualname):
            raise ValueError(f"target {text!r}: {qualname!r} is not a dotted attribute name")
        return cls(module, qualname)

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}"


def pending_detail(target: Target) -> str:
    try:
        found = importlib.util.find_spec(target.module.partition(".")[0]) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return f"module {target.module} not imported yet"
    return (
        f"module {target.module} not importable yet (patched if a later sys.path makes it"
        " importable)"
    )


def resolve(module: Any, qualname: str) -> tuple[Any, str, Any, bool]:
    """(owner, attribute, raw attribute, inherited) for ``qualname`` in ``module``."""
    parts = qualname.split(".")
    owner = module
    for part in parts[:-1]:
        owner = getattr(owner, part)
    name = parts[-1]
    if isinstance(owner, type):
        if name in owner.__dict__:
            return owner, name, owner.__dict__[name], False
        return owner, name, inspect.getattr_static(owner, name), True
    return owner, name, getattr(owner, name), False


def not_found(module: Any, qualname: str) -> str:
    """Which part of ``qualname`` the module lacks (a package: where its ``__main__.py``'s would
    be)."""
    owner, path = module, module.__name__
    for part in qualname.split("."):
        if not hasattr(owner, part):
            package = path == module.__name__ and getattr(module, "__path__", None) is not None
            return f"{path} has no attribute {part!r}" + (
                f" (one in its __main__.py: {path}.__main__:{qualname})" if package else ""
            )
        owner, path = getattr(owner, part), f"{path}.{part}"
    return f"{module.__name__} has no attribute {qualname!r}"


def unsupported(function: Any) -> str | None:
    """Why ``function`` (the attribute, unwrapped from staticmethod/classmethod) cannot be hooked;
    None if it can."""
    if isinstance(function, type) or not callable(function):
        return "is not a function or method"
    if (
        inspect.iscoroutinefunction(function)
        or inspect.isgeneratorfunction(function)
        or inspect.isasyncgenfunction(function)
    ):
        return "is a coroutine or generator function: a range around its call would measure nothing"
    return None
