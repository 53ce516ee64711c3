"""The what-if's charts, from the model's typed Ranking (never rebuilt from its JSON): the plan as
a waterfall, one cycle bar per configuration, tokens/s by draft count, and the tokens/s heatmap.

Every number comes from :mod:`verifyprof.model` (``Cycle``, ``PlanStep``, ``PlainDecoding``,
``DraftCurve``); the heatmap's surface is ``Ranking.current`` with its verify time and accept
length changed (``Cycle.with_``), so the report does no throughput maths of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from verifyprof.model.cycle.throughput import Cycle
from verifyprof.model.decision.candidates import Ranking
from verifyprof.report.figures import COLOURS, LAYOUT, safe

PARTS = ("draft", "verify", "overhead")  # a cycle's parts, in the order they run


@dataclass(frozen=True)
class CycleRow:
    """One configuration's cycle: today, a plan step (cumulative), plain decoding, a draft count."""

    label: str
    kind: str  # today | plan | plain | curve
    draft_ms: float
    verify_ms: float
    overhead_ms: float
    cycle_ms: float
    accept_len: float
    tokens_per_s: float

    @property
    def overlap_ms(self) -> float:
        """The parts' time the host/GPU race hides: the cycle is their sum less this."""
        return max(self.draft_ms + self.verify_ms + self.overhead_ms - self.cycle_ms, 0.0)


def _row(label: str, kind: str, c: Cycle) -> CycleRow:
    return CycleRow(
        label,
        kind,
        c.draft_ms,
        c.verify_ms,
        c.overhead_ms,
        c.cycle_ms,
        c.accept_len,
        c.tokens_per_s,
    )


def cycle_rows(r: Ranking) -> list[CycleRow]:
    """Today, each plan step (the fixes so far stacked), plain decoding (k = 0), then every other
    point of the draft-count curve (k = 1..K)."""
    k = r.curve.current_k if r.curve else r.scenario.num_draft
    rows = [_row(f"today (k = {k})" if k else "today", "today", r.current)]
    for i, step in enumerate(r.plan, start=1):
        name = step.candidate.name if i == 1 else f"+ {step.candidate.name}"
        rows.append(_row(f"plan {i}: {name}", "plan", step.candidate.cycle))
    if r.plain is not None:
        rows.append(_row("plain decoding (k = 0)", "plain", r.plain.cycle))
    for p in r.curve.points if r.curve else []:
        if p["num_draft"] == 0:
            continue  # plain decoding: the row above
        today = " (today's k)" if p["num_draft"] == r.curve.current_k else ""
        rows.append(
            CycleRow(
                f"k = {p['num_draft']}{today}",
                "curve",
                p["draft_ms"],
                p["verify_ms"],
                p["overhead_ms"],
                p["cycle_ms"],
                p["accept_len"],
                p["tokens_per_s"],
            )
        )
    return rows


