"""The report's step sections, the verdict's step group first: steps by phase (every group with
its cost per step and mode), the timeline of the group's median step, ranks and collectives, and
the group's top kernels (names shortened as Nsight Systems does, the full name on hover)."""

from __future__ import annotations

from typing import Any

from verifyprof.contracts import phases
from verifyprof.contracts.schema import WHOLE_TRACE, group_label
from verifyprof.report import figures
from verifyprof.report.data import (
    ReportData,
    cost_ns,
    modes,
    ms,
    story_group,
    story_groups,
)
from verifyprof.report.markup import chart, esc, kernel_cell, table

MAX_GROUP_CHARTS = 6  # step groups drawn as bar charts; all are in the table


def _top_phase(group: dict[str, Any]) -> str:
    """The phase with most of the step's cost (other steps' work in its window is no cost)."""
    costs = {p: v["mean"] for p, v in group["phases"].items() if p not in phases.OTHER}
    return max(costs, key=costs.__getitem__) if costs else "-"


def _story_label(data: ReportData) -> str:
    group = story_group(data)
    return group_label(group["name"], group["variant"]) if group else "-"


def steps_section(data: ReportData) -> list[str]:
    groups = story_groups(data)
    out = [
        '<h2 id="steps">Steps by phase</h2>',
        f'<p class="note">the verdict\'s group first: <b>{esc(_story_label(data))}</b>; then every'
        " other step group, with its cost per step (its wall less other steps' GPU work in its"
        " window) and mode</p>",
        table(
            [
                "step",
                "variant",
                "steps",
                "modes",
                "cost mean ms",
                "wall mean ms",
                "wall p50 ms",
                "wall p90 ms",
                "top phase",
            ],
            "twntnnnnt",
            [
                [
                    ("name", g["name"]),
                    ("variant", g["variant"]),
                    ("steps", g["steps"]),
                    ("modes", modes(g)),
                    ("cost-mean-ms", ms(cost_ns(g))),
                    ("wall-mean-ms", ms(g["wall_ns"]["mean"])),
                    ("wall-p50-ms", ms(g["wall_ns"]["p50"])),
                    ("wall-p90-ms", ms(g["wall_ns"]["p90"])),
                    ("top-phase", _top_phase(g)),
                ]
                for g in groups
            ],
            key="groups",
        ),
    ]
    for i, group in enumerate(groups[:MAX_GROUP_CHARTS]):
        rows = figures.group_rows(data.steps, group)
        title = group_label(group["name"], group["variant"])
        out.append(chart(figures.steps_figure(rows, data.phases, title), f"steps-{i}"))
    if len(groups) > MAX_GROUP_CHARTS:
        out.append(
            f'<p class="note">{len(groups) - MAX_GROUP_CHARTS} more step groups in the table above,'
            " not drawn</p>"
        )
    return out


def timeline_section(data: ReportData) -> list[str]:
    out = [f'<h2 id="timeline">Timeline of the median {esc(_story_label(data))} step</h2>']
    if not data.timelines:
        return out + [f'<p class="note">{esc(data.timeline_note or "no step to draw")}</p>']
    out.append(chart(figures.timeline_figure(data.timelines), "timeline"))
    rows = []
    for tl in data.timelines:
        shown = len(tl.ops)
        rows.append(
            [
                ("text", tl.text),
                ("rank", tl.rank),
                ("device", tl.device),
                ("step", tl.step),
                ("wall_ms", ms(tl.end_ns - tl.start_ns)),
                ("ops", f"{shown} of {tl.ops_total}" if shown < tl.ops_total else tl.ops_total),
                ("calls", len(tl.calls)),
                ("idle", ", ".join(f"{k} {ms(v)} ms" for k, v in sorted(tl.idle_ns.items()))),
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
            "wnnnnnnt",
            rows,
            key="timeline",
        )
    )
    return out


