"""The load curve's chart: tokens/s per GPU against the batch size, one line per draft count k,
plain decoding (k = 0) as the reference line, today's batch and where the verify turns
compute-bound marked. Every number is the model's (``decision.load.LoadCurve``)."""

from __future__ import annotations

import plotly.graph_objects as go

from verifyprof.model.decision.load import ContextCurve, LoadCurve
from verifyprof.report.figures import COLOURS, LAYOUT
from verifyprof.report.figures_basis import add_bands, mark_extrapolated


def load_figure(load: LoadCurve, curve: ContextCurve) -> go.Figure:
    """tok/s per GPU by batch (log axis), one line per k; per-request rates in the hover."""
    fig = go.Figure()
    batches = [row.batch for row in curve.rows]
    names = [str(b) for b in batches]  # category axis: one evenly spaced slot per batch
    ks = [p["num_draft"] for p in curve.rows[0].points]
    for i, k in enumerate(ks):
        points = [row.points[i] for row in curve.rows]
        plain = k == 0
        fig.add_trace(
            go.Scatter(
                name="plain decoding (k = 0)" if plain else f"k = {k}",
                x=names,
                y=[p["tokens_per_s_per_gpu"] for p in points],
                customdata=[p["tokens_per_s"] for p in points],
                mode="lines+markers",
                line={
                    "color": COLOURS.get(f"k = {k}", COLOURS["tokens/s"]),
                    "width": 4 if plain or k == load.current_k else 2,
                    **({"dash": "dash"} if plain else {}),
                },
                hovertemplate=f"k = {k}, batch %{{x}}: %{{y:,.0f}} tok/s per GPU,"
                " %{customdata:.1f} per request<extra></extra>",
            )
        )
    best = [row.best for row in curve.rows]
    fig.add_trace(
        go.Scatter(
            name="best k at each batch",
            x=names,
            y=[p["tokens_per_s_per_gpu"] for p in best],
            customdata=[p["num_draft"] for p in best],
            mode="markers",
            marker={"color": COLOURS["best"], "size": 12, "symbol": "star"},
            hovertemplate="batch %{x}: best k = %{customdata}<extra></extra>",
        )
    )
    rows = [row.to_json() for row in curve.rows]
    add_bands(
        fig,
        names,
        [row["points"][ks.index(row["best_num_draft"])] for row in rows],
        "tokens_per_s_per_gpu",
        "best k",
    )
    mark_extrapolated(fig, names, curve.to_json().get("extrapolated_from_batch"))
    bound = curve.ridge_batch.get(load.current_k)
    if bound is not None:
        at = next((str(b) for b in batches if b >= bound), names[-1])
        fig.add_vline(
            x=names.index(at),
            line={"color": COLOURS["today"], "dash": "dot"},
            annotation_text=f"verify at k = {load.current_k} compute-bound from batch {bound:g}",
        )
    fig.update_layout(
        title=f"tok/s per GPU by batch size, context {curve.context:g} tokens (predicted)",
        xaxis={
            "title": "batch (requests per step); under each, its best k",
            "type": "category",  # evenly spaced: a log axis packs 1, 2, 4 into a few pixels
            "tickvals": names,
            "ticktext": [f"{b}<br>k={p['num_draft']}" for b, p in zip(batches, best)],
        },
        yaxis_title="tok/s per GPU",
        **LAYOUT,
    )
    return fig
