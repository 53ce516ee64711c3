"""The report's what-if sections, from the model's typed Ranking: the verdict (the same text as the
console and ``--json``: ``Verdict.text()``, never re-worded here), the group it is about and its
warnings, the plan, every candidate, plain decoding, one cycle per configuration, the draft-count
curve and the tokens/s heatmap."""

from __future__ import annotations

from verifyprof.model.decision.candidates import Ranking
from verifyprof.model.decision.load_points import rate_band
from verifyprof.model.decision.verdict import accept_reach
from verifyprof.report import figures_cycle
from verifyprof.report.data import ReportData
from verifyprof.report.figures_basis import add_bands, basis_words
from verifyprof.report.markup import chart, esc, table
from verifyprof.report.verdict_words import decision_items, verdict_text

NO_PLAN = "no plan: give an accept length"


def verdict_section(data: ReportData) -> list[str]:
    r = data.ranking
    verdict = r.verdict if r is not None else None
    about = verdict.group if verdict is not None else data.group_why
    out = [
        '<h2 id="verdict">Verdict and what-if plan</h2>',
        f'<p class="verdict" data-key="verdict">{esc(verdict_text(data))}</p>',
        f'<p class="about" data-key="verdict-about">about: {esc(about or "-")}</p>',
    ]
    if r is None or verdict is None:
        return out + [f'<p class="note" data-key="no-plan">{esc(data.whatif_note or NO_PLAN)}</p>']
    out.append(_numbers_are(r))
    out[1:1] = decision_list(verdict)  # the decision first, the whole verdict under it
    out += [f'<p class="warn" data-key="verdict-caution">{esc(w)}</p>' for w in verdict.cautions]
    out += [f'<p class="warn" data-key="verdict-warning">{esc(w)}</p>' for w in verdict.warnings]
    out.append(_today(r))
    out += _plain(r)
    if not r.plan:
        out.append(
            '<p class="note">no stacked plan in this what-if: candidates are shown each alone</p>'
        )
    out.append(chart(figures_cycle.plan_figure(r), "plan"))
    out += _plan_table(r) + _candidates_table(r) + _left_out(r)
    return out


def _numbers_are(r: Ranking) -> str:
    """Which steps the verdict's numbers are: the mean step of one device, traced or at the
    unprofiled rate (whatif's basis); with several devices, not the steps table's mean."""
    v, devices = r.profile.verify, r.profile.devices
    n = f"{v.steps} step" + ("s" if v.steps != 1 else "")
    where = (
        f" on device {v.device}, the critical one of {devices} (the steps table's means are over"
        " every device)"
        if devices > 1
        else ""
    )
    basis = (
        f"at the unprofiled rate (the profiler's dilation {r.dilation:.2f}x taken out)"
        if r.dilation
        else "as traced"
    )
    return f'<p class="about" data-key="verdict-steps">numbers: the mean of {n}{where}, {basis}</p>'


def decision_list(verdict) -> list[str]:
    """What to do first, speculating against plain decoding today and after the plan, and the
    best number of drafts: the verdict's own sentences, one item each, before the rest."""
    lis = [
        f'<li data-key="{key}"><b>{esc(label)}:</b> {esc(text)}</li>'
        for key, label, text in decision_items(verdict)
    ]
    return [f'<ul class="decision" data-key="decision">{"".join(lis)}</ul>'] if lis else []


def _today(r: Ranking) -> str:
    c, v = r.current, r.profile.verify
    width = f", width {r.profile.width}" if r.profile.width else ""
    overlap = f" - overlap {c.overlap_ms:.3f}" if c.overlap_ms else ""
    return (
        f"<p>Today: cycle {c.cycle_ms:.3f} ms = draft {c.draft_ms:.3f} + verify {c.verify_ms:.3f}"
        f" ({esc(v.mode)}{width}) + overhead {c.overhead_ms:.3f}{overlap} ms, accept length"
        f' {c.accept_len:.3f} &rarr; <b data-key="today-tps">{c.tokens_per_s:.1f}</b> tok/s per'
        " request</p>"
    )


