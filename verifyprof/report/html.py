"""``verifyprof report``: one self-contained HTML file (plotly.js inline: it opens offline, no CDN).

Sections: verdict and what-if plan, per-step phases, the median verify step's timeline, ranks and
collectives, top kernels, the tok/s heatmap, and a before/after comparison. Every text that came
from a trace (kernel names, range texts, paths) is HTML-escaped; tables carry ``data-key``
attributes so tests read the numbers shown back from the page.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from verifyprof.contracts import outputs, phases
from verifyprof.report import figures
from verifyprof.report.compare import PREDICTION_ROWS
from verifyprof.report.data import ReportData

MAX_GROUP_CHARTS = 6  # step groups drawn as bar charts; all are in the table
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
td, th { border: 1px solid #ddd; padding: .25em .6em; text-align: right; } td.t, th.t { text-align: left; }
.verdict { font-size: 1.15em; background: #f4f8ff; border-left: 4px solid #1f77b4; padding: .6em 1em; }
.warn { background: #fff0f0; border-left: 4px solid #d62728; padding: .6em 1em; font-weight: bold; }
.note { color: #666; } code { background: #f4f4f4; padding: 0 .2em; } .vp-chart { min-height: 300px; }
"""
# After every chart has drawn: record where each is (tests screenshot those regions).
RECT_SCRIPT = """
window.addEventListener('load', function () {
  var charts = document.querySelectorAll('.vp-chart');
  charts.forEach(function (c) { var r = c.getBoundingClientRect();
    c.setAttribute('data-rect', [r.left + scrollX, r.top + scrollY, r.width, r.height].map(Math.round).join(',')); });
  document.body.setAttribute('data-charts', String(charts.length));
});
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def check_output(out: Path, inputs: list[str]) -> None:
    """Never write a report onto an input (a trace, breakdown or manifest), however it is
    spelled."""
    outputs.protect(inputs, [out])


def write_report(data: ReportData, out: Path) -> int:
    """Render and write atomically; returns the file's size in bytes."""
    page = render(data).encode()
    outputs.write_bytes(Path(out), page)
    return len(page)


def render(data: ReportData) -> str:
    body = [f"<h1>verifyprof report: {esc(data.source)}</h1>", _header(data)]
    body += _verdict_section(data)
    body += _steps_section(data)
    body += _timeline_section(data)
    body += _ranks_section(data)
    body += _kernels_section(data)
    body += _heatmap_section(data)
    body += _compare_section(data)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>verifyprof'
        f" report</title><style>{STYLE}</style><script"
        f' type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        + "\n".join(body)
        + f"\n<script>{RECT_SCRIPT}</script>\n</body></html>\n"
    )


def chart(fig: go.Figure, name: str) -> str:
    div = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        div_id=f"chart-{name}",
        config={"displaylogo": False, "responsive": True},
    )
    return f'<div class="vp-chart" data-chart="{esc(name)}">{div}</div>'


def table(
    headers: list[str], rows: list[list[tuple[str, Any]]], left: int = 1, key: str = ""
) -> str:
    """A table of escaped cells; each cell is (data-key, value)."""
    head = "".join(
        f'<th class="{"t" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(headers)
    )
    lines = []
    for r, row in enumerate(rows):
        cells = "".join(
            f'<td class="{"t" if i < left else ""}" data-key="{esc(k)}"'
            f' data-row="{r}">{esc(v)}</td>'
            for i, (k, v) in enumerate(row)
        )
        lines.append(f"<tr>{cells}</tr>")
    return f'<table data-table="{esc(key)}"><tr>{head}</tr>{"".join(lines)}</table>'


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


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


def _first_group(data: ReportData) -> dict[str, Any] | None:
    groups = data.summary.get("groups") or []
    return groups[0] if groups else None


