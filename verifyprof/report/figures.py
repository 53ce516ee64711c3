"""The report's charts of steps and phases as plotly figures, and the colour table (``COLOURS``)
every chart of the report draws with (the what-if's charts are in :mod:`.figures_cycle`).

Every figure summarises: steps are binned past ``MAX_BARS``, a timeline draws one step per rank
with its ops capped by :mod:`verifyprof.attribution.timeline`. Hover text is HTML-escaped
(plotly renders a subset of HTML in it), so a kernel named ``<script>`` is text.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from verifyprof.attribution.kernel_names import short_kernel_name
from verifyprof.attribution.timeline import StepTimeline
from verifyprof.contracts import phases
from verifyprof.contracts.schema import variant

MAX_BARS = 300  # steps per chart; more are averaged in bins
HOVER_NAME = 300  # characters of a full kernel name in a timeline hover (the table has them all)
# The one colour table of every chart. Phases: compute, communication and copies in saturated
# hues; the GPU idle (and other steps' work) in greys and muted hues, each kind its own, drawn
# hatched in stacked bars. tests/test_report_colours.py holds every pair of phase colours apart.
COLOURS = {
    "attention": "#1f77b4",
    "gemm_moe": "#9467bd",
    "moe_aux": "#c5b0d5",
    "gemm_dense": "#2ca02c",
    "spec": "#17becf",
    "sampling": "#9edae5",
    "norm": "#bcbd22",
    "elementwise": "#ff7f0e",
    "other": "#8c564b",
    "graph": "#393b79",
    "allreduce": "#d62728",
    "collective": "#ff9896",
    "memcpy": "#e377c2",
    "memset": "#f2a0c2",
    "other_work": "#e3e3e3",
    "graph_gap": "#5f9e8f",
    "graph_launch": "#404040",
    "launch_gap": "#8c8c8c",
    "host_wait": "#d4b483",
    "host call": "#6b3d00",  # the timeline's host row
    # the parts of a speculative cycle, and the other series of the what-if charts
    "draft": "#e6ab02",
    "verify": "#1b9e77",
    "overhead": "#7570b3",
    "overlap": "#bdbdbd",
    "tokens/s": "#1f77b4",
    "plain decoding": "#555555",
    "today": "#d62728",
    "best": "#2ca02c",
    "gain": "#2ca02c",
    "loss": "#d62728",
    "total": "#1f77b4",
    "break-even": "#ffffff",
    "before": "#8c8c8c",
    "after": "#1f77b4",
    # the load curve: one line per draft count k (k = 0 is "plain decoding")
    **{
        f"k = {k}": c
        for k, c in enumerate(
            (
                "#555555",
                "#1b9e77",
                "#d95f02",
                "#7570b3",
                "#e7298a",
                "#66a61e",
                "#e6ab02",
                "#a6761d",
                "#1f78b4",
                "#b2df8a",
                "#fb9a99",
                "#cab2d6",
                "#6a3d9a",
            )
        )
    },  # fmt: skip
}
IDLE = frozenset(phases.IDLE + phases.OTHER)
SPARE = ("#843c39", "#7b4173", "#637939", "#8ca252", "#bd9e39", "#e7969c", "#6b6ecf")
LAYOUT = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "legend": {"orientation": "h", "y": -0.2},
}


def colour(key: str) -> str:
    return COLOURS.get(key) or SPARE[sum(map(ord, key)) % len(SPARE)]


def marker(phase: str) -> dict[str, Any]:
    """A bar's marker for ``phase``: its colour, hatched when the GPU is idle in it."""
    out: dict[str, Any] = {"color": colour(phase), "line": {"width": 0}}
    if phase in IDLE:
        out["pattern"] = {"shape": "/", "fillmode": "overlay", "fgcolor": "#ffffff", "size": 6}
    return out


def safe(value: Any) -> str:
    """Text for a title, label or hover, escaped (plotly renders a subset of HTML in them; quotes
    are plain text there)."""
    return html.escape(str(value), quote=False)


def kernel_hover(name: str) -> str:
    """A kernel's hover: the short name (as nsys shortens it), then the full name, cut at
    ``HOVER_NAME`` characters (thousands of C++ signatures would weigh megabytes) and broken into
    lines."""
    full = name if len(name) <= HOVER_NAME else name[: HOVER_NAME - 3] + "..."
    lines = [safe(full[i : i + 100]) for i in range(0, len(full), 100)]
    return f"<b>{safe(short_kernel_name(name))}</b><br>" + "<br>".join(lines)


def group_rows(steps: pd.DataFrame, group: dict[str, Any]) -> pd.DataFrame:
    rows = steps[steps["name"] == group["name"]]
    if group.get("variant"):
        rows = rows[[variant(a) == group["variant"] for a in rows["attrs"]]]
    return rows.sort_values(["start_ns", "device"], kind="stable")


