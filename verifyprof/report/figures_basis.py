"""What each point of the draft-count and load curves rests on, drawn on their charts: the band
as an error bar around every point (its basis and band in the hover), and where a load curve
turns extrapolated. Every number is the model's (each point's ``basis`` and ``band``)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from verifyprof.model.decision.load_points import rate_band
from verifyprof.report.figures import COLOURS

# A point's basis, from the most to the least confident, as a colour of the colour table: its
# band drawn as an error bar with a short dash at the point, so the curve's own markers (which
# verify time was traced) stay in view.
BASIS_COLOURS = {
    "measured": COLOURS["gain"],
    "interpolated": COLOURS["tokens/s"],
    "extrapolated": COLOURS["draft"],
    "roofline": COLOURS["loss"],
}


def basis_words(point: dict[str, Any]) -> str:
    """``measured``, ``extrapolated +/-12%``: a point's basis and band, as whatif prints it."""
    basis = point.get("basis") or point.get("verify_source") or "predicted"
    band = rate_band(point) or 0.0
    return basis if basis == "measured" or not band else f"{basis} +/-{band:.0%}"


def add_bands(fig: go.Figure, xs: list, points: list[dict[str, Any]], y: str, name: str) -> None:
    """One marker trace per basis over ``points`` (their ``y`` values at ``xs``), each with its
    band as an error bar: the legend says which points a capture measured and which the model
    extrapolated."""
    for basis in dict.fromkeys(p.get("basis") for p in points):
        if basis is None:
            continue
        chosen = [(x, p) for x, p in zip(xs, points) if p.get("basis") == basis]
        colour = BASIS_COLOURS.get(basis, COLOURS["other"])
        fig.add_trace(
            go.Scatter(
                name=f"{name} {basis} (band)",
                x=[x for x, _ in chosen],
                y=[p[y] for _, p in chosen],
                customdata=[basis_words(p) for _, p in chosen],
                mode="markers",
                error_y={
                    "type": "data",
                    "array": [p[y] * (rate_band(p) or 0.0) for _, p in chosen],
                    "color": colour,
                    "thickness": 1.5,
                },
                marker={"color": colour, "size": 14, "symbol": "line-ew-open"},
                hovertemplate=f"%{{x}}: %{{y:,.1f}} ({name} %{{customdata}})<extra></extra>",
            )
        )


def mark_extrapolated(fig: go.Figure, names: list[str], at: int | None) -> None:
    """A dotted line where a load curve's rows stop resting on a capture (category axis)."""
    if at is None or str(at) not in names:
        return
    fig.add_vline(
        x=names.index(str(at)) - 0.5,
        line={"color": COLOURS["loss"], "dash": "dot"},
        annotation_text=f"batch {at} and up extrapolated",
        annotation_position="top right",
    )
