"""The report's before/after section (``--compare``), from the Comparison's JSON (the same
numbers as ``verifyprof compare --json``): warnings and verdict, phases before and after, the
prediction check, kernel families that appeared or vanished, and per-rank walls."""

from __future__ import annotations

from typing import Any

from verifyprof.report import figures
from verifyprof.report.compare_console import PREDICTION_ROWS, side_headers, table_label
from verifyprof.report.data import ReportData
from verifyprof.report.markup import Cell, chart, esc, table


def compare_section(data: ReportData) -> list[str]:
    c = data.compare
    if c is None:
        return []
    out = [
        '<h2 id="compare">Before / after</h2>',
        f"<p>before: {esc(c['before']['source'])}<br>after: {esc(c['after']['source'])}</p>",
    ]
    out += [f'<p class="warn" data-key="compare-warning">{esc(w)}</p>' for w in c["warnings"]]
    out += [f'<p class="note">{esc(n)}</p>' for n in c.get("notes", [])]
    if c["mode_switch"] and not c["warnings"]:
        out.append(f'<p data-key="mode-switch">verify mode changed: {esc(c["mode_switch"])}</p>')
    out.append(f'<p class="verdict" data-key="compare-verdict">{esc(c["verdict_line"])}</p>')
    out.append(chart(figures.compare_figure(c), "compare"))
    out.append(f'<p class="note" data-key="compare-label">{esc(table_label(c))}</p>')
    out.append(
        table(
            ["phase (mean ms)", *side_headers(c), "delta", "delta %"],
            "tnnnn",
            _phase_rows(c),
            key="compare",
        )
    )
    out += _predictions(c) + _families(c["kernel_families"]) + _ranks(c["ranks"])
    return out


def _delta_row(label: str, before: float, after: float, delta: float, pct: str, fmt: str):
    return [
        ("phase", label),
        ("before", f"{before:{fmt}}"),
        ("after", f"{after:{fmt}}"),
        ("delta", f"{delta:+{fmt}}"),
        ("delta-pct", pct),
    ]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _phase_rows(c: dict[str, Any]) -> list[list[Cell]]:
    rows = [
        _delta_row(
            r["phase"], r["before_ms"], r["after_ms"], r["delta_ms"], _pct(r["delta_pct"]), ".3f"
        )
        for r in c["phases"]
    ]
    v = c["verify"]
    rows.append(
        _delta_row(
            f"verify {v['measure']} (traced)",
            v["before_ms"],
            v["after_ms"],
            v["delta_ms"],
            _pct(v["delta_pct"]),
            ".3f",
        )
    )
    unprofiled = [c[side].get("unprofiled_verify_ms") for side in ("before", "after")]
    if None not in unprofiled:
        b, a = unprofiled
        rows.append(
            _delta_row(
                "verify at the unprofiled rate (whatif's)",
                b,
                a,
                a - b,
                _pct(100 * (a / b - 1) if b else None),
                ".3f",
            )
        )
    elif any(u is not None for u in unprofiled):
        rows.append(
            [("phase", "verify at the unprofiled rate (whatif's)")]
            + [
                (k, "-" if u is None else f"{u:.3f}")
                for k, u in zip(("before", "after"), unprofiled)
            ]
            + [("delta", "-"), ("delta-pct", "-")]
        )
    rows += [
        _delta_row(f"{k} per step", n["before"], n["after"], n["delta"], "", ".1f")
        for k, n in c["counts"].items()
    ]
    return rows


def _predictions(c: dict[str, Any]) -> list[str]:
    out = []
    for p in c["predictions"]:
        rows: list[list[Cell]] = [
            [
                ("what", label),
                ("pred", f"{p[f'predicted_{key}']:{fmt}}"),
                ("meas", f"{p[f'measured_{key}']:{fmt}}"),
                ("err", _pct(p[error])),
            ]
            for label, key, error, fmt in PREDICTION_ROWS
        ]
        out.append(
            table(
                [
                    f"prediction check: {p['candidate']} (mean steps)",
                    f"predicted ({p.get('predicted_basis', 'as traced')})",
                    f"measured ({p.get('measured_basis', 'as traced')})",
                    "error",
                ],
                "tnnn",
                rows,
                key="prediction",
            )
        )
        out.append(
            f'<p class="note">the change seen: {esc("; ".join(p["change"]))}; modelled by'
            f" {esc(', '.join(p['applied']))}</p>"
        )
        if p.get("not_modelled"):
            out.append(
                '<p class="warn" data-key="not-modelled">also changed, which no candidate models'
                f" (not in the prediction): {esc('; '.join(p['not_modelled']))}</p>"
            )
    if c.get("prediction_note"):
        out.append(f'<p class="note">prediction check: {esc(c["prediction_note"])}</p>')
    return out


def _families(fam: dict[str, Any]) -> list[str]:
    if not fam.get("available"):
        return [f'<p class="note">kernel families: {esc(fam.get("reason", ""))}</p>']
    out = [
        f'<p class="families" data-key="families-scope">kernel families in'
        f" {esc(fam.get('scope', 'the verify ranges'))}: {fam['families_before']} &rarr;"
        f" {fam['families_after']}</p>"
    ]
    listed: list[list[Cell]] = [
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
            table(
                ["change", "family", "phase", "ms over the trace (traced)"],
                "twtn",
                listed,
                key="families",
            )
        )
    return out


def _ranks(ranks: list[dict[str, Any]]) -> list[str]:
    if len(ranks) < 2:
        return []
    rows: list[list[Cell]] = [
        [
            ("rank", r["rank"]),
            ("before", "-" if r["before_ms"] is None else f"{r['before_ms']:.3f}"),
            ("after", "-" if r["after_ms"] is None else f"{r['after_ms']:.3f}"),
            ("delta-pct", _pct(r["delta_pct"])),
        ]
        for r in ranks
    ]
    return [
        table(
            ["rank", "before: mean wall ms (traced)", "after", "delta %"],
            "nnnn",
            rows,
            key="compare-ranks",
        )
    ]