def cycle_figure(rows: list[CycleRow]) -> go.Figure:
    """A horizontal bar per configuration: draft | verify | overhead, stacked in the order they
    run, tokens/s at the bar's end; time the race hides is drawn hatched past the cycle's end."""
    labels = [safe(r.label) for r in rows]
    fig = go.Figure()
    bases = {"draft": [0.0] * len(rows)}
    bases["verify"] = [r.draft_ms for r in rows]
    bases["overhead"] = [r.draft_ms + r.verify_ms for r in rows]
    for part in PARTS:
        fig.add_trace(
            go.Bar(
                name=part,
                orientation="h",
                y=labels,
                x=[getattr(r, f"{part}_ms") for r in rows],
                base=bases[part],
                marker={"color": COLOURS[part], "line": {"width": 0}},
                hovertemplate=f"{part} %{{x:.3f}} ms<extra>%{{y}}</extra>",
            )
        )
    if any(r.overlap_ms > 0 for r in rows):
        fig.add_trace(
            go.Bar(
                name="hidden by overlap",
                orientation="h",
                y=labels,
                x=[r.overlap_ms for r in rows],
                base=[r.cycle_ms for r in rows],
                marker={"color": COLOURS["overlap"], "pattern": {"shape": "x"}},
            )
        )
    fig.add_trace(
        go.Scatter(
            name="tok/s",
            mode="text",
            y=labels,
            x=[max(r.cycle_ms, r.cycle_ms + r.overlap_ms) for r in rows],
            text=[f"  {r.tokens_per_s:.1f} tok/s (accept {r.accept_len:.2f})" for r in rows],
            textposition="middle right",
            showlegend=False,
            hoverinfo="skip",
        )
    )
    widest = max((r.cycle_ms + r.overlap_ms for r in rows), default=1.0)
    fig.update_layout(
        barmode="overlay",
        title="One cycle per configuration: draft | verify | overhead (ms), tok/s per request",
        xaxis={"title": "ms per cycle", "range": [0, 1.4 * widest]},
        yaxis={"type": "category", "autorange": "reversed"},
        height=140 + 28 * len(rows),
        **LAYOUT,
    )
    return fig


def draft_figure(r: Ranking) -> go.Figure:
    """Tokens/s by number of drafts (k = 0 is plain decoding), plain decoding as a line across,
    the best k and today's k marked."""
    curve = r.curve
    assert curve is not None, "draft_figure needs a draft-count curve"
    ks = [p["num_draft"] for p in curve.points]
    fig = go.Figure(
        go.Scatter(
            name="tok/s by draft count",
            x=ks,
            y=[p["tokens_per_s"] for p in curve.points],
            mode="lines",
            line={"color": COLOURS["tokens/s"]},
            hovertemplate="k = %{x}: %{y:.1f} tok/s<extra></extra>",
        )
    )
    if r.plain is not None:
        fig.add_trace(
            go.Scatter(
                name=f"plain decoding {r.plain.tokens_per_s:.1f} tok/s",
                x=[min(ks), max(ks)],
                y=[r.plain.tokens_per_s] * 2,
                mode="lines",
                line={"color": COLOURS["plain decoding"], "dash": "dash"},
            )
        )
    today = next((p for p in curve.points if p["num_draft"] == curve.current_k), None)
    marks = [("best", curve.best, "star"), ("today", today, "x")]
    for what, point, symbol in marks:
        if point is None:
            continue
        fig.add_trace(
            go.Scatter(
                name=f"{what} k = {point['num_draft']}: {point['tokens_per_s']:.1f} tok/s",
                x=[point["num_draft"]],
                y=[point["tokens_per_s"]],
                mode="markers",
                marker={
                    "color": COLOURS[what],
                    "size": 16 if what == "best" else 12,
                    "symbol": symbol,
                },
            )
        )
    _verify_sources(fig, curve.points)
    fig.update_layout(
        title="tok/s per request by number of drafts (today's execution mode)",
        xaxis={"title": "drafts per cycle (k)", "dtick": 1},
        yaxis_title="tok/s per request",
        **LAYOUT,
    )
    return fig


# Where a point's verify time comes from: filled where a trace measured it, open where the model
# gave it (the width model between or past traced widths, or the roofline).
SOURCE_SYMBOLS = {
    "today": "circle",
    "measured": "circle",
    "given": "circle",
    "fitted": "circle-open",
    "predicted": "circle-open",
    "as today": "circle-open",
    "extrapolated": "diamond-open",
    "roofline": "square-open",
}


