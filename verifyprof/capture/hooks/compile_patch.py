"""``torch.compile`` of a hooked function: compile the original, keep the range on the host.

Dynamo compiles the frame of the function it is given. Given a verifyprof wrapper it would trace
the wrapper's own code (the NVTX calls are not traceable: ``Unsupported: ... get_event_attributes
of class DummyDomain``), and even with those skipped the range would vanish into the compiled
frame. So once ``torch`` is imported, ``torch.compile`` is replaced by a thin function that, for a
verifyprof wrapper only, compiles the wrapped original and wraps the compiled callable again with
the same rules: ``model_forward = torch.compile(model_forward, mode="reduce-overhead")`` gives a
compiled ``model_forward`` whose ranges bracket each compiled call (a CUDA-graph replay under
``reduce-overhead``) on the host. Anything else goes to the real ``torch.compile`` unchanged.

Nothing here raises into the host program: if re-wrapping fails the compiled callable is
returned without a range; errors of the real ``torch.compile`` reach the caller as they would
without verifyprof.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

from verifyprof.capture.hooks.wrappers import hooked

ORIGINAL = "__verifyprof_original_compile__"  # on our replacement: the torch.compile it replaced


def _compile_with_ranges(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if model is None:  # @torch.compile(mode=...) used as a decorator factory
            return lambda fn: compile(fn, *args, **kwargs)
        state = hooked(getattr(model, "__func__", model))  # a bound method of a hooked method too
        if state is None:
            return real(model, *args, **kwargs)
        instance = getattr(model, "__self__", None) if inspect.ismethod(model) else None
        original = (
            types.MethodType(state.original, instance) if instance is not None else state.original
        )
        compiled = real(original, *args, **kwargs)
        try:
            return state.rewrap(compiled, bound=instance is not None)
        except Exception:  # no range then, but the program gets its compiled function
            return compiled

    setattr(compile, ORIGINAL, real)
    return compile


def patch_torch(torch: Any) -> bool:
    """Replace ``torch.compile`` (once); False when there is none or it is already ours."""
    try:
        current = getattr(torch, "compile", None)
        if current is None or hasattr(current, ORIGINAL):
            return False
        torch.compile = _compile_with_ranges(current)
        return True
    except Exception:
        return False


def unpatch_torch(torch: Any) -> None:
    current = getattr(torch, "compile", None)
    real = getattr(current, ORIGINAL, None)
    if real is not None:
        try:
            torch.compile = real
        except Exception:
            pass
