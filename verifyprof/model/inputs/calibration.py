"""Launch and replay costs measured on a trace's own graph steps: the per-node gap of a replay,
the host's cost of a replay call and of a compiled call, where the trace has enough of them."""

from __future__ import annotations

import pandas as pd

MIN_CALIBRATION_STEPS = 3


def graph_calibration(steps: pd.DataFrame) -> dict[str, float]:
    """Per-node gap, replay-call and compiled-call host cost (us) from graph-mode steps."""
    graph = steps[(steps["mode"] == "graph") & (steps["graph_launches"] > 0)]
    if len(graph) < MIN_CALIBRATION_STEPS:
        return {}
    compiled = graph["attrs"].map(lambda a: a.get("compile") == "1").to_numpy(bool)
    plain, comp = graph[~compiled], graph[compiled]
    out: dict[str, float] = {}
    if len(plain) >= MIN_CALIBRATION_STEPS and plain["kernels"].sum() > 0:
        out["graph_node_us"] = float(plain["graph_gap"].sum() / plain["kernels"].sum()) / 1e3
        out["graph_launch_us"] = (
            float(plain["graph_launch"].sum() / plain["graph_launches"].sum()) / 1e3
        )
    if len(comp) >= MIN_CALIBRATION_STEPS:
        host = comp["host_wait"] + comp["graph_launch"] + comp["launch_gap"]
        per_call = float(host.sum() / comp["graph_launches"].sum()) / 1e3
        out["compiled_call_us"] = max(per_call - out.get("graph_launch_us", 0.0), 0.0)
    return out