def _verify_sources(fig: go.Figure, points: list[dict]) -> None:
    """One marker trace per source of the verify time, after the curve and the marks, so the
    legend says which points were traced and which the width model or roofline gave."""
    for source in dict.fromkeys(p.get("verify_source", "") for p in points):
        if not source:
            continue
        chosen = [p for p in points if p.get("verify_source") == source]
        fig.add_trace(
            go.Scatter(
                name=f"verify {source}",
                x=[p["num_draft"] for p in chosen],
                y=[p["tokens_per_s"] for p in chosen],
                customdata=[[p["verify_ms"], p["width"]] for p in chosen],
                mode="markers",
                marker={
                    "color": COLOURS["tokens/s"],
                    "size": 9,
                    "symbol": SOURCE_SYMBOLS.get(source, "circle-open"),
                    "line": {"width": 2, "color": COLOURS["tokens/s"]},
                },
                hovertemplate=(
                    "k = %{x}: %{y:.1f} tok/s; verify %{customdata[0]:.3f} ms at width"
                    f" %{{customdata[1]}} ({source})<extra></extra>"
                ),
            )
        )


def plan_figure(r: Ranking) -> go.Figure:
    """Waterfall from today's tok/s through each plan step (cumulative), plain decoding with the
    same fixes as a diamond on each step's bar; without a plan, each candidate alone. Every
    number is in the axis labels under its bar, never on the plot, and plain decoding today is a
    line named in the legend: no label is drawn over a bar or over another label."""
    current = r.current.tokens_per_s
    if r.plan:
        names = ["today"] + [s.candidate.name for s in r.plan] + ["plan"]
        levels = [current] + [s.cumulative_tps for s in r.plan]
        values = [current] + [b - a for a, b in zip(levels, levels[1:])] + [levels[-1]]
        at = list(range(len(names)))  # numbers, not categories: the line spans the axis
        words = (
            [f"{current:.1f}"]
            + [f"{v:+.1f} &#8594; {lv:.1f}" for v, lv in zip(values[1:-1], levels[1:])]
            + [f"{levels[-1]:.1f}"]
        )
        fig = go.Figure(
            go.Waterfall(
                name="speculative (tok/s under each bar)",
                x=at,
                y=values,
                width=0.6,
                measure=["absolute"] + ["relative"] * len(r.plan) + ["total"],
                textposition="none",
                increasing={"marker": {"color": COLOURS["gain"]}},
                decreasing={"marker": {"color": COLOURS["loss"]}},
                totals={"marker": {"color": COLOURS["total"]}},
                hovertemplate="%{y:+.1f} tok/s<extra></extra>",
            )
        )
        if r.plain is not None and r.plain.along_plan:
            along = list(r.plain.along_plan)
            fig.add_trace(
                go.Scatter(
                    name="plain decoding with the same fixes (on each step's bar)",
                    x=at[1 : len(along) + 1],
                    y=along,
                    mode="markers",
                    marker={"color": COLOURS["plain decoding"], "symbol": "diamond", "size": 11},
                    hovertemplate="plain, same fixes: %{y:.1f} tok/s<extra></extra>",
                )
            )
        fig.update_xaxes(
            tickvals=at,
            ticktext=[f"{safe(n)}<br>{w}" for n, w in zip(names, words)],
            range=[-0.5, len(names) - 0.5],
        )
        span = [-0.5, len(names) - 0.5]
        title = "What-if plan: tok/s per request, each step on top of the ones before"
    else:
        names = [safe(c.name) for c in r.candidates]
        fig = go.Figure(
            go.Bar(
                name="each candidate alone",
                x=list(range(len(names))),
                y=[c.cycle.tokens_per_s for c in r.candidates],
                textposition="none",
                marker_color=COLOURS["gain"],
            )
        )
        fig.update_xaxes(
            tickvals=list(range(len(names))),
            ticktext=[
                f"{n}<br>{100 * c.gain:+.1f}%" for n, c in zip(names, r.candidates, strict=True)
            ],
        )
        span = [-0.5, len(names) - 0.5]
        fig.add_trace(_level("today", current, "#444", "dash", span))
        title = "What-if candidates, each alone (this what-if has no stacked plan)"
    if r.plain is not None:
        fig.add_trace(
            _level(
                "plain decoding today", r.plain.tokens_per_s, COLOURS["plain decoding"], "dot", span
            )
        )
    fig.update_layout(title=title, yaxis_title="tok/s per request", **LAYOUT)
    fig.update_xaxes(range=span)
    return fig


