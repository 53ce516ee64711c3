"""Wrappers that put a call (or the forwards of a module during a call) inside a verifyprof range.

One wrapper per hooked function, holding an ordered list of rules: the first rule whose
predicate holds names the range (``ModelRunner.forward`` is ``verify`` in TARGET_VERIFY mode,
``decode`` in DECODE mode, nothing otherwise). A range never opens inside an open range of the
same name on the same thread, so a subclass calling ``super()`` of a hooked method, or a hooked
helper called from a hooked step, gives one range, the outermost.

Wrappers never break the host program: predicates and extractors that raise are ignored, and
the wrapped function is called exactly once with the original arguments. While Dynamo traces
(``torch.compile``), a wrapper emits nothing and only calls the original, so a hooked function
inside a compiled region is traced as if unhooked; ``torch.compile`` of a wrapper itself is
handled by :mod:`~verifyprof.capture.hooks.compile_patch` (the range stays on the host around the
compiled callable).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verifyprof.capture.hooks.extractors import Call
from verifyprof.contracts.plumbing import nvtx
from verifyprof.contracts.ranges import SPEC_STEP, range_text

MARK = "__verifyprof_hook__"  # attribute on every wrapper: its HookedFunction


@dataclass(frozen=True)
class Rule:
    """``range_name`` around a call when ``when(call)`` holds, attributes from ``attrs(call)``."""

    range_name: str
    when: Callable[[Call], bool] | None = None
    attrs: Callable[[Call], dict[str, object]] | None = None
    self_forward: bool = False  # range each forward of the receiver module during the call instead
    label: str = ""  # where the rule came from (preset entry or user spec), for reports


class _Active(threading.local):
    def __init__(self) -> None:
        self.names: list[str] = []  # open verifyprof ranges on this thread, innermost last


_active = _Active()


def active_ranges() -> tuple[str, ...]:
    """The verifyprof ranges open on this thread, outermost first (for tests and diagnostics)."""
    return tuple(_active.names)


_texts: dict[
    tuple, str
] = {}  # (name, attrs...) -> range text: formatting costs more than the range


def _text(name: str, attrs: Callable[[Call], dict[str, object]], call: Call) -> str:
    """The range text for this call; just ``name`` when the extractor fails."""
    try:
        values = attrs(call)
        key = (name, *values.items())
        try:
            return _texts[key]
        except KeyError:
            if len(_texts) > 4096:  # attribute values are meant to be few (bs, width); stay bounded
                _texts.clear()
            text = _texts[key] = range_text(name, **values)
            return text
        except TypeError:  # an unhashable attribute value
            return range_text(name, **values)
    except Exception:
        return name


def _signature_params(fn: Callable) -> list[inspect.Parameter]:
    """The parameters of ``fn``; for a ``*args, **kwargs`` wrapper (a ``torch.compile`` result,
    a decorator) those of the function it wraps, so lookups by name and position still work."""
    seen = 0
    while fn is not None and seen < 8:
        try:
            params = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
        except (TypeError, ValueError):
            params = []
        if any(p.kind in _POSITIONAL for p in params):
            return params
        fn = getattr(fn, "_torchdynamo_orig_callable", None) or getattr(fn, "__wrapped__", None)
        seen += 1
    return []


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _parameter_index(fn: Callable) -> dict[str, int]:
    params = _signature_params(fn)
    return {p.name: i for i, p in enumerate(params) if p.kind in _POSITIONAL}


def compiling() -> bool:
    """Whether Dynamo (``torch.compile``) or export is tracing right now; False without torch
    loaded (never imports it). Dynamo folds the call to a constant True while it traces."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        compiler = getattr(torch, "compiler", None)
        check = getattr(compiler, "is_compiling", None) or torch._dynamo.is_compiling
        return bool(check())
    except Exception:
        return False


# Called with the HookedFunction after a rule's first range (targets keeps a report file current).
FIRST_FIRE_LISTENERS: list[Callable[[HookedFunction], None]] = []


def _first_fire(state: HookedFunction) -> None:
    for listener in list(FIRST_FIRE_LISTENERS):
        try:
            listener(state)
        except Exception:
            pass