def verdict_text(data: ReportData) -> str:
    """The what-if's verdict when it gives one; else the verify step in words from the summary."""
    if data.whatif and data.whatif.get("verdict"):
        return str(data.whatif["verdict"])
    group = _first_group(data)
    if group is None:
        return "no steps"
    idle = set(phases.IDLE)
    top = max(data.phases, key=lambda p: group["phases"][p]["mean"] if p in group["phases"] else -1)
    share = group["phases"][top]["share"]
    modes = ", ".join(f"{m} x{n}" for m, n in group["modes"].items())
    text = (
        f"{group['name']} {group['variant']}: median {_ms(group['wall_ns']['p50'])} ms, mean"
        f" {_ms(group['wall_ns']['mean'])} ms ({modes}; {group['launches']['mean']} launches and"
        f" {group['kernels']['mean']} kernels per step). Dominant cost: {top} ({100 * share:.1f}%"
        f" of the step{', GPU idle' if top in idle else ''})."
    )
    if data.whatif and data.whatif.get("candidates"):
        best = data.whatif["candidates"][0]
        text += (
            f" Best single candidate: {best['name']} -> {best['tokens_per_s']:.1f} tok/s"
            f" ({100 * best['gain']:+.1f}%)."
        )
    return text


def _verdict_section(data: ReportData) -> list[str]:
    out = [
        '<h2 id="verdict">Verdict and what-if plan</h2>',
        f'<p class="verdict" data-key="verdict">{esc(verdict_text(data))}</p>',
    ]
    w = data.whatif
    if w is None:
        return out + [
            '<p class="note"'
            f' data-key="no-plan">{esc(data.whatif_note or "no plan: give an accept length")}</p>'
        ]
    cur = w["current"]
    out.append(
        f"<p>Today: verify {cur['verify_ms']:.3f} ms ({esc(cur['mode'])}), cycle"
        f" {cur['cycle_ms']:.3f} ms, accept length {cur['accept_len']:.3f} &rarr; <b"
        f' data-key="today-tps">{cur["tokens_per_s"]:.1f}</b> tok/s per request</p>'
    )
    if not w.get("plan"):
        out.append(
            '<p class="note">no stacked plan in this what-if: candidates are shown each alone</p>'
        )
    out.append(chart(figures.plan_figure(w), "plan"))
    lines = w.get("plan") or w.get("candidates", [])
    out.append(
        table(
            ["candidate", "verify ms", "cycle ms", "tok/s", "gain", "assumptions"],
            [
                [
                    ("name", c["name"]),
                    ("verify_ms", f"{c['verify_ms']:.3f}"),
                    ("cycle_ms", f"{c['cycle_ms']:.3f}"),
                    ("tokens_per_s", f"{c['tokens_per_s']:.1f}"),
                    ("gain", f"{100 * c['gain']:+.1f}%"),
                    ("assumptions", "; ".join(c.get("assumptions", []))),
                ]
                for c in lines
            ],
            key="plan",
        )
    )
    if w.get("unaddressed"):
        out.append(
            table(
                ["phase not addressed", "ms", "reason"],
                [
                    [("phase", u["phase"]), ("ms", f"{u['ms']:.3f}"), ("reason", u["reason"])]
                    for u in w["unaddressed"]
                ],
                key="unaddressed",
            )
        )
    if w.get("skipped"):
        out.append(
            '<p class="note">not applicable: '
            + "; ".join(f"{esc(s['name'])}: {esc(s['reason'])}" for s in w["skipped"])
            + "</p>"
        )
    return out


def _steps_section(data: ReportData) -> list[str]:
    groups = data.summary.get("groups") or []
    out = [
        '<h2 id="steps">Steps by phase</h2>',
        table(
            [
                "step",
                "variant",
                "steps",
                "modes",
                "wall mean ms",
                "wall p50 ms",
                "wall p90 ms",
                "top phase",
            ],
            [
                [
                    ("name", g["name"]),
                    ("variant", g["variant"]),
                    ("steps", g["steps"]),
                    ("modes", ", ".join(f"{m} x{n}" for m, n in g["modes"].items())),
                    ("wall-mean-ms", _ms(g["wall_ns"]["mean"])),
                    ("wall-p50-ms", _ms(g["wall_ns"]["p50"])),
                    ("wall-p90-ms", _ms(g["wall_ns"]["p90"])),
                    ("top-phase", max(g["phases"], key=lambda p: g["phases"][p]["mean"])),
                ]
                for g in groups
            ],
            left=2,
            key="groups",
        ),
    ]
    for i, group in enumerate(groups[:MAX_GROUP_CHARTS]):
        rows = figures.group_rows(data.steps, group)
        out.append(
            chart(
                figures.steps_figure(
                    rows, data.phases, f"{group['name']} {group['variant']}".strip()
                ),
                f"steps-{i}",
            )
        )
    if len(groups) > MAX_GROUP_CHARTS:
        out.append(
            f'<p class="note">{len(groups) - MAX_GROUP_CHARTS} more step groups in the table above,'
            " not drawn</p>"
        )
    return out


