"""The throughput model against reality: predicted vs measured verify times on the H200 (issue 3).

Two predictions, each made from one trace and checked against a measurement of the same workload
(``verifyprof/workload``) that the prediction never saw:

* ``cuda_graph_verify``: from the EAGER verify steps' breakdown (launch gap out, one graph launch
  plus a per-node gap in), predict the verify time in CUDA-graph mode; measured: the same workload
  in graph mode, by CUDA events (the workload's summary) and by the graph trace's breakdown.
  Checked on the speculative loop's verify (width k+1) and on the isolated width-sweep forwards.
* ``fewer_draft_tokens`` / ``more_draft_tokens``: from the verify at width n0 = k+1 alone, predict
  t(n) at the other widths of the sweep (phase-by-phase roofline rescaling, MoE expert union);
  measured: the sweep's own forwards at those widths, eager and graph.

Usage::

    # on the GPU machine (H200): capture dense and MoE, eager+graph in one process each, then check
    source .device/nsys-env.sh && python bench/bench_whatif.py --run bench/out/whatif
    # anywhere, on traces already captured (traces/capture_workload.sh layout, or --run's output)
    python bench/bench_whatif.py --from-dir traces
    python bench/bench_whatif.py --eager-trace E.sqlite.gz --graph-trace G.sqlite.gz \\
        --eager-summary E.summary.json --graph-summary G.summary.json
    python bench/bench_whatif.py --trace T.sqlite.gz --summary T.summary.json   # both modes in one
    trace

Prints predicted, measured and error per case; writes ``bench_whatif.json`` under ``--out`` (or the
``--run`` directory). Exit code 1 when a headline error (loop cuda_graph_verify vs CUDA events,
median |error| of t(n)) is above the 15% target.

A model-level micro-benchmark: the fixes' own functions on a verify profile, below any run
(``pipeline.open_run`` gives the ranking, not one fix at a width of the sweep).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the workloads captured: whatif_capture.py; the traces and summaries read: whatif_inputs.py; the
# predictions, checks and report: here

from whatif_capture import MOE, NUM_DRAFT, capture
from whatif_inputs import Inputs, context_for, from_dir, load_inputs, model_for, summary_runs

from verifyprof.contracts.errors import VerifyprofError
from verifyprof.model.fixes.base import Scenario, current_cycle
from verifyprof.model.fixes.draft import verify_at_width
from verifyprof.model.fixes.setup import launch_costs_of
from verifyprof.model.fixes.verify import cuda_graph_verify
from verifyprof.model.inputs.hardware import Hardware
from verifyprof.model.inputs.model_config import ModelConfig
from verifyprof.model.inputs.profile import VerifyProfile, verify_profile
from verifyprof.pipeline.data_files import load_hardware
from verifyprof.pipeline.model_files import guess_hardware

TARGET = 0.15


@dataclass
class Row:
    case: str
    predicted_ms: float
    measured_ms: float
    measured_by: str
    headline: bool = False
    note: str = ""

    @property
    def error(self) -> float:
        return self.predicted_ms / self.measured_ms - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "predicted_ms": self.predicted_ms,
            "measured_ms": self.measured_ms,
            "error": self.error,
            "measured_by": self.measured_by,
            "headline": self.headline,
            "note": self.note,
        }


# ---- the checks -------------------------------------------------------------------------------


def profile_or_none(data: dict[str, Any] | None, **kwargs: Any) -> VerifyProfile | None:
    if data is None:
        return None
    try:
        return verify_profile(data, **kwargs)
    except VerifyprofError:
        return None


def graph_rows(inputs: Inputs, hardware: Hardware, sweep: bool, width: int | None) -> list[Row]:
    eager = profile_or_none(inputs.eager, mode="eager", sweep=sweep, width=width)
    if eager is None:
        return []
    # the launch costs whatif takes from the hardware file; not from graph steps of the same trace
    # (--run captures eager and graph in one process): those are what this predicts
    scenario = Scenario(
        accept_len=2.0, hardware=hardware, num_draft=NUM_DRAFT, costs=launch_costs_of(hardware, {})
    )
    predicted = cuda_graph_verify(eager, scenario, current_cycle(eager, scenario)).cycle.verify_ms
    where = f"sweep width {width}" if sweep else f"loop verify width {eager.width}"
    rows = []
    runs = (
        summary_runs(inputs.graph_summary, "verify_sweep", "graph")
        if sweep
        else summary_runs(inputs.graph_summary, "spec", "graph")
    )
    runs = [r for r in runs if not sweep or r.get("width") == width]
    if runs:
        measured = runs[0]["verify_ms"]["mean"]
        rows.append(
            Row(
                f"cuda_graph_verify, {where}",
                predicted,
                measured,
                "graph run, CUDA events (mean)",
                headline=not sweep,
            )
        )
    graph = profile_or_none(inputs.graph, mode="graph", sweep=sweep, width=width)
    if graph is not None:
        v = graph.verify
        rows.append(
            Row(
                f"cuda_graph_verify, {where}",
                predicted,
                v.wall_ms,
                "graph trace, breakdown wall (mean)",
            )
        )
        # a replayed graph's idle between its kernels is its own phase, graph_gap (issue 20)
        gaps = v.phases_ms.get("graph_gap", 0.0)
        idle = v.phases_ms.get("launch_gap", 0.0) + v.phases_ms.get("host_wait", 0.0) + gaps
        node_us = gaps / max(v.kernels, 1) * 1e3
        rows[-1].note = (
            f"eager: {eager.verify.wall_ms:.3f} ms = launch gap"
            f" {eager.verify.phases_ms.get('launch_gap', 0):.3f} + host wait"
            f" {eager.verify.phases_ms.get('host_wait', 0):.3f} + busy; graph: busy"
            f" {v.wall_ms - idle:.3f}, idle {idle:.3f} ms; the graph's idle between its first and"
            f" last kernel = {node_us:.2f} us per node over {v.kernels:.0f} kernels (the model"
            f" assumes {scenario.costs.graph_node_us:g} us)"
        )
    return rows


def width_rows(
    inputs: Inputs, hardware: Hardware, model: ModelConfig | None, mode: str
) -> list[Row]:
    data = inputs.eager if mode == "eager" else inputs.graph
    n0 = NUM_DRAFT + 1
    base = profile_or_none(data, mode=mode, sweep=True, width=n0)
    if base is None:
        return []
    scenario = Scenario(
        accept_len=2.0,
        hardware=hardware,
        model=model,
        num_draft=NUM_DRAFT,
        context=context_for(inputs),
        use_measured_widths=False,
    )
    measured_events = {
        r["width"]: r["verify_ms"]["mean"]
        for r in summary_runs(
            inputs.eager_summary if mode == "eager" else inputs.graph_summary, "verify_sweep", mode
        )
    }
    rows = []
    for width in sorted(set(base.width_times) | set(measured_events)):
        if width == n0:
            continue
        predicted, notes = verify_at_width(base, scenario, width)
        direction = "fewer" if width < n0 else "more"
        case = f"{direction}_draft_tokens t({width}) from t({n0}), {mode}"
        if width in measured_events:
            rows.append(
                Row(
                    case,
                    predicted,
                    measured_events[width],
                    "sweep, CUDA events (mean)",
                    headline=True,
                    note=notes[0] if notes else "",
                )
            )
        if width in base.width_times:
            rows.append(
                Row(case, predicted, base.width_times[width], "sweep, breakdown wall (mean)")
            )
    return rows


def check(inputs: Inputs, hardware: Hardware | None) -> dict[str, Any]:
    hw = hardware or guess_hardware(inputs.eager.device_names) or load_hardware("h200")
    model = model_for(inputs)
    rows: list[Row] = []
    rows += graph_rows(inputs, hw, sweep=False, width=None)
    sweep = profile_or_none(inputs.eager, mode="eager", sweep=True, width=NUM_DRAFT + 1)
    widths = sorted(set(sweep.width_times if sweep else {}) | {NUM_DRAFT + 1})
    for width in widths:
        rows += graph_rows(inputs, hw, sweep=True, width=width)
    for mode in ("eager", "graph"):
        rows += width_rows(inputs, hw, model, mode)
    return {
        "label": inputs.label,
        "hardware": hw.name,
        "model": model.name if model else None,
        "sources": inputs.sources,
        "rows": rows,
    }


# ---- output -------------------------------------------------------------------------------------


def report(results: list[dict[str, Any]]) -> tuple[list[str], bool]:
    lines, ok = [], True
    for result in results:
        rows: list[Row] = result["rows"]
        lines.append(f"\n== {result['label']}: {result['model']} on {result['hardware']} ==")
        lines.append(f"{'case':<52} {'predicted':>10} {'measured':>10} {'error':>8}  measured by")
        for row in rows:
            flag = "" if abs(row.error) <= TARGET else "  <-- over 15%"
            lines.append(
                f"{row.case:<52} {row.predicted_ms:>9.3f}  {row.measured_ms:>9.3f} "
                f" {100 * row.error:>+6.1f}%  {row.measured_by}{flag}"
            )
            if (
                row.note
                and "breakdown" in row.measured_by
                and row.case.startswith("cuda_graph_verify, loop")
            ):
                lines.append(f"    {row.note}")
        headline = [r for r in rows if r.headline]
        graph = [r for r in headline if r.case.startswith("cuda_graph_verify")]
        widths = [abs(r.error) for r in headline if "draft_tokens" in r.case]
        if graph:
            lines.append(
                f"headline cuda_graph_verify error: {100 * graph[0].error:+.1f}% (target |error| <="
                " 15%)"
            )
            ok &= abs(graph[0].error) <= TARGET
        if widths:
            median = statistics.median(widths)
            lines.append(
                f"headline t(n) median |error| over {len(widths)} widths x modes:"
                f" {100 * median:.1f}% (max {100 * max(widths):.1f}%)"
            )
            ok &= median <= TARGET
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument(
        "--run",
        type=Path,
        help=(
            "GPU machine: capture dense and MoE workloads under nsys into this directory, then"
            " check"
        ),
    )
    parser.add_argument(
        "--dense-only", action="store_true", help="with --run: skip the MoE capture"
    )
    parser.add_argument(
        "--from-dir",
        type=Path,
        help="check traces already captured (capture_workload.sh or --run layout)",
    )
    parser.add_argument(
        "--trace", type=Path, help="one trace (or breakdown JSON) holding eager and graph steps"
    )
    parser.add_argument("--summary", type=Path, help="the workload summary of --trace")
    parser.add_argument("--eager-trace", type=Path)
    parser.add_argument("--graph-trace", type=Path)
    parser.add_argument("--eager-summary", type=Path)
    parser.add_argument("--graph-summary", type=Path)
    parser.add_argument(
        "--hardware", help="hardware file or name (default: recognised from the trace, else h200)"
    )
    parser.add_argument(
        "--out", type=Path, help="where bench_whatif.json goes (default: --run dir or bench/out)"
    )
    args = parser.parse_args(argv)

    hardware = load_hardware(args.hardware) if args.hardware else None
    if args.run:
        inputs = []
        for label, extra in [("dense", [])] + ([] if args.dense_only else [("moe", MOE)]):
            trace, summary = capture(args.run, label, extra)
            inputs.append(load_inputs(label, trace, None, summary, None))
    elif args.from_dir:
        inputs = from_dir(args.from_dir)
    elif args.trace:
        inputs = [load_inputs(args.trace.name, args.trace, None, args.summary, None)]
    elif args.eager_trace:
        inputs = [
            load_inputs(
                args.eager_trace.parent.name or "eager",
                args.eager_trace,
                args.graph_trace,
                args.eager_summary,
                args.graph_summary,
            )
        ]
    else:
        parser.error(
            "give --run DIR, --from-dir DIR, --trace T, or --eager-trace E [--graph-trace G]"
        )
    results = [check(i, hardware) for i in inputs]
    lines, ok = report(results)
    print("\n".join(lines))
    out_dir = args.out or args.run or ROOT / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = [{**r, "rows": [row.to_json() for row in r["rows"]]} for r in results]
    from verifyprof.report.files import write_json

    write_json(out_dir / "bench_whatif.json", {"target": TARGET, "ok": ok, "results": payload})
    print(
        f"\n{'within' if ok else 'MISSED'} the 15% target; results in"
        f" {out_dir / 'bench_whatif.json'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except VerifyprofError as err:
        print(f"bench_whatif: error: {err}", file=sys.stderr)
        sys.exit(2)
