"""Dotted targets (``module:Class.method``) patched in place, now or when their module is imported.

Importing a target's module to patch it would change the host program (and SGLang's modules are
heavy), so a target whose module is not imported yet is patched by a ``sys.meta_path`` finder
(:mod:`~verifyprof.capture.hooks.import_watch`) right after the module executes, before any
``from module import name`` elsewhere can copy the original. Targets whose module is already
imported are patched at once, and then the stale copies bound by ``from X import Y`` in other
modules (listed ``bindings``, plus any module of the same top-level package holding the very
same object) are replaced too. What a target names, and finding it in a module:
:mod:`~verifyprof.capture.hooks.lookup`.

Nothing here raises into the host program: a target that cannot be found is recorded as missing
(with one warning when the user named it explicitly) and skipped.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from verifyprof.capture.hooks import compile_patch, import_watch
from verifyprof.capture.hooks.lookup import Target, not_found, pending_detail, resolve, unsupported
from verifyprof.capture.hooks.wrappers import (
    FIRST_FIRE_LISTENERS,
    Rule,
    hooked,
    wrap_function,
)
from verifyprof.contracts.plumbing.text import safe_lines


class HookWarning(RuntimeWarning):
    """A hook target could not be patched; the host program runs on without that range."""


@dataclass(frozen=True)
class HookStatus:
    """One target as the current process sees it (``verifyprof hooks check``-style report)."""

    target: str
    ranges: tuple[str, ...]  # range names its rules can open
    # "patched" | "pending" (module not imported yet) | "absent" | "missing" |
    # "unsupported"
    state: str
    detail: str = ""
    bindings: tuple[str, ...] = ()  # other modules whose copy of the function was replaced
    sources: tuple[str, ...] = ()  # the preset entries / user hooks that asked for it
    calls: tuple[tuple[str, int], ...] = ()  # (source, ranges opened so far) per source that fired

    def to_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "ranges": list(self.ranges),
            "state": self.state,
            "detail": self.detail,
            "bindings": list(self.bindings),
            "sources": list(self.sources),
            "calls": dict(self.calls),
        }


@dataclass
class _Patch:
    target: Target
    rules: list[Rule] = field(default_factory=list)
    bindings: list[str] = field(default_factory=list)
    warn_missing: bool = False
    state: str = "pending"
    detail: str = ""
    owner: Any = None  # the module or class whose attribute was replaced
    raw: Any = None  # the attribute as it was in owner.__dict__ (None: inherited, we shadowed it)
    shadowed: bool = False
    function: Any = None  # the original function (unwrapped from staticmethod/classmethod)
    wrapper: Any = None
    rebound: list[tuple[Any, str, Any]] = field(default_factory=list)  # (module, name, original)


_lock = threading.RLock()
_patches: dict[Target, _Patch] = {}
_warned: set[str] = set()
_listeners: list[Callable[[], None]] = []


def add_listener(callback: Callable[[], None]) -> None:
    """``callback()`` after every change of a target's state (used to keep a report file
    current)."""
    with _lock:
        if callback not in _listeners:
            _listeners.append(callback)


def _notify(*_: object) -> None:
    global _watched_names
    _watched_names = None
    for callback in list(_listeners):
        try:
            callback()
        except Exception:
            pass


def _warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    warn(message, stacklevel=4)


def warn(message: str, stacklevel: int = 3) -> None:
    """A HookWarning, shown in the CLI's style (:func:`_hook_warnings_in_our_style`)."""
    if getattr(warnings.formatwarning, "__wrapped__", None) is None:
        warnings.formatwarning = _hook_warnings_in_our_style(warnings.formatwarning)
    warnings.warn(message, HookWarning, stacklevel=stacklevel)


def _hook_warnings_in_our_style(fmt: Callable[..., str]) -> Callable[..., str]:
    """``warnings.formatwarning`` that writes a HookWarning as verifyprof's CLI writes its own, one
    ``verifyprof: warning: ...`` line (line breaks kept, control characters escaped), not as
    Python's ``file:line: HookWarning`` with a source line of ours; other warnings as before.
    Filters and ``catch_warnings(record=True)`` still apply (``verifyprof hooks`` ignores them:
    they are rows of its report)."""

    def formatted(message, category, filename, lineno, line=None):  # type: ignore[no-untyped-def]
        if not issubclass(category, HookWarning):
            return fmt(message, category, filename, lineno, line)
        return f"verifyprof: warning: {safe_lines(str(message)).removeprefix('verifyprof: ')}\n"

    formatted.__wrapped__ = fmt  # type: ignore[attr-defined]
    return formatted