def _timeline_section(data: ReportData) -> list[str]:
    out = ['<h2 id="timeline">Timeline of the median verify step</h2>']
    if not data.timelines:
        return out + [f'<p class="note">{esc(data.timeline_note or "no step to draw")}</p>']
    out.append(chart(figures.timeline_figure(data.timelines), "timeline"))
    rows = []
    for tl in data.timelines:
        idle = tl.idle_ns
        rows.append(
            [
                ("text", tl.text),
                ("rank", tl.rank),
                ("device", tl.device),
                ("step", tl.step),
                ("wall_ms", _ms(tl.end_ns - tl.start_ns)),
                (
                    "ops",
                    (
                        f"{len(tl.ops)} of {tl.ops_total}"
                        if len(tl.ops) < tl.ops_total
                        else tl.ops_total
                    ),
                ),
                ("calls", len(tl.calls)),
                ("idle", ", ".join(f"{k} {_ms(v)} ms" for k, v in sorted(idle.items()))),
            ]
        )
    out.append(
        table(
            [
                "range",
                "rank",
                "device",
                "step",
                "wall ms",
                "GPU ops",
                "launch calls",
                "idle by kind",
            ],
            rows,
            key="timeline",
        )
    )
    return out


def _ranks_section(data: ReportData) -> list[str]:
    group = _first_group(data)
    collectives = data.summary.get("collectives") or {}
    if (group is None or len(group["by_rank"]) < 2) and not collectives:
        return []
    out = ['<h2 id="ranks">Ranks and collectives</h2>']
    if group is not None and len(group["by_rank"]) > 1:
        out.append(chart(figures.ranks_figure(group, data.phases), "ranks"))
        out.append(
            table(
                ["rank", "steps", "wall mean ms", "wall p90 ms"],
                [
                    [
                        ("rank", r),
                        ("steps", v["steps"]),
                        ("wall-mean-ms", _ms(v["wall_ns"]["mean"])),
                        ("wall-p90-ms", _ms(v["wall_ns"]["p90"])),
                    ]
                    for r, v in group["by_rank"].items()
                ],
                key="ranks",
            )
        )
    if collectives:
        out.append(
            table(
                [
                    "collective",
                    "calls",
                    "devices",
                    "transfer p50 ms",
                    "wait p50 ms",
                    "bytes p50",
                    "busbw p50 GB/s",
                ],
                [
                    [
                        ("family", f),
                        ("calls", s["calls"]),
                        ("devices", s["devices"]),
                        ("transfer", _ms(s["transfer_ns_p50"])),
                        ("wait", _ms(s["wait_ns_p50"])),
                        ("bytes", s.get("bytes_p50") or "-"),
                        (
                            "busbw",
                            (
                                "-"
                                if s.get("busbw_gbps_p50") is None
                                else f"{s['busbw_gbps_p50']:.1f}"
                            ),
                        ),
                    ]
                    for f, s in collectives.items()
                ],
                key="collectives",
            )
        )
    return out


def _kernels_section(data: ReportData) -> list[str]:
    out = ['<h2 id="kernels">Top kernels</h2>']
    k = data.kernels
    if k is None:
        return out + [f'<p class="note">{esc(data.timeline_note or "no kernel table")}</p>']
    out.append(
        f'<p class="note">{esc(k["scope"])}: {k["distinct_kernels"]} distinct kernels,'
        f" {_ms(k['total_kernel_ns'])} ms of kernel time; the top {len(k['kernels'])} listed</p>"
    )
    out.append(
        table(
            ["kernel", "phase", "count", "total ms", "mean us", "share"],
            [
                [
                    ("name", r["name"]),
                    ("phase", r["phase"]),
                    ("count", r["count"]),
                    ("total-ms", _ms(r["total_ns"])),
                    ("mean-us", f"{r['mean_ns'] / 1e3:.1f}"),
                    ("share", f"{100 * r['share']:.1f}%"),
                ]
                for r in k["kernels"]
            ],
            key="kernels",
        )
    )
    return out