def _plain(r: Ranking) -> list[str]:
    p = r.plain
    if p is None:
        return [
            '<p class="note" data-key="no-plain">plain decoding: not known (the verdict says'
            " why)</p>"
        ]
    return [
        table(
            [
                "plain decoding",
                "tok/s",
                "ms per step",
                "break-even accept length",
                "break-even cycle ms",
                "plan wins from step",
            ],
            "wnnnnn",
            [
                [
                    ("source", p.source),
                    ("tokens_per_s", f"{p.tokens_per_s:.1f}"),
                    ("decode_ms", f"{p.decode_ms:.3f}"),
                    (
                        "break_even_accept_len",
                        f"{p.break_even_accept_len:.2f}"
                        + (
                            f" ({r})"
                            if (r := accept_reach(p.break_even_accept_len, p.max_accept_len))
                            else ""
                        ),
                    ),
                    ("break_even_cycle_ms", f"{p.break_even_cycle_ms:.3f}"),
                    ("wins_from", p.wins_from or "-"),
                ]
            ],
            key="plain",
        )
    ]


def _plan_table(r: Ranking) -> list[str]:
    if not r.plan:
        return []
    along = r.plain.along_plan if r.plain is not None else []
    rows = []
    for i, step in enumerate(r.plan):
        c = step.candidate
        rows.append(
            [
                ("step", i + 1),
                ("name", c.name),
                ("verify_ms", f"{c.cycle.verify_ms:.3f}"),
                ("cycle_ms", f"{c.cycle.cycle_ms:.3f}"),
                ("accept_len", f"{c.cycle.accept_len:.2f}"),
                ("tokens_per_s", f"{step.cumulative_tps:.1f}"),
                ("gain", f"{100 * (step.cumulative_tps / step.baseline_tps - 1):+.1f}%"),
                ("plain", f"{along[i]:.1f}" if i < len(along) else "-"),
                ("assumptions", "\n".join(c.assumptions)),
            ]
        )
    return [
        table(
            [
                "step",
                "fix (stacked)",
                "verify ms",
                "cycle ms",
                "accept",
                "tok/s",
                "gain",
                "plain decoding, same fixes",
                "assumptions",
            ],
            "ntnnnnnnw",
            rows,
            key="plan",
        )
    ]


def _candidates_table(r: Ranking) -> list[str]:
    rows = [
        [
            ("name", c.name),
            ("verify_ms", f"{c.cycle.verify_ms:.3f}"),
            ("cycle_ms", f"{c.cycle.cycle_ms:.3f}"),
            ("accept_len", f"{c.cycle.accept_len:.2f}"),
            ("tokens_per_s", f"{c.cycle.tokens_per_s:.1f}"),
            ("gain", f"{100 * c.gain:+.1f}%"),
            ("notes", "\n".join([f"blocked: {b}" for b in c.blocked] + c.warnings)),
        ]
        for c in r.candidates
    ]
    return [
        "<h3>Every candidate, each alone on today's cycle</h3>",
        table(
            ["candidate", "verify ms", "cycle ms", "accept", "tok/s", "gain", "notes"],
            "tnnnnnw",
            rows,
            key="candidates",
        ),
    ]


def _left_out(r: Ranking) -> list[str]:
    out = []
    if r.unaddressed:
        out.append(
            table(
                ["phase not addressed", "ms", "reason"],
                "tnw",
                [
                    [("phase", u["phase"]), ("ms", f"{u['ms']:.3f}"), ("reason", u["reason"])]
                    for u in r.unaddressed
                ],
                key="unaddressed",
            )
        )
    if r.skipped:
        out.append(
            '<p class="note">not applicable: '
            + "; ".join(f"{esc(s['name'])}: {esc(s['reason'])}" for s in r.skipped)
            + "</p>"
        )
    return out