def _level(name: str, tps: float, colour: str, dash: str, span: list[float]) -> go.Scatter:
    """A horizontal line across the chart, named with its value in the legend (no label on the
    plot to cover a bar)."""
    return go.Scatter(
        name=f"{name} {tps:.1f} tok/s",
        x=span,
        y=[tps, tps],
        mode="lines",
        line={"color": colour, "dash": dash, "width": 1.5},
        hovertemplate=f"{name} %{{y:.1f}} tok/s<extra></extra>",
    )


def heatmap_ranges(now: Cycle) -> tuple[tuple[float, float], tuple[float, float]]:
    """Verify ms and accept length ranges with today's point in the middle (the accept length's
    range stops at 1, so an accept length under 1.5 sits below the middle)."""
    v, a = now.verify_ms, now.accept_len
    half = max(a - 1.0, 0.5)
    return (0.1 * v, 1.9 * v), (max(1.0, a - half), a + half)


def heatmap_figure(r: Ranking, points: int = 41) -> go.Figure:
    """tok/s per request over verify ms x accept length at today's draft and overhead, around
    today's point (marked); the plain-decoding break-even line where plain decoding is known."""
    now = r.current
    (x0, x1), (y0, y1) = heatmap_ranges(now)
    xs, ys = np.linspace(x0, x1, points), np.linspace(y0, y1, points)
    z = [
        [now.with_(verify_ms=float(x), accept_len=float(y)).tokens_per_s for x in xs] for y in ys
    ]  # points^2 Cycles: small
    fig = go.Figure(
        go.Heatmap(
            x=xs,
            y=ys,
            z=z,
            colorscale="Viridis",
            colorbar={"title": "tok/s"},
            hovertemplate="verify %{x:.3f} ms<br>accept %{y:.2f}<br>%{z:.1f} tok/s<extra></extra>",
        )
    )
    if r.plain is not None:  # speculation pays above accept length = cycle / decode step
        edge = [now.with_(verify_ms=float(x)).cycle_ms / r.plain.decode_ms for x in (x0, x1)]
        fig.add_trace(
            go.Scatter(
                x=[x0, x1],
                y=edge,
                mode="lines",
                name=f"break-even with plain decoding ({r.plain.decode_ms:.3f} ms per step)",
                line={"color": COLOURS["break-even"], "dash": "dash", "width": 3},
                hovertemplate="break-even: accept %{y:.2f} at verify %{x:.3f} ms<extra></extra>",
            )
        )
        if min(edge) > y1 or max(edge) < y0:
            fig.add_annotation(
                text=(
                    "the break-even with plain decoding is outside this view: at today's cycle"
                    f" speculation pays above accept length {r.plain.break_even_accept_len:.2f}"
                ),
                xref="paper",
                yref="paper",
                x=0.5,
                y=0.97,
                yanchor="top",
                showarrow=False,
                bgcolor="#ffffff",
                font={"color": COLOURS["today"]},
            )
    fig.add_trace(
        go.Scatter(
            x=[now.verify_ms],
            y=[now.accept_len],
            mode="markers+text",
            name="today",
            text=[f"today {now.tokens_per_s:.1f} tok/s"],
            textposition="top right",
            marker={"color": COLOURS["today"], "size": 14, "symbol": "x"},
            textfont={"color": "white"},
        )
    )
    fig.update_layout(
        title="tok/s per request over verify time and accept length (today's draft and overhead)",
        xaxis={"title": "verify ms", "range": [x0, x1]},
        yaxis={"title": "accept length (tokens per cycle)", "range": [y0, y1]},
        **LAYOUT,
    )
    return fig