def request(
    target: Target, rule: Rule, bindings: Iterable[str] = (), warn_missing: bool = False
) -> HookStatus:
    """Hooks ``target`` with ``rule`` now, or when its module is imported. Idempotent."""
    with _lock:
        patch = _patches.get(target)
        if patch is None:
            patch = _patches[target] = _Patch(target)
        patch.warn_missing = patch.warn_missing or warn_missing
        new_rule = rule not in patch.rules
        if new_rule:
            patch.rules.append(rule)
        for name in bindings:
            if name not in patch.bindings:
                patch.bindings.append(name)
        if patch.state == "patched":
            if new_rule:
                hooked(patch.wrapper).add_rule(rule)
            _rebind(patch, patch.bindings)
        elif target.module in sys.modules:
            _apply(patch, sys.modules[target.module], scan_package=True)
            watch_torch()
        else:
            # Pending, never missing for good: the module may become importable later (Python puts
            # a script's folder on sys.path after sitecustomize ran; programs extend sys.path). A
            # target an earlier ``check`` found absent is asked for again: it waits once more.
            import_watch.install(_watched, _on_imported)
            patch.state, patch.detail = "pending", pending_detail(target)
            watch_torch()
        _notify()
        return _status(patch)


def _apply(patch: _Patch, module: Any, scan_package: bool) -> None:
    target = patch.target
    try:
        owner, name, raw, inherited = resolve(module, target.qualname)
    except AttributeError:
        # A preset lists names of several versions: one this version lacks is expected ("absent").
        # Our own words: Python's, asked while the module still executes, blame a circular import.
        patch.state, patch.detail = (
            ("missing" if patch.warn_missing else "absent"),
            not_found(module, target.qualname),
        )
        if patch.warn_missing:
            _warn_once(
                str(target), f"verifyprof: hook target {target} not found ({patch.detail}); skipped"
            )
        return
    in_class = isinstance(owner, type)
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    function = raw.__func__ if kind is not None else raw
    problem = unsupported(function)
    if problem is not None:
        patch.state, patch.detail = "unsupported", f"{target} {problem}"
        _warn_once(str(target), f"verifyprof: hook target {patch.detail}; skipped")
        return
    state = hooked(function)
    if state is not None and state.wrapper is function:  # already a verifyprof wrapper: add rules
        for rule in patch.rules:
            state.add_rule(rule)
        patch.state, patch.wrapper = "patched", function
        patch.function = state.original
        return
    wrapper = function
    for rule in patch.rules:
        wrapper = wrap_function(wrapper, rule)
    if kind is not None:
        new = kind(wrapper)
    elif in_class and not inspect.isfunction(function):
        new = staticmethod(wrapper)  # a builtin stored on a class does not bind self; keep it so
    else:
        new = wrapper
    try:
        setattr(owner, name, new)
    except (AttributeError, TypeError) as exc:
        patch.state, patch.detail = "unsupported", f"cannot set {target}: {exc}"
        _warn_once(str(target), f"verifyprof: hook target {patch.detail}; skipped")
        return
    if in_class and kind is not staticmethod:
        hooked(wrapper).offset = 1  # arg0 is the first argument after self (or cls)
    patch.owner, patch.raw, patch.shadowed = owner, raw, inherited
    patch.function, patch.wrapper = function, wrapper
    patch.state, patch.detail = "patched", ""
    if not in_class:
        _rebind(patch, patch.bindings)
        if scan_package:
            prefix = target.module.partition(".")[0]
            _rebind(
                patch, [m for m in list(sys.modules) if m == prefix or m.startswith(prefix + ".")]
            )


def _rebind(patch: _Patch, module_names: Iterable[str]) -> None:
    """Replaces copies of the original function bound under the same name in other modules."""
    if patch.state != "patched" or isinstance(patch.owner, type):
        return
    name = patch.target.qualname.rpartition(".")[2]
    for module_name in module_names:
        module = sys.modules.get(module_name)
        if module is None or module is patch.owner:
            if module is None and module_name in patch.bindings:
                import_watch.install(_watched, _on_imported)
            continue
        try:
            if getattr(module, name, None) is patch.function:
                setattr(module, name, patch.wrapper)
                patch.rebound.append((module, name, patch.function))
        except Exception:
            continue


_torch_patched = False  # torch.compile replaced (compile_patch.py), once torch is imported
_torch_wanted = False  # something is hooked: replace torch.compile when torch is imported