def steps_figure(rows: pd.DataFrame, phases: list[str], title: str) -> go.Figure:
    """Stacked bars by phase, one per (step, device) in time order; binned means past MAX_BARS."""
    shown = [p for p in phases if p in rows.columns and rows[p].any()]
    labels = [
        f"{s}" if d < 0 or rows["device"].nunique() == 1 else f"{s}/d{d}"
        for s, d in zip(rows["step"], rows["device"])
    ]
    values = rows[shown].to_numpy(dtype=float) / 1e6
    if len(rows) > MAX_BARS:
        bins = np.array_split(np.arange(len(rows)), MAX_BARS)
        values = np.vstack([values[b].mean(axis=0) for b in bins])
        labels = [f"{labels[b[0]]}..{labels[b[-1]]}" for b in bins]
        title += f" (mean of {len(rows) / MAX_BARS:.1f} steps per bar)"
    fig = go.Figure(
        [go.Bar(name=p, x=labels, y=values[:, i], marker=marker(p)) for i, p in enumerate(shown)]
    )
    fig.update_layout(
        barmode="stack",
        title=safe(title),
        xaxis_title="step (index/device)",
        yaxis_title="ms",
        xaxis_type="category",
        **LAYOUT,
    )
    return fig


def timeline_figure(timelines: list[StepTimeline]) -> go.Figure:
    """One step per rank: a row per stream (ops coloured by phase), an idle row (gaps by kind), a
    host row (launch calls)."""
    bars: dict[str, dict[str, list]] = {}

    def add(key: str, y: str, start: float, width: float, hover: str) -> None:
        b = bars.setdefault(key, {"y": [], "base": [], "x": [], "text": []})
        b["y"].append(y)
        b["base"].append(round(start, 3))  # us to the ns: no float noise in the page
        b["x"].append(round(width, 3))
        b["text"].append(hover)

    for tl in timelines:
        who = f"rank {tl.rank}" if tl.rank >= 0 else f"dev {tl.device}"
        t0 = tl.start_ns
        for op in tl.ops.itertuples(index=False):  # capped per window (timeline.MAX_OPS)
            add(
                op.phase,
                f"{who} stream {op.stream}",
                (op.start - t0) / 1e3,
                max(op.end - op.start, 1) / 1e3,
                f"{kernel_hover(op.name)}<br>{op.phase}, {(op.end - op.start) / 1e3:.1f} us",
            )
        for gap in tl.gaps.itertuples(index=False):
            add(
                gap.kind,
                f"{who} idle",
                (gap.start - t0) / 1e3,
                (gap.end - gap.start) / 1e3,
                f"idle: {gap.kind}, {(gap.end - gap.start) / 1e3:.1f} us",
            )
        for call in tl.calls.itertuples(index=False):
            add(
                "host call",
                f"{who} host",
                (call.start - t0) / 1e3,
                max(call.end - call.start, 1) / 1e3,
                f"{safe(call.name)}, {(call.end - call.start) / 1e3:.1f} us",
            )
    fig = go.Figure()
    for key, b in bars.items():
        fig.add_trace(
            go.Bar(
                name=key,
                orientation="h",
                y=b["y"],
                x=b["x"],
                base=b["base"],
                hovertext=b["text"],
                hoverinfo="text",
                marker={"color": colour(key), "line": {"width": 0}},
            )
        )
    rows = max(1, len({y for b in bars.values() for y in b["y"]}))
    first = timelines[0] if timelines else None
    title = (
        f"Timeline of the median {first.name} step (step {first.step},"
        f" {(first.end_ns - first.start_ns) / 1e6:.3f} ms)"
        if first
        else "Timeline"
    )
    height, top, bottom = 220 + 40 * rows, 50, 110
    fig.update_layout(
        barmode="overlay",
        title=safe(title),
        xaxis_title="us from the step's start",
        height=height,
        bargap=0.3,
        **LAYOUT,
    )
    # the legend under the axis title, in pixels (a fraction of a short plot lands on the title)
    fig.update_layout(
        margin={**LAYOUT["margin"], "t": top, "b": bottom},
        legend={**LAYOUT["legend"], "y": -60 / (height - top - bottom), "yanchor": "top"},
    )
    fig.update_yaxes(autorange="reversed", type="category")
    return fig


def ranks_figure(group: dict[str, Any], phases: list[str]) -> go.Figure:
    by_rank = group["by_rank"]
    ranks = list(by_rank)
    shown = [p for p in phases if any(by_rank[r]["phases"].get(p, 0) for r in ranks)]
    fig = go.Figure(
        [
            go.Bar(
                name=p,
                x=[f"rank {r}" for r in ranks],
                y=[by_rank[r]["phases"].get(p, 0) / 1e6 for r in ranks],
                marker=marker(p),
            )
            for p in shown
        ]
    )
    fig.update_layout(
        barmode="stack",
        title=safe(f"Per rank: mean {group['name']} step by phase"),
        yaxis_title="ms",
        **LAYOUT,
    )
    return fig


def compare_figure(data: dict[str, Any]) -> go.Figure:
    rows = data["phases"]
    fig = go.Figure(
        [
            go.Bar(
                name="before",
                x=[r["phase"] for r in rows],
                y=[r["before_ms"] for r in rows],
                marker_color=COLOURS["before"],
            ),
            go.Bar(
                name="after",
                x=[r["phase"] for r in rows],
                y=[r["after_ms"] for r in rows],
                marker_color=COLOURS["after"],
            ),
        ]
    )
    fig.update_layout(
        barmode="group",
        title=safe("Verify step by phase, before vs after: " + data["verdict_line"]),
        yaxis_title="ms",
        **LAYOUT,
    )
    return fig
