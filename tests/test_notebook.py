"""notebooks/walkthrough.ipynb runs top to bottom on the real traces (so it never rots)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def test_walkthrough_notebook_executes():
    notebook = nbformat.read(ROOT / "notebooks" / "walkthrough.ipynb", as_version=4)
    NotebookClient(
        notebook,
        timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    ).execute()
    outputs = [
        o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    ]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert (
        re.search(r"faster: verify (wall|cost) 12\.631 -> 2\.202 ms", text)
        and "cuda_graph_verify+cuda_graph_draft: predicted verify 2.048 ms" in text
        and "Today: speculating 95.0 tok/s" in text  # the verdict, as the CLI prints it
    )
    html = [
        o for o in outputs if o.output_type == "display_data" and "text/html" in o.get("data", {})
    ]
    assert len(html) >= 4  # the figures
    assert not [
        o for o in html if re.search(r"""<script[^>]*\bsrc=["']?https?:""", o["data"]["text/html"])
    ]  # plotly.js inline, no CDN