def _heatmap_section(data: ReportData) -> list[str]:
    out = ['<h2 id="heatmap">Tokens/s over verify time and accept length</h2>']
    if data.whatif is None:
        return out + [
            f'<p class="note">{esc(data.whatif_note or "no plan: give an accept length")}</p>'
        ]
    return out + [chart(figures.heatmap_figure(data.whatif), "heatmap")]


def _compare_section(data: ReportData) -> list[str]:
    c = data.compare
    if c is None:
        return []
    out = [
        '<h2 id="compare">Before / after</h2>',
        f"<p>before: {esc(c['before']['source'])}<br>after: {esc(c['after']['source'])}</p>",
    ]
    out += [f'<p class="warn" data-key="compare-warning">{esc(w)}</p>' for w in c["warnings"]]
    if c["mode_switch"] and not c["warnings"]:
        out.append(f'<p data-key="mode-switch">verify mode changed: {esc(c["mode_switch"])}</p>')
    out.append(f'<p class="verdict" data-key="compare-verdict">{esc(c["verdict_line"])}</p>')
    out.append(chart(figures.compare_figure(c), "compare"))
    rows = [
        [
            ("phase", r["phase"]),
            ("before", f"{r['before_ms']:.3f}"),
            ("after", f"{r['after_ms']:.3f}"),
            ("delta", f"{r['delta_ms']:+.3f}"),
            ("delta-pct", "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}%"),
        ]
        for r in c["phases"]
    ]
    v = c["verify"]
    rows.append(
        [
            ("phase", f"verify {v['measure']}"),
            ("before", f"{v['before_ms']:.3f}"),
            ("after", f"{v['after_ms']:.3f}"),
            ("delta", f"{v['delta_ms']:+.3f}"),
            ("delta-pct", f"{v['delta_pct']:+.1f}%"),
        ]
    )
    rows += [
        [
            ("phase", f"{k} per step"),
            ("before", f"{n['before']:.1f}"),
            ("after", f"{n['after']:.1f}"),
            ("delta", f"{n['delta']:+.1f}"),
            ("delta-pct", ""),
        ]
        for k, n in c["counts"].items()
    ]
    out.append(
        table(["phase (mean ms)", "before", "after", "delta", "delta %"], rows, key="compare")
    )
    for p in c["predictions"]:
        out.append(
            table(
                [f"prediction check: {p['candidate']}", "predicted", "measured", "error"],
                [
                    [
                        ("what", label),
                        ("pred", f"{p[f'predicted_{key}']:{fmt}}"),
                        ("meas", f"{p[f'measured_{key}']:{fmt}}"),
                        ("err", f"{p[error]:+.1f}%" if p[error] is not None else "-"),
                    ]
                    for label, key, error, fmt in PREDICTION_ROWS
                ],
                key="prediction",
            )
        )
        out.append(
            f'<p class="note">the change seen: {esc("; ".join(p["change"]))}; modelled by'
            f" {esc(', '.join(p['applied']))}</p>"
        )
    if c.get("prediction_note"):
        out.append(f'<p class="note">prediction check: {esc(c["prediction_note"])}</p>')
    fam = c["kernel_families"]
    if fam.get("available"):
        out.append(
            f"<p>kernel families in the verify ranges: {fam['families_before']} &rarr;"
            f" {fam['families_after']}</p>"
        )
        listed = [
            [
                ("change", kind),
                ("family", r["family"]),
                ("phase", r["phase"]),
                ("ms", f"{r['after_ms' if kind == 'appeared' else 'before_ms']:.3f}"),
            ]
            for kind in ("appeared", "vanished")
            for r in fam[kind]
        ]
        if listed:
            out.append(
                table(["change", "family", "phase", "total ms"], listed, left=3, key="families")
            )
    else:
        out.append(f'<p class="note">kernel families: {esc(fam.get("reason", ""))}</p>')
    if len(c["ranks"]) > 1:
        out.append(
            table(
                ["rank", "before ms", "after ms", "delta %"],
                [
                    [
                        ("rank", r["rank"]),
                        ("before", r["before_ms"]),
                        ("after", r["after_ms"]),
                        ("delta-pct", r["delta_pct"]),
                    ]
                    for r in c["ranks"]
                ],
                key="compare-ranks",
            )
        )
    return out
