"""The HTML report's building blocks: escaped text, tables whose text wraps and whose numbers
line up on the right, a plotly chart in a ``div`` that tests can find, and the step groups in the
order the story tells them (the verdict's group first)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from verifyprof.attribution.kernel_names import short_kernel_name
from verifyprof.report.data import ReportData

# A cell: (data-key, value) or (data-key, value, title: the full text shown on hover).
Cell = tuple[str, Any] | tuple[str, Any, str]
# A column's kind: t text (left-aligned, wraps between words), w wide text that may run long
# (kernel names, range texts, prose: also wraps inside a word), n a number (right-aligned).
KINDS = "twn"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def chart(fig: go.Figure, name: str) -> str:
    div = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        div_id=f"chart-{name}",
        config={"displaylogo": False, "responsive": True},
    )
    return f'<div class="vp-chart" data-chart="{esc(name)}">{div}</div>'


def table(headers: list[str], kinds: str, rows: list[list[Cell]], key: str = "") -> str:
    """A table of escaped cells, ``kinds`` one letter per column (``KINDS``): however long a
    kernel name, the table stays inside the page and its number columns stay in view."""
    if len(kinds) != len(headers) or set(kinds) - set(KINDS):
        raise ValueError(f"kinds {kinds!r} do not match headers {headers}")
    head = "".join(f'<th class="{k}">{esc(h)}</th>' for k, h in zip(kinds, headers))
    lines = []
    for r, row in enumerate(rows):
        cells = []
        for kind, cell in zip(kinds, row):
            title = f' title="{esc(cell[2])}"' if len(cell) > 2 else ""
            cells.append(
                f'<td class="{kind}" data-key="{esc(cell[0])}" data-row="{r}"{title}>'
                f"{esc(cell[1])}</td>"
            )
        lines.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table data-table="{esc(key)}"><tr>{head}</tr>{"".join(lines)}</table>'


def kernel_cell(key: str, name: str) -> Cell:
    """A kernel name as Nsight Systems shortens it, the full name on hover."""
    return (key, short_kernel_name(name), name)


def group_label(name: str, variant: str) -> str:
    return f"{name} {variant}".strip()


def story_groups(data: ReportData) -> list[dict[str, Any]]:
    """The summary's step groups, the verdict's group (``data.group``) first, the rest in the
    summary's order."""
    groups = list(data.summary.get("groups") or [])
    if data.group is None:
        return groups
    first = [g for g in groups if (g["name"], g["variant"]) == tuple(data.group)]
    return first + [g for g in groups if g not in first]


def story_group(data: ReportData) -> dict[str, Any] | None:
    groups = story_groups(data)
    return groups[0] if groups else None


def cost_ns(group: dict[str, Any]) -> float:
    """A group's mean cost per step: its wall less other steps' GPU work in its window (the wall
    in summaries from before cost_ns)."""
    return float((group.get("cost_ns") or group["wall_ns"])["mean"])


def modes(group: dict[str, Any]) -> str:
    return ", ".join(f"{m} x{n}" for m, n in group["modes"].items())
