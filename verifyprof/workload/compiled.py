"""The verify forward under ``torch.compile`` (mode "compile" of the workload).

``SpecState.verify`` reads and writes only tensors that live across calls, so it compiles as
one graph (``fullgraph``) and, with ``mode="reduce-overhead"`` on CUDA, Inductor replays its
fused kernels as a CUDA graph (cudagraph trees): graph launch plus Inductor fusion, the case
that ``cuda_graph_verify``'s prediction leaves out. The weights, KV caches and state buffers are
plain tensor attributes, not parameters, so they are marked as static addresses: otherwise
cudagraph trees would copy every weight into its own buffer on each replay, or skip graphs
because the caches are mutated inputs. Whether graphs were really used is read back from
Inductor's skip counter after the first calls, so the ranges never claim ``graph=1`` falsely.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import torch

from verifyprof.workload.spec import SpecState


def _static_tensors(state: SpecState) -> Iterator[torch.Tensor]:
    for module in state.target.modules():
        yield from (v for v in vars(module).values() if isinstance(v, torch.Tensor))
    yield from (v for v in vars(state).values() if isinstance(v, torch.Tensor))


def _skips() -> int:
    try:
        from torch._dynamo.utils import counters

        return int(counters["inductor"]["cudagraph_skips"])
    except Exception:  # pragma: no cover - counter layout of another torch version
        return 0


def _reason(err: Exception) -> str:
    """Dynamo's headline and explanation, on one line (the rest is hints and stacks)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(err).__name__


class CompiledVerify:
    """``state.verify`` compiled once; calling it runs one verify forward (logits ``[B, k+1,
    V]``)."""

    def __init__(self, state: SpecState, *, backend: str, mode: str | None, fullgraph: bool):
        import torch._dynamo

        for tensor in _static_tensors(state):
            torch._dynamo.mark_static_address(tensor)
        self.state, self.backend, self.fullgraph = state, backend, fullgraph
        self.mode = mode if backend == "inductor" else None
        self.device = state.target.device
        self.wants_graphs = self.device.type == "cuda" and self.mode in (
            "reduce-overhead",
            "max-autotune",
        )
        self.cudagraphs = self.wants_graphs
        self.calls = 0
        self.first_call_s: float | None = None
        self.fullgraph_error: str | None = None
        self._skips_before = _skips()
        self.fn = self._compile(fullgraph)

    def _compile(self, fullgraph: bool) -> Any:
        try:
            return torch.compile(
                self.state.verify, backend=self.backend, mode=self.mode, fullgraph=fullgraph
            )
        except Exception as err:  # an unknown backend or mode: a usage error, reported in one line
            raise ValueError(
                f"torch.compile(backend={self.backend!r}, mode={self.mode!r}): "
                f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
            ) from None

    def __call__(self) -> torch.Tensor:
        if self.wants_graphs:  # each verify is a new generation: the previous logits were consumed
            torch.compiler.cudagraph_mark_step_begin()
        if self.calls:
            self.calls += 1
            return self.fn()
        return self._first_call()

    def _first_call(self) -> torch.Tensor:
        """Compile on the first call (outside any capture window); without ``fullgraph`` if Dynamo
        cannot trace the forward as one graph, recording why."""
        start = time.perf_counter()
        try:
            out = self.fn()
        except torch._dynamo.exc.Unsupported as err:
            if not self.fullgraph:
                raise
            self.fullgraph, self.fullgraph_error = False, _reason(err)
            self.fn = self._compile(False)
            out = self.fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.first_call_s = time.perf_counter() - start
        self.calls = 1
        return out

    def settle(self) -> None:
        """After the warm-up calls: graphs count as used only if Inductor skipped none."""
        if self.wants_graphs and _skips() > self._skips_before:
            self.cudagraphs = False

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "mode": self.mode,
            "fullgraph": self.fullgraph,
            "fullgraph_error": self.fullgraph_error,
            "cudagraphs": self.cudagraphs,
            "cudagraph_skips": _skips() - self._skips_before,
            "first_call_s": self.first_call_s,
            "calls": self.calls,
            "torch": torch.__version__,
        }