class HookedFunction:
    """The state behind one wrapper: the original, its rules, and how often each range opened."""

    def __init__(self, original: Callable, like: HookedFunction | None = None):
        self.original = original
        if like is None:
            self.rules: list[Rule] = []
            self.index = _parameter_index(original)
            self.offset = 0  # positional arguments before arg0 (1 for a method's self)
            self.counts: dict[str, int] = {}  # ranges opened per rule label
        else:  # a compiled callable of ``like``'s original: same rules, names and counts
            self.rules, self.index, self.offset, self.counts = (
                like.rules,
                like.index,
                like.offset,
                like.counts,
            )
        self.calls = 0  # ranges opened (after predicates), the payload of the next range
        self.wrapper = self._make_wrapper()

    def rewrap(self, compiled: Callable, bound: bool = False) -> Callable:
        """A wrapper around ``compiled`` (``torch.compile`` of the original) sharing this one's
        rules, argument names and counts: the range opens on the host around the compiled call.
        ``bound``: ``compiled`` was made from the original bound to an instance, so its calls carry
        no ``self`` and argument positions shift by one."""
        state = HookedFunction(compiled, like=self)
        if bound:
            state.offset = max(self.offset - 1, 0)
            state.index = {name: i - 1 for name, i in self.index.items() if i >= 1}
        return state.wrapper

    def _opened(self, rule: Rule) -> None:
        """Count one range of ``rule``; tell the listeners the first time it fires."""
        label = rule.label
        n = self.counts.get(label, 0)
        self.counts[label] = n + 1
        if n == 0:
            _first_fire(self)

    def add_rule(self, rule: Rule) -> bool:
        """Adds ``rule`` unless an equal one is there; False when it was (idempotent patching)."""
        if rule in self.rules:
            return False
        self.rules.append(rule)
        return True

    def _choose(self, call: Call) -> Rule | None:
        for rule in self.rules:
            if rule.when is None:
                return rule
            try:
                if rule.when(call):
                    return rule
            except Exception:
                continue
        return None

    def _make_wrapper(self) -> Callable:
        fn = self.original
        active = _active
        state = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if compiling():  # Dynamo is tracing this call: no range, nothing it cannot trace
                return fn(*args, **kwargs)
            call = Call(args, kwargs, state.index, state.offset)
            rule = state._choose(call)
            if rule is None:
                return fn(*args, **kwargs)
            if rule.self_forward:
                with _forwards_in_range(args[0] if args else None, rule, state):
                    return fn(*args, **kwargs)
            names = active.names
            name = rule.range_name
            if name in names:
                return fn(*args, **kwargs)
            text = name if rule.attrs is None else _text(name, rule.attrs, call)
            token = nvtx.push(text, state.calls)
            state.calls += 1
            state._opened(rule)
            names.append(name)
            try:
                return fn(*args, **kwargs)
            finally:
                names.pop()
                nvtx.pop(token)

        setattr(wrapper, MARK, self)
        # Dynamo, meeting this wrapper inside a compiled region, inlines the original instead
        # (the ``compiling()`` guard above covers the paths that do not look at this attribute).
        wrapper._torchdynamo_inline = fn  # type: ignore[attr-defined]
        return wrapper


def hooked(fn: Any) -> HookedFunction | None:
    """The :class:`HookedFunction` behind ``fn`` if it is a verifyprof wrapper."""
    return getattr(fn, MARK, None) if callable(fn) else None


def wrap_function(fn: Callable, rule: Rule) -> Callable:
    """``fn`` wrapped with ``rule``; wrapping a wrapper adds the rule to it instead of nesting."""
    state = hooked(fn)
    if state is None:
        state = HookedFunction(fn)
    state.add_rule(rule)
    return state.wrapper


class _forwards_in_range:
    """During one call, every forward of ``module`` opens ``rule``'s range (transformers' target
    forward inside assisted decoding), except forwards nested in another verifyprof range other
    than a spec step (the assistant's own forwards while drafting)."""

    def __init__(self, module: Any, rule: Rule, state: HookedFunction | None = None):
        self.module = module
        self.rule = rule
        self.state = state
        self.handles: list[Any] = []
        self.tokens: list[tuple[bool, Any]] = []  # (opened a range, nvtx token) per running forward
        self.index: dict[str, int] = {}

    def __enter__(self) -> None:
        register_pre = getattr(self.module, "register_forward_pre_hook", None)
        register_post = getattr(self.module, "register_forward_hook", None)
        if register_pre is None or register_post is None:
            return
        try:
            self.index = _parameter_index(self.module.forward)
            self.index.pop("self", None)
            self.handles.append(register_pre(self._pre, with_kwargs=True))
            self.handles.append(register_post(self._post, always_call=True))
        except Exception:
            self.__exit__()

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            try:
                handle.remove()
            except Exception:
                pass
        self.handles.clear()
        while self.tokens:  # a forward that never returned (only if the post hook could not run)
            self._post(None, None, None)

    def _pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        if compiling():
            self.tokens.append((False, None))
            return
        names = _active.names
        name = self.rule.range_name
        if names and (name in names or names[-1] != SPEC_STEP):
            self.tokens.append((False, None))
            return
        text = (
            name
            if self.rule.attrs is None
            else _text(name, self.rule.attrs, Call(args, kwargs, self.index))
        )
        self.tokens.append((True, nvtx.push(text)))
        names.append(name)
        if self.state is not None:
            self.state._opened(self.rule)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self.tokens:
            return
        opened, token = self.tokens.pop()
        if not opened:
            return
        names = _active.names
        if names:
            names.pop()
        nvtx.pop(token)