def cycles_section(data: ReportData) -> list[str]:
    out = ['<h2 id="cycles">One cycle per configuration, and the number of drafts</h2>']
    r = data.ranking
    if r is None:
        return out + [f'<p class="note">{esc(data.whatif_note or NO_PLAN)}</p>']
    rows = figures_cycle.cycle_rows(r)
    out.append(chart(figures_cycle.cycle_figure(rows), "cycles"))
    out.append(
        table(
            [
                "configuration",
                "draft ms",
                "verify ms",
                "overhead ms",
                "cycle ms",
                "accept",
                "tok/s",
            ],
            "tnnnnnn",
            [
                [
                    ("label", row.label),
                    ("draft_ms", f"{row.draft_ms:.3f}"),
                    ("verify_ms", f"{row.verify_ms:.3f}"),
                    ("overhead_ms", f"{row.overhead_ms:.3f}"),
                    ("cycle_ms", f"{row.cycle_ms:.3f}"),
                    ("accept_len", f"{row.accept_len:.2f}"),
                    ("tokens_per_s", f"{row.tokens_per_s:.1f}"),
                ]
                for row in rows
            ],
            key="cycles",
        )
    )
    if r.curve is None:
        return out + [
            '<p class="note" data-key="no-curve">no draft-count curve: the number of drafts is'
            " not known, or the run does not speculate</p>"
        ]
    figure = figures_cycle.draft_figure(r)
    ks = [p["num_draft"] for p in r.curve.points]
    add_bands(figure, ks, r.curve.points, "tokens_per_s", "k")
    out.append(chart(figure, "drafts"))
    out.append(_drafts_table(r))
    out += _best_k_words(r)
    flags = r.curve.server_flags()
    if flags:
        out.append(f'<p class="note">SGLang flags for the best k: <code>{esc(flags)}</code></p>')
    return out


def _drafts_table(r: Ranking) -> str:
    """The curve's points in numbers, each verify time with where it comes from: measured (a
    traced width), fitted or extrapolated (the width model), roofline, or today."""
    return table(
        [
            "k",
            "width",
            "verify ms",
            "verify from",
            "draft ms",
            "cycle ms",
            "accept",
            "tok/s",
            "basis",
            "band",
        ],
        "nnntnnnntn",
        [
            [
                ("num_draft", p["num_draft"]),
                ("width", p["width"]),
                ("verify_ms", f"{p['verify_ms']:.3f}"),
                ("verify_source", p.get("verify_source", "")),
                ("draft_ms", f"{p['draft_ms']:.3f}"),
                ("cycle_ms", f"{p['cycle_ms']:.3f}"),
                ("accept_len", f"{p['accept_len']:.2f}"),
                ("tokens_per_s", f"{p['tokens_per_s']:.1f}"),
                ("basis", p.get("basis") or "-"),
                ("band", f"+/-{band:.0%}" if (band := rate_band(p)) else "-"),
            ]
            for p in r.curve.points
        ],
        key="drafts",
    )


def _best_k_words(r: Ranking) -> list[str]:
    """The best k with its basis and band, and the other k its band cannot tell from it."""
    curve = r.curve.to_json()
    best = next(p for p in curve["points"] if p["num_draft"] == curve["best_num_draft"])
    ks = curve.get("best_num_draft_set") or []
    also = f"; k = {ks[0]}-{ks[-1]} within the band" if len(ks) > 1 else ""
    edge = "; the largest tried: the best may lie beyond it" if curve.get("best_at_edge") else ""
    return [
        f'<p class="note" data-key="best-k">best k = {best["num_draft"]}:'
        f" {best['tokens_per_s']:.1f} tok/s ({esc(basis_words(best))}{also}{edge})</p>"
    ]


def heatmap_section(data: ReportData) -> list[str]:
    out = ['<h2 id="heatmap">Tokens/s over verify time and accept length</h2>']
    if data.ranking is None:
        return out + [f'<p class="note">{esc(data.whatif_note or NO_PLAN)}</p>']
    if data.ranking.plain is None:
        out.append(
            '<p class="note">no break-even line: plain decoding is not known (the verdict says'
            " why)</p>"
        )
    return out + [chart(figures_cycle.heatmap_figure(data.ranking), "heatmap")]
