"""The report's load section: per context length, tok/s against the batch with one line per
draft count, the best k per batch beside plain decoding, where speculation stops paying, and the
server settings per load range (the same numbers as ``whatif``'s console and ``load_curve``)."""

from __future__ import annotations

from verifyprof.report import figures_load
from verifyprof.report.data import ReportData
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
        rows = []
        for row in curve.rows:
            best, plain = row.best, row.plain
            rows.append(
                [
                    ("batch", str(row.batch)),
                    ("best_k", str(best["num_draft"])),
                    ("tps", f"{best['tokens_per_s']:.1f}"),
                    ("tps_gpu", f"{best['tokens_per_s_per_gpu']:.0f}"),
                    ("plain", "-" if plain is None else f"{plain['tokens_per_s']:.1f}"),
                    ("bound", "compute" if best["compute_bound"] else "bandwidth"),
                ]
            )
        out.append(
            table(
                ["batch", "best k", "tok/s per request", "tok/s per GPU", "plain tok/s", "verify"],
                "nnnnnt",
                rows,
                key=f"load-{i}",
            )
        )
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
        ctx = settings.get(curve.context)
        if ctx is not None:
            flags = "; ".join(
                f"batch {s['batches'][0]}-{s['batches'][1]}: {s['flags']}" for s in ctx["sglang"]
            )
            out.append(f'<p class="note">SGLang: <code>{esc(flags)}</code></p>')
            if ctx.get("vllm_speculative_config"):
                cfg = ctx["vllm_speculative_config"]
                out.append(
                    f'<p class="note">vLLM --speculative-config: <code>{esc(cfg)}</code></p>'
                )
    out.append(f'<p class="note">{esc(load.acceptance["words"])}</p>')
    return out
