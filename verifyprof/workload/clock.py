"""Timestamps and summary statistics of the workload's runs."""

from __future__ import annotations

import math
import time
from typing import Any

import torch


class Clock:
    """Timestamps on the GPU stream (CUDA events) or, on the CPU, the host clock."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter_ns()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def ms(self, a: Any, b: Any) -> float:
        return a.elapsed_time(b) if self.cuda else (b - a) / 1e6


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    n = len(ordered)

    def pct(q: float) -> float:
        pos = q * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    return {
        "n": n,
        "mean": sum(ordered) / n,
        "median": pct(0.5),
        "p90": pct(0.9),
        "min": ordered[0],
        "max": ordered[-1],
    }
