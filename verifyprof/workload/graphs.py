"""CUDA-graph capture of the workload's phases over their static buffers.

A phase function reads and writes only tensors that live across calls (``SpecState``), so it
is captured once and replayed with new contents. NVTX ranges pushed inside a captured function
appear at capture time only, never on replay: the runner brackets ``replay()`` from outside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class Graph:
    """One captured callable; ``replay()`` returns the output tensors it produced at capture."""

    def __init__(
        self,
        fn: Callable[[], Any],
        *,
        before: Callable[[], Any] | None = None,
        warmup: int = 2,
        pool: Any = None,
    ):
        self.graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(
            stream
        ):  # warm up off the default stream (cuBLAS workspaces, autotune)
            for _ in range(warmup):
                if before is not None:
                    before()
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        if before is not None:
            before()
        with torch.cuda.graph(self.graph, pool=pool):
            self.output = fn()
        torch.cuda.synchronize()

    def replay(self) -> Any:
        self.graph.replay()
        return self.output


class PhaseGraphs:
    """The graphs of one workload: verify at width k+1, one drafter decode step (replayed k
    times), draft-extend, the baseline decode step, and one verify per sweep width."""

    def __init__(self, state: Any, widths: tuple[int, ...] = (), *, with_decode: bool = True):
        # draft_begin puts the drafter's cursor at its cache length, so warmup writes land beyond it
        self.draft_step = (
            Graph(state.draft_step, before=state.draft_begin) if state.draft is not None else None
        )
        self.verify = Graph(state.verify)
        self.draft_extend = Graph(state.draft_extend) if state.draft is not None else None
        self.decode = Graph(state.decode) if with_decode else None
        self.sweep = {w: Graph(lambda w=w: state.verify_width(w)) for w in widths}
        state.reset()  # the warmup runs advanced the lengths
