"""Shared helpers for the hook tests: ranges as torch.profiler records them, fake-free cleanup."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Recorded:
    text: str  # the range text, "verifyprof.verify bs=2 tokens=4"
    parent: str | None  # the text of the nearest enclosing verifyprof range, if any

    @property
    def name(self) -> str:
        return self.text.split(" ", 1)[0]


def profiled(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, list[Recorded]]:
    """Runs ``fn`` under torch.profiler (CPU) and returns its result and the verifyprof ranges
    (user annotations), in start order, each with its enclosing verifyprof range."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        result = fn(*args, **kwargs)
    events = sorted(
        (e for e in prof.events() if e.name.startswith("verifyprof.")),
        key=lambda e: e.time_range.start,
    )
    recorded = []
    for event in events:
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("verifyprof."):
            parent = parent.cpu_parent
        recorded.append(Recorded(event.name, None if parent is None else parent.name))
    return result, recorded


def forget_modules(prefix: str) -> None:
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[name]


def demo_module(tmp_path, monkeypatch, name: str, source: str):
    """A module ``name`` of ``source`` importable from ``tmp_path``; forgotten (hooks, Dynamo)
    after."""
    import textwrap

    import torch

    from verifyprof.capture.hooks import api as hooks

    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    hooks.uninstall()
    forget_modules(name)
    torch._dynamo.reset()
