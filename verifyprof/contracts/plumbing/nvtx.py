"""The lowest layer of the hooks: push and pop one verifyprof range.

Uses the ``nvtx`` package (registered strings in verifyprof's own domain, numeric payload), and
``torch.cuda.nvtx`` where that package is missing. When a PyTorch profiler is recording, the same
range is also opened as a ``record_function`` so Kineto traces carry it as a ``user_annotation``.
Never raises: profiling must not break the host program.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from verifyprof.contracts.ranges import DOMAIN, range_text

try:  # the nvtx package: domains, registered strings, payloads
    import nvtx as _nvtx

    _domain = _nvtx.get_domain(DOMAIN)
except Exception:  # pragma: no cover - exercised only where nvtx is not installed
    _nvtx = None
    _domain = None


def _torch_profiler_active() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.autograd._profiler_enabled())
    except Exception:
        return False


_cache: dict[str, Any] = {}


def _attributes(text: str, payload: int | float | None) -> Any:
    """Event attributes with the text registered once in verifyprof's domain."""
    if payload is None:
        attrs = _cache.get(text)
        if attrs is None:
            attrs = _cache[text] = _domain.get_event_attributes(message=text)
        return attrs
    return _domain.get_event_attributes(message=text, payload=payload)


def push(text: str, payload: int | float | None = None) -> Any:
    """Open a range; returns a token for :func:`pop` (also closing a record_function)."""
    record = None
    try:
        if _domain is not None:
            _domain.push_range(_attributes(text, payload))
        else:
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.cuda.nvtx.range_push(text)
        if _torch_profiler_active():
            import torch

            record = torch.autograd.profiler.record_function(text)
            record.__enter__()
    except Exception:
        pass
    return record


def pop(token: Any = None) -> None:
    try:
        if token is not None:
            token.__exit__(None, None, None)
        if _domain is not None:
            _domain.pop_range()
        else:
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.cuda.nvtx.range_pop()
    except Exception:
        pass


@contextlib.contextmanager
def nvtx_range(name: str, payload: int | float | None = None, **attrs: object) -> Iterator[None]:
    """``with nvtx_range(VERIFY, bs=1, tokens=4): ...``: one range around the block."""
    token = push(range_text(name, **attrs), payload)
    try:
        yield
    finally:
        pop(token)
