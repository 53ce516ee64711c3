"""Where one CLI ``breakdown`` run's wall time goes (issue 43 item 6): wall-clock marks, from this
process's start, around the imports of the heavy modules and the stages (the read, the map and
each worker's file, reduce, the verdict's profile, the table), in the CLI's own process and its
forked workers, and the garbage collector's runs in the CLI's process, on stderr.

    python bench/cli_timeline.py bench/out/ranks/nsys_1000000_8r.sqlite [breakdown options]

The marks wrap each function as its module is imported (an import hook), so no module loads
earlier than the CLI loads it. Run it with bytecode cached, as the CLI bench does
(``PYTHONPYCACHEPREFIX=bench/out/pycache``, ``PYTHONDONTWRITEBYTECODE`` unset).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
import threading
import time

T0 = time.perf_counter()
WRAPPED = {  # module: the functions marked in it; a module with none marks its import only
    "numpy": [],
    "pyarrow": [],
    "pandas": [],
    "verifyprof.attribution.breakdown": [],
    "verifyprof.trace.nsys.shared_read": ["_read_split"],
    "verifyprof.pipeline.local_map": ["map_local"],
    "verifyprof.pipeline.map_task": ["map_file"],
    "verifyprof.attribution.reduce": ["reduce_parts", "merged_collective_kernels", "matched_calls"],
    "verifyprof.model.inputs.profile": ["verify_profile"],
    "verifyprof.report.console": ["print_breakdown"],
}


def mark(what: str) -> None:
    thread = threading.current_thread().name[:12]
    print(f"{time.perf_counter() - T0:7.3f} pid {os.getpid()} {thread:12s} {what}", file=sys.stderr)


def _marked(module, name: str) -> None:
    inner = getattr(module, name)

    @functools.wraps(inner)
    def outer(*args, **kwargs):
        mark(f"> {name}")
        try:
            return inner(*args, **kwargs)
        finally:
            mark(f"< {name}")

    setattr(module, name, outer)


class _Marks(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in WRAPPED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            mark(f"import {fullname}")
            load(module)
            mark(f"imported {fullname}")
            for name in WRAPPED[fullname]:
                _marked(module, name)

        spec.loader.exec_module = exec_module
        return spec


class _Collections:
    """The garbage collector's runs: each one of 5 ms or more marked (a forked worker's too, by
    its pid), and the count and time of this process's at the end."""

    def __init__(self) -> None:
        self.runs, self.seconds, self.began = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.began = time.perf_counter()
            return
        took = time.perf_counter() - self.began
        self.runs += 1
        self.seconds += took
        if took >= 0.005:
            mark(f"collector: generation {info['generation']}, {took * 1000:.1f} ms")


def main() -> None:
    import gc

    collections = _Collections()
    gc.callbacks.append(collections)
    sys.meta_path.insert(0, _Marks())
    mark("start")
    sys.argv = ["verifyprof", "breakdown", *sys.argv[1:]]
    from verifyprof import cli

    try:
        cli.main()
    except SystemExit:
        pass
    ms = collections.seconds * 1000
    mark(f"end; the collector ran {collections.runs} times in this process, {ms:.0f} ms")


if __name__ == "__main__":
    main()
