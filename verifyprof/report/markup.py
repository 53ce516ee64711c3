"""The HTML report's building blocks: escaped text, tables whose text wraps and whose numbers
line up on the right, a plotly chart in a ``div`` that tests can find, and the step groups in the
order the story tells them (the verdict's group first: report.data)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from verifyprof.attribution.kernel_names import short_kernel_name

# A cell: (data-key, value) or (data-key, value, title: the full text shown on hover).
Cell = tuple[str, Any] | tuple[str, Any, str]
# A column's kind: t text (left-aligned, wraps between words), w wide text that may run long
# (kernel names, range texts, prose: also wraps inside a word), n a number (right-aligned).
KINDS = "twn"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


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
