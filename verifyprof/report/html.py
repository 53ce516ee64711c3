"""``verifyprof report``: one self-contained HTML file (plotly.js inline: it opens offline, no CDN).

Sections: the before/after comparison when there is one (``--compare``: first), the decision
(what to do first, speculating against plain decoding today and after the plan, the best number
of drafts), the verdict and what-if plan, one cycle per configuration and the draft-count curve,
the tok/s heatmap (:mod:`.html_verdict`, from the model's typed Ranking); steps by phase, the
timeline of the verdict's group's median step, ranks and collectives, that group's top kernels
(:mod:`.html_steps`). Every text that came from a trace (kernel names, range texts, paths) is
HTML-escaped; tables carry ``data-key``
attributes so tests read the numbers shown back from the page.
"""

from __future__ import annotations

from pathlib import Path

from plotly.offline import get_plotlyjs

from verifyprof.contracts.plumbing import outputs
from verifyprof.contracts.plumbing.text import undecodable_escaped
from verifyprof.report.data import ReportData
from verifyprof.report.html_compare import compare_section
from verifyprof.report.html_load import load_section
from verifyprof.report.html_steps import (
    kernels_section,
    ranks_section,
    steps_section,
    timeline_section,
)
from verifyprof.report.html_verdict import (
    cycles_section,
    heatmap_section,
    verdict_section,
)
from verifyprof.report.markup import esc
from verifyprof.report.verdict_words import verdict_text

__all__ = ["check_output", "render", "verdict_text", "write_report"]
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222;
  padding: 0 1em; }
h1 { font-size: 1.5em; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; max-width: 100%; }
td, th { border: 1px solid #ddd; padding: .25em .6em; vertical-align: top; }
.t, .w { text-align: left; overflow-wrap: break-word; }
.w { overflow-wrap: anywhere; min-width: 12em; white-space: pre-line; }
.n { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
th.n { white-space: normal; }
.verdict { font-size: 1.15em; background: #f4f8ff; border-left: 4px solid #1f77b4;
  padding: .6em 1em; margin-bottom: .2em; }
.about { color: #444; margin-top: .2em; padding-left: 1.2em; }
.warn { background: #fff0f0; border-left: 4px solid #d62728; padding: .6em 1em;
  font-weight: bold; }
.decision { font-size: 1.1em; line-height: 1.5; padding-left: 1.4em; }
.note { color: #666; } code { background: #f4f4f4; padding: 0 .2em; }
.vp-chart { min-height: 300px; }
"""
# After every chart has drawn: record where each is (tests screenshot those regions).
RECT_SCRIPT = """
window.addEventListener('load', function () {
  var charts = document.querySelectorAll('.vp-chart');
  charts.forEach(function (c) { var r = c.getBoundingClientRect();
    c.setAttribute('data-rect', [r.left + scrollX, r.top + scrollY, r.width, r.height]
      .map(Math.round).join(',')); });
  document.body.setAttribute('data-charts', String(charts.length));
});
"""


def check_output(out: Path, inputs: list[str]) -> None:
    """Never write a report onto an input (a trace, breakdown or manifest), however it is
    spelled."""
    outputs.protect(inputs, [out])


def write_report(data: ReportData, out: Path) -> int:
    """Render and write atomically; returns the file's size in bytes."""
    page = undecodable_escaped(render(data)).encode()  # a name's non-UTF-8 byte: \xff
    outputs.write_bytes(Path(out), page)
    return len(page)


def render(data: ReportData) -> str:
    body = [f"<h1>verifyprof report: {esc(data.source)}</h1>", _header(data)]
    sections = [  # the decision first; a before/after comparison before everything
        verdict_section,
        cycles_section,
        load_section,
        heatmap_section,
        steps_section,
        timeline_section,
        ranks_section,
        kernels_section,
    ]
    for section in [compare_section, *sections]:
        body += section(data)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>verifyprof'
        f" report</title><style>{STYLE}</style><script"
        f' type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        + "\n".join(body)
        + f"\n<script>{RECT_SCRIPT}</script>\n</body></html>\n"
    )


def _header(data: ReportData) -> str:
    t = data.trace
    gpus = (
        ", ".join(
            sorted({str(d.get("name", "")) for d in t.get("devices", []) if isinstance(d, dict)})
        )
        or "-"
    )
    parts = [
        f"format {esc(t.get('format', '-'))}",
        f"{esc(t.get('kernels', '-'))} kernels",
        f"GPUs: {esc(gpus)}",
        f"ranks: {esc(t.get('ranks') or '-')}",
        f"{len(data.steps)} step rows",
    ]
    warnings = "".join(f'<p class="warn">{esc(w)}</p>' for w in t.get("warnings", []))
    return f'<p class="note">{" &middot; ".join(parts)}</p>{warnings}' + "".join(
        f'<p class="note">{esc(n)}</p>' for n in data.notes
    )
