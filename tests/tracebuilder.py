"""Build small event-model traces by hand, to specify attribution behaviour exactly.

Real-trace tests live beside these; hand-built traces pin down semantics (overlap priority,
idle split, nesting) that real traces exercise only incidentally.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from verifyprof.trace import events as m


class TraceBuilder:
    def __init__(self) -> None:
        self.strings: list[str] = []
        self.kernels: list[dict] = []
        self.api: list[dict] = []
        self.ranges: list[dict] = []
        self.copies: list[dict] = []
        self.processes: list[dict] = []
        self._corr = 0

    def sid(self, text: str) -> int:
        if text not in self.strings:
            self.strings.append(text)
        return self.strings.index(text)

    def range(self, text: str, start: int, end: int, pid: int = 1, tid: int = 11) -> "TraceBuilder":
        self.ranges.append(
            dict(
                start=start,
                end=end,
                pid=pid,
                tid=tid,
                name_id=self.sid(text),
                domain_id=-1,
                kind=m.RANGE_KIND_PUSHPOP,
                depth=0,
                device=-1,
                payload=np.nan,
            )
        )
        return self

    def launch(
        self, start: int, end: int, pid: int = 1, tid: int = 11, api: str = "cudaLaunchKernel"
    ) -> int:
        self._corr += 1
        self.api.append(
            dict(
                start=start,
                end=end,
                pid=pid,
                tid=tid,
                correlation=self._corr,
                name_id=self.sid(api),
                kind=m.API_KIND_RUNTIME,
            )
        )
        return self._corr

    def kernel(
        self,
        name: str,
        start: int,
        end: int,
        corr: int,
        device: int = 0,
        pid: int = 1,
        stream: int = 7,
    ) -> "TraceBuilder":
        self.kernels.append(
            dict(
                start=start,
                end=end,
                device=device,
                stream=stream,
                name_id=self.sid(name),
                correlation=corr,
                pid=pid,
                graph_id=-1,
                graph_node_id=-1,
            )
        )
        return self

    def memcpy(
        self, start: int, end: int, corr: int, device: int = 0, pid: int = 1
    ) -> "TraceBuilder":
        self.copies.append(
            dict(
                start=start,
                end=end,
                device=device,
                stream=7,
                kind=m.COPY_KIND_MEMCPY,
                name_id=self.sid("Memcpy HtoD"),
                bytes=1024,
                correlation=corr,
                pid=pid,
                graph_node_id=-1,
            )
        )
        return self

    def process(self, pid: int, rank: int, device: int) -> "TraceBuilder":
        self.processes.append(dict(pid=pid, host_pid=pid, name="python", rank=rank, device=device))
        return self

    def build(self) -> m.Trace:
        trace = m.Trace(
            source=[Path("built-by-hand")], format="test", strings=m.StringTable(self.strings)
        )
        for table, rows, columns in (
            ("kernels", self.kernels, m.KERNEL_COLUMNS),
            ("api", self.api, m.API_COLUMNS),
            ("ranges", self.ranges, m.RANGE_COLUMNS),
            ("copies", self.copies, m.COPY_COLUMNS),
            ("processes", self.processes, m.PROCESS_COLUMNS),
        ):
            if rows:
                setattr(trace, table, m.conform(pd.DataFrame(rows), columns))
        trace.validate()
        return trace


def late_joiner_allreduce(verify: str) -> TraceBuilder:
    """Two ranks, one ``verify`` range each (0-1000 ns), one allreduce: rank 0 joins at 100,
    rank 1 at 400, both finish at 500 (300 ns of waiting for the slowest rank, 100 of transfer)."""
    b = TraceBuilder().process(1, 0, 0).process(2, 1, 1)
    b.range(verify, 0, 1000, pid=1, tid=11).range(verify, 0, 1000, pid=2, tid=22)
    for start, launch, rank in ((100, 50, 0), (400, 350, 1)):
        b.kernel(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            start,
            500,
            b.launch(launch, launch + 10, pid=rank + 1, tid=11 * (rank + 1)),
            device=rank,
            pid=rank + 1,
        )
    return b
