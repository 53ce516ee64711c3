"""Readers: every trace format into one columnar event model (:mod:`verifyprof.trace.events`).

``sources`` sniffs and expands what the user named; ``nsys/`` reads Nsight Systems exports and
reports, ``kineto/`` PyTorch-profiler JSON.
"""

from verifyprof.trace.sources import load_trace

__all__ = ["load_trace"]