def ranks_section(data: ReportData) -> list[str]:
    group = story_group(data)
    collectives = data.summary.get("collectives") or {}
    several = group is not None and len(group["by_rank"]) > 1
    if not several and not collectives:
        return []
    out = ['<h2 id="ranks">Ranks and collectives</h2>']
    if several:
        out.append(chart(figures.ranks_figure(group, data.phases), "ranks"))
        out.append(
            table(
                ["rank", "steps", "wall mean ms", "wall p90 ms"],
                "nnnn",
                [
                    [
                        ("rank", r),
                        ("steps", v["steps"]),
                        ("wall-mean-ms", ms(v["wall_ns"]["mean"])),
                        ("wall-p90-ms", ms(v["wall_ns"]["p90"])),
                    ]
                    for r, v in group["by_rank"].items()
                ],
                key="ranks",
            )
        )
    if collectives:
        out.append(_collectives(collectives))
    return out


def _collectives(collectives: dict[str, Any]) -> str:
    def busbw(s: dict[str, Any]) -> str:
        return "-" if s.get("busbw_gbps_p50") is None else f"{s['busbw_gbps_p50']:.1f}"

    return table(
        [
            "collective",
            "calls",
            "devices",
            "transfer p50 ms",
            "wait p50 ms",
            "bytes p50",
            "busbw p50 GB/s",
        ],
        "tnnnnnn",
        [
            [
                ("family", f),
                ("calls", s["calls"]),
                ("devices", s["devices"]),
                ("transfer", ms(s["transfer_ns_p50"])),
                ("wait", ms(s["wait_ns_p50"])),
                ("bytes", s.get("bytes_p50") or "-"),
                ("busbw", busbw(s)),
            ]
            for f, s in collectives.items()
        ],
        key="collectives",
    )


def _kernel_scope(data: ReportData) -> str:
    """Which kernels the table lists, in words (the regex that selected them is no reading):
    ``kernels``' scope, the step count its calls per step are per."""
    k = data.kernels or {}
    scope = str(k.get("scope", ""))
    if data.group is not None and data.group[0] == WHOLE_TRACE:
        return "every kernel of the trace (--whole-trace: the whole trace is the step)"
    if scope.startswith("whole trace") or data.group is None or not data.group[0]:
        why = scope.removeprefix("whole trace").strip(" ()")
        return f"every kernel of the trace ({why or 'no step group'})"
    group = k.get("group") or {}
    lead = scope.split(":")[0] if ":" in scope else "the step group"
    steps = k.get("step_count") or 0
    count = f"{steps} " if steps else ""
    mode = f", its {group['mode']} steps" if group.get("mode") else ""
    return f"kernels launched inside the {count}{_story_label(data)} steps ({lead}{mode})"


def kernels_section(data: ReportData) -> list[str]:
    out = [f'<h2 id="kernels">Top kernels of {esc(_story_label(data))}</h2>']
    k = data.kernels
    if k is None:
        return out + [f'<p class="note">{esc(data.timeline_note or "no kernel table")}</p>']
    out.append(
        f'<p class="note" data-key="kernels-scope">{esc(_kernel_scope(data))}:'
        f" {k['distinct_kernels']} distinct kernels,"
        f" {ms(k['total_kernel_ns'])} ms of kernel time; the top {len(k['kernels'])} listed (names"
        " shortened as Nsight Systems does: hover for the full name)</p>"
    )
    out.append(kernel_table(k))
    return out


def kernel_table(k: dict[str, Any]) -> str:
    """The columns and statistics ``kernels`` prints, in its order: the share, the total, the
    calls (and per step), one call's median and its min-max, then the name (full on hover)."""
    per_step = bool(k.get("step_count"))
    headers = ["#", "phase", "%", "total ms", "calls"] + (["/step"] if per_step else [])
    headers += ["med us", "min-max us", "kernel"]
    rows = [
        [
            ("rank", str(i)),
            ("phase", r["phase"]),
            ("share", f"{100 * r['share']:.1f}"),
            ("total-ms", ms(r["total_ns"])),
            ("count", str(r["count"])),
        ]
        + ([("per-step", f"{r['calls_per_step']:.4g}")] if per_step else [])
        + [
            ("median-us", f"{r['median_ns'] / 1e3:.1f}"),
            ("min-max-us", f"{r['min_ns'] / 1e3:.1f}-{r['max_ns'] / 1e3:.1f}"),
            kernel_cell("name", r["name"]),
        ]
        for i, r in enumerate(k["kernels"], start=1)
    ]
    kinds = "ntnnn" + ("n" if per_step else "") + "nnw"
    return table(headers, kinds, rows, key="kernels")
