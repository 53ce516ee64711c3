"""notebooks/walkthrough.ipynb runs top to bottom on the real traces (so it never rots), as one
run of its trace: the eager trace and its manifest are each read once (issue 43)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
EAGER = "workload-dense-eager"

# Run before the notebook's own cells: every trace the pipeline reads (its readers, given a path)
# and every open of the eager capture's manifest, printed after its last cell as READS {...}.
COUNT_READS = (
    """
import json as _json, sys as _sys
from pathlib import Path as _Path
from verifyprof.pipeline import reading as _reading

_reads = {"traces": [], "manifest": 0}


def _counted(real):
    def read(source, *args, **kwargs):
        if isinstance(source, (str, _Path)):
            _reads["traces"].append(str(source))
        return real(source, *args, **kwargs)

    return read


for _name in ("load", "breakdown"):  # the pipeline's two ways to read a trace file
    setattr(_reading, _name, _counted(getattr(_reading, _name)))


def _audit(event, args):
    if event == "open" and str(args[0]).endswith("%s/manifest.json"):
        _reads["manifest"] += 1


_sys.addaudithook(_audit)
"""
    % EAGER
)


@pytest.fixture(scope="module")
def executed() -> tuple[list, dict]:
    """The notebook executed once: its cells' outputs, and what it read."""
    notebook = nbformat.read(ROOT / "notebooks" / "walkthrough.ipynb", as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(COUNT_READS))
    notebook.cells.append(nbformat.v4.new_code_cell('print("READS", _json.dumps(_reads))'))
    NotebookClient(
        notebook,
        timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    ).execute()
    outputs = [
        o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    ]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    found = re.search(r"^READS (.*)$", text, re.M)
    return outputs, json.loads(found.group(1)) if found else {}


def test_walkthrough_notebook_executes(executed):
    outputs, _ = executed
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


def test_the_notebook_reads_the_eager_trace_once_and_its_manifest_once(executed):
    _, reads = executed
    assert len([t for t in reads["traces"] if EAGER in t]) == 1
    assert reads["manifest"] == 1