def watch_torch() -> None:
    """Make ``torch.compile`` of a hooked function keep its range: now if torch is loaded, else
    when it is imported (the finder watches ``torch`` until then)."""
    global _torch_patched, _torch_wanted, _watched_names
    _torch_wanted = True
    if _torch_patched:
        return
    if "torch" in sys.modules:
        compile_patch.patch_torch(sys.modules["torch"])
        _torch_patched = True
    else:
        import_watch.install(_watched, _on_imported)
        _watched_names = None


def _on_imported(module_name: str, module: Any) -> None:
    """Called by the finder right after ``module_name`` executed."""
    global _torch_patched
    if module_name == "torch" and not _torch_patched:
        compile_patch.patch_torch(module)
        _torch_patched = True
    with _lock:
        changed = False
        for patch in list(_patches.values()):
            if patch.target.module == module_name and patch.state == "pending":
                _apply(patch, module, scan_package=False)
                changed = True
            elif module_name in patch.bindings and patch.state == "patched":
                _rebind(patch, [module_name])
                changed = True
        if changed:
            _notify()


# recomputed after any change (find_spec runs per import)
_watched_names: frozenset[str] | None = None


def _watched() -> frozenset[str]:
    global _watched_names
    if _watched_names is None:
        names = {"torch"} if _torch_wanted and not _torch_patched else set()
        for patch in _patches.values():
            if patch.state == "pending":
                names.add(patch.target.module)
            names.update(patch.bindings)
        _watched_names = frozenset(names)
    return _watched_names


def _status(patch: _Patch) -> HookStatus:
    ranges = tuple(dict.fromkeys(rule.range_name for rule in patch.rules))
    rebound = tuple(sorted({module.__name__ for module, _, _ in patch.rebound}))
    sources = tuple(dict.fromkeys(rule.label for rule in patch.rules if rule.label))
    state = hooked(patch.wrapper) if patch.wrapper is not None else None
    calls = tuple((label, n) for label, n in (state.counts.items() if state else ()) if n)
    return HookStatus(str(patch.target), ranges, patch.state, patch.detail, rebound, sources, calls)


def run_as_main(is_main: Callable[[str], bool], detail: Callable[[str], str]) -> None:
    """The program runs some module as ``__main__`` (``is_main`` says which): its pending targets,
    preset or user, can never be patched (its functions are defined as it runs), so they are not
    imported to be checked either (that would run the program's top level): they are missing."""
    with _lock:
        for patch in _patches.values():
            if patch.state == "pending" and is_main(patch.target.module):
                patch.state = "missing"
                patch.detail = detail(patch.target.module)
        _notify()


def import_pending() -> None:
    """Imports the module of every pending target (``check``); one that cannot be imported makes
    its targets absent (preset alternatives) or missing (user targets), with the reason."""
    for module_name in sorted(
        {p.target.module for p in list(_patches.values()) if p.state == "pending"}
    ):
        try:
            importlib.import_module(module_name)
        except BaseException as exc:  # noqa: BLE001 - a module may raise anything at import
            if isinstance(exc, KeyboardInterrupt):
                raise
            with _lock:
                for patch in _patches.values():
                    if patch.target.module == module_name and patch.state == "pending":
                        patch.state = "missing" if patch.warn_missing else "absent"
                        reason = f"cannot import {module_name}: {type(exc).__name__}: {exc}"
                        patch.detail = reason.splitlines()[0]
                _notify()


def statuses() -> list[HookStatus]:
    with _lock:
        return [_status(p) for p in _patches.values()]


def restore_all() -> None:
    """Puts every original back and forgets all targets (tests; a clean uninstall)."""
    with _lock:
        for patch in reversed(list(_patches.values())):
            if patch.state != "patched" or patch.owner is None:
                continue
            name = patch.target.qualname.rpartition(".")[2]
            try:
                if patch.shadowed:
                    delattr(patch.owner, name)
                else:
                    setattr(patch.owner, name, patch.raw)
            except Exception:
                pass
            for module, attr, original in patch.rebound:
                try:
                    setattr(module, attr, original)
                except Exception:
                    pass
        _patches.clear()
        _warned.clear()
        _listeners.clear()
        _notify()
        import_watch.uninstall()
        global _torch_patched, _torch_wanted
        if _torch_patched and "torch" in sys.modules:
            compile_patch.unpatch_torch(sys.modules["torch"])
        _torch_patched = _torch_wanted = False


FIRST_FIRE_LISTENERS.append(_notify)  # a target's first range: rewrite the report (its calls)
