"""The measured runs of one mode, each a record of the workload's summary: the speculative
iterations (per-phase times from the CUDA events around each phase's range), the baseline decode
steps, the verify width sweep; and the speedups across the records. The steps themselves (and
their ranges) are :class:`~verifyprof.workload.runner.Workload`'s methods, which capture hooks
wrap; the pipelined run: ``pipelined.py``.
"""

from __future__ import annotations

from typing import Any

from verifyprof.workload.accept import accepted_drafts
from verifyprof.workload.clock import stats

SPEC_PHASES = ("draft", "verify", "accept", "draft_extend")


def run_spec(workload: Any, mode: str, steps: int, seed: int) -> dict[str, Any]:
    """``steps`` speculative iterations in ``mode`` (simulated acceptance drawn from ``seed``)."""
    run, graph, compiled = workload.run_cfg, mode == "graph", mode == "compile"
    if workload.simulated:
        table = accepted_drafts(
            run.accept_len, run.num_draft, steps, run.batch, seed=seed, method=run.accept_method
        )
        workload._sim_table = table.to(workload.device)
    workload.state.reset()
    workload._sync()
    records = [workload.spec_step(i, graph, compiled) for i in range(steps)]
    workload._sync()
    phase_ms = {
        p: [workload.clock.ms(m[i], m[i + 1]) for m, _ in records]
        for i, p in enumerate(SPEC_PHASES)
    }
    step_ms = [workload.clock.ms(m[0], m[-1]) for m, _ in records]
    elapsed = workload.clock.ms(records[0][0][0], records[-1][0][-1])
    accept_lens = [a for _, lens in records for a in lens]
    tokens = sum(accept_lens)
    out = {
        "kind": "spec",
        "mode": mode,
        "graph": graph,
        "compile": compiled,
        "bs": run.batch,
        "num_draft": run.num_draft,
        "verify_graph": workload.verify_flags(mode)[0],
        "verify_tokens": run.num_draft + 1,
        "steps": steps,
        "accept": "simulated" if workload.simulated else "greedy",
        "accept_len_target": run.accept_len,
        "accept_len": tokens / len(accept_lens),
        "tokens": tokens,
        "elapsed_ms": elapsed,
        "tokens_per_s": tokens / elapsed * 1e3,
        "tokens_per_s_per_request": tokens / run.batch / elapsed * 1e3,
        "step_ms": stats(step_ms),
        **{f"{p}_ms": stats(v) for p, v in phase_ms.items()},
        "tokens_head": workload._tokens_head(),
        "per_step": {
            "accept_len": [lens for _, lens in records],
            "step_ms": step_ms,
            **{f"{p}_ms": v for p, v in phase_ms.items()},
        },
    }
    return out


def run_decode(workload: Any, mode: str, steps: int) -> dict[str, Any]:
    """``steps`` baseline decode steps in ``mode``."""
    graph = mode == "graph"
    workload.state.reset()
    workload._sync()
    records = [workload.decode_step(i, graph) for i in range(steps)]
    workload._sync()
    decode_ms = [workload.clock.ms(a, b) for a, b in records]
    elapsed = workload.clock.ms(records[0][0], records[-1][-1])
    tokens = steps * workload.run_cfg.batch
    return {
        "kind": "decode",
        "mode": mode,
        "graph": graph,
        "bs": workload.run_cfg.batch,
        "steps": steps,
        "tokens": tokens,
        "elapsed_ms": elapsed,
        "tokens_per_s": tokens / elapsed * 1e3,
        "tokens_per_s_per_request": steps / elapsed * 1e3,
        "decode_ms": stats(decode_ms),
        "tokens_head": workload._tokens_head(),
        "per_step": {"decode_ms": decode_ms},
    }


def run_sweep(workload: Any, mode: str, steps: int) -> list[dict[str, Any]]:
    """``steps`` verify forwards of each width of the sweep in ``mode``, a record per width."""
    graph, out = mode == "graph", []
    workload.state.reset()
    for width in workload.run_cfg.widths:
        workload._sync()
        ms = [
            workload.clock.ms(a, b)
            for a, b in (workload.sweep_step(i, width, graph) for i in range(steps))
        ]
        out.append(
            {
                "kind": "verify_sweep",
                "mode": mode,
                "graph": graph,
                "bs": workload.run_cfg.batch,
                "width": width,
                "tokens": width * workload.run_cfg.batch,
                "steps": steps,
                "verify_ms": stats(ms),
                "per_step": {"verify_ms": ms},
            }
        )
    return out


def add_speedups(results: list[dict[str, Any]]) -> None:
    """Spec tok/s over baseline-decode tok/s of the same mode, and graph-over-eager verify time."""
    decode = {r["mode"]: r for r in results if r["kind"] == "decode"}
    spec = {r["mode"]: r for r in results if r["kind"] == "spec"}
    for mode, r in spec.items():
        if mode in decode:
            r["speedup_vs_decode"] = r["tokens_per_s"] / decode[mode]["tokens_per_s"]
            if r["accept"] == "greedy":  # lossless speculation: the same tokens as plain decoding
                r["greedy_matches_decode"] = all(
                    s[:n] == d[:n]
                    for s, d in zip(r["tokens_head"], decode[mode]["tokens_head"])
                    for n in [min(len(s), len(d))]
                )
    for kind in ("spec", "verify_pipelined"):
        by_mode = {r["mode"]: r for r in results if r["kind"] == kind}
        for mode in ("graph", "compile"):
            if "eager" in by_mode and mode in by_mode:
                by_mode[mode][f"verify_ms_eager_over_{mode}"] = (
                    by_mode["eager"]["verify_ms"]["median"] / by_mode[mode]["verify_ms"]["median"]
                )
