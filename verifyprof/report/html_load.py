"""The report's load section: per context length, tok/s against the batch with one line per
draft count, the best k per batch beside plain decoding, where speculation stops paying, and the
server settings per load range (the same numbers as ``whatif``'s console and ``load_curve``)."""

from __future__ import annotations

from verifyprof.model.decision.load_points import rate_band
from verifyprof.report import figures_load
from verifyprof.report.data import ReportData
from verifyprof.report.figures_basis import basis_words
from verifyprof.report.markup import chart, esc, table


def load_section(data: ReportData) -> list[str]:
    out = ['<h2 id="load">Speculate or not at every load</h2>']
    r = data.ranking
    load = getattr(r, "load", None) if r is not None else None
    if load is None:
        why = getattr(r, "load_skipped", None) or data.whatif_note or "no what-if for this run"
        return out + [f'<p class="note" data-key="no-load">{esc(why)}</p>']
    settings = {c["context"]: c for c in load.server.get("per_context", [])}
    for i, curve in enumerate(load.curves):
        out.append(chart(figures_load.load_figure(load, curve), f"load-{i}"))
        said = curve.to_json()  # the numbers whatif prints: each row's basis and band
        rows = []
        for row, shown in zip(curve.rows, said["rows"]):
            best, plain = row.best, row.plain
            rows.append(
                [
                    ("batch", str(row.batch)),
                    ("best_k", best_k(shown)),
                    ("tps", f"{best['tokens_per_s']:.1f}"),
                    ("tps_gpu", f"{best['tokens_per_s_per_gpu']:.0f}"),
                    ("plain", "-" if plain is None else f"{plain['tokens_per_s']:.1f}"),
                    ("bound", "compute" if best["compute_bound"] else "bandwidth"),
                    ("basis", shown.get("basis") or "-"),
                    ("band", f"+/-{band:.0%}" if (band := rate_band(best)) else "-"),
                ]
            )
        out.append(
            table(
                [
                    "batch",
                    "best k",
                    "tok/s per request",
                    "tok/s per GPU",
                    "plain tok/s",
                    "verify",
                    "basis",
                    "band",
                ],
                "nnnnnttn",
                rows,
                key=f"load-{i}",
            )
        )
        out += basis_notes(said, i)
        stop = curve.stops_paying_at
        words = (
            f"speculation pays up to batch {curve.pays_up_to}; plain decoding is faster from"
            f" batch {stop}"
            if stop is not None and curve.pays_up_to is not None
            else "speculation pays at every batch listed"
            if stop is None
            else "plain decoding is faster at every batch listed"
        )
        bound = curve.ridge_batch.get(load.current_k)
        if bound is not None and load.ridge.get("tokens_per_forward"):
            words += (
                f"; the verify at today's k = {load.current_k} turns compute-bound at batch"
                f" {bound} ({load.ridge['hardware']}'s ridge point,"
                f" {load.ridge['flops_per_byte']:.0f} FLOP/byte: {load.ridge['tokens_per_forward']}"
                " tokens per forward), where the curve turns"
            )
        out.append(f'<p class="note">{esc(words)}</p>')
        out += settings_notes(settings.get(curve.context))
    out.append(f'<p class="note">{esc(load.acceptance["words"])}</p>')
    return out


def settings_notes(ctx: dict | None) -> list[str]:
    """One context's server settings: SGLang's per load range and vLLM's config, each range with
    what it rests on, and what the engines' trackers report where a setting switches k."""
    if ctx is None:
        return []
    flags = "; ".join(
        f"batch {s['batches'][0]}-{s['batches'][1]} ({basis_words(s)}): "
        + (s["flags"] or f"no flags, the band is too wide; measure it: {s['measure_command']}")
        for s in ctx["sglang"]
    )
    out = [f'<p class="note">SGLang: <code>{esc(flags)}</code></p>']
    if ctx.get("vllm_speculative_config"):
        cfg = ctx["vllm_speculative_config"]
        ranges = ", ".join(basis_words(b) for b in ctx.get("vllm_basis") or [])
        out.append(
            f'<p class="note">vLLM --speculative-config: <code>{esc(cfg)}</code>'
            + (f" (its ranges: {esc(ranges)})" if ranges else "")
            + "</p>"
        )
    if ctx.get("vllm_withheld"):
        out.append(f'<p class="note">vLLM: {esc(ctx["vllm_withheld"])}</p>')
    for server, words in (ctx.get("switching") or {}).items():  # the engines' trackers
        out.append(f'<p class="note" data-key="switching-{esc(server)}">{esc(words)}</p>')
    return out


def best_k(row: dict) -> str:
    """The best k, and the others its band cannot tell from it: ``6 (4-8)``."""
    k, ks = row["best_num_draft"], row.get("best_num_draft_set") or []
    if len(ks) <= 1:
        return str(k)
    if ks == list(range(ks[0], ks[-1] + 1)):
        return f"{k} ({ks[0]}-{ks[-1]})"
    return f"{k} ({', '.join(map(str, ks))})"


def basis_notes(curve: dict, i: int) -> list[str]:
    """Where the curve stops resting on captures, the capture that measures the rest, and best
    draft counts no capture measured (whatif's words)."""
    out = []
    if curve.get("basis_words"):
        out.append(
            f'<p class="warn" data-key="extrapolated-{i}">{esc(curve["basis_words"])}<br>'
            f'<code data-key="measure-{i}">{esc(curve["measure_command"])}</code></p>'
        )
    if curve.get("k_words"):
        out.append(f'<p class="note" data-key="k-{i}">{esc(curve["k_words"])}</p>')
    return out
