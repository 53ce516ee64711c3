"""The allreduce cost model against the allreduces real traces measured, per message-size bucket.

    python bench/bench_allreduce_model.py                     # the public traces, plus
    traces/workload-tp*/ if present
    python bench/bench_allreduce_model.py traces/workload-tp2-eager --hidden 2048
    python bench/bench_allreduce_model.py 'traces/workload-tp*/' --hidden 2048 --json out.json

For every allreduce kernel whose message size is known (the trace's own args / NCCL payloads, or,
with ``--hidden``, bs x tokens x hidden x 2 bytes inside verifyprof's verify/decode steps), the
model's prediction for the trace's GPU and link (``verifyprof/data/hardware``; ``--gpu`` to
override) against the measured time: the transfer time after the last rank joined when the trace
holds several ranks, else the whole kernel time, which also holds the wait for the other ranks
(an upper bound: the printed error is then a bound too). ``bench/allreduce_check.py``
does the work; this prints it, writes ``bench/out/bench_allreduce_model.json`` and, with
``--max-error``, exits 1 if a transfer-based bucket misses it.

A model-level micro-benchmark: the allreduce model per message size on a trace read here,
below any run (``pipeline.open_run`` ranks fixes; it never lists single allreduces).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from allreduce_check import (  # noqa: E402 - bench/allreduce_check.py, beside this script
    allreduce_samples,
    by_bucket,
    collective_counts,
    unsized_allreduces,
)

from verifyprof.contracts.errors import VerifyprofError  # noqa: E402
from verifyprof.pipeline.data_files import load_hardware  # noqa: E402
from verifyprof.trace import load_trace  # noqa: E402

PUBLIC = REPO / "tests" / "data" / "public"
DEFAULT_TRACES = [
    PUBLIC / "kineto" / "hta_nccl_data_a100_rank0of2.json.gz",
    PUBLIC / "kineto" / "tracelens_b200_vllm_moe_eager_trace.json.gz",
    PUBLIC / "nsys" / "nsysai_mfu_2gpu_before_nsys2026.2.sqlite.gz",
    PUBLIC / "nsys" / "nsysai_mfu_2gpu_after_nsys2026.2.sqlite.gz",
]
TP_GLOB = str(REPO / "traces" / "workload-tp*")
NSYS_FILES = ("*.sqlite.gz", "*.sqlite", "*.nsys-rep")


def trace_inputs(specs: list[str]) -> list[Path]:
    """Files and directories to read: globs expanded; a capture directory gives its nsys trace,
    any other directory is read as one multi-rank Kineto trace."""
    out: list[Path] = []
    for spec in specs:
        paths = (
            [Path(p) for p in sorted(glob.glob(spec))]
            if any(c in spec for c in "*?[")
            else [Path(spec)]
        )
        for path in paths:
            if path.is_dir():
                nsys = [f for pattern in NSYS_FILES for f in sorted(path.glob(pattern))]
                out.extend(nsys[:1] if nsys else [path])
            else:
                out.append(path)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "traces",
        nargs="*",
        help=(
            "trace files, capture directories or globs (default: public traces +"
            " traces/workload-tp*/)"
        ),
    )
    parser.add_argument(
        "--gpu",
        help="hardware file name or path for every trace (default: from the trace's device name)",
    )
    parser.add_argument("--link", help="override the hardware file's link (links.toml key)")
    parser.add_argument(
        "--hidden",
        type=int,
        help="model hidden size: infer sizes of unrecorded allreduces in verify/decode steps",
    )
    parser.add_argument(
        "--dtype-bytes",
        type=int,
        default=2,
        help="activation bytes per element for --hidden (default 2, bf16)",
    )
    parser.add_argument(
        "--max-error",
        type=float,
        help="exit 1 if a transfer-measured bucket's |median error| exceeds this (e.g. 0.3)",
    )
    parser.add_argument(
        "--calls", action="store_true", help="also print every allreduce: size, measured, predicted"
    )
    parser.add_argument("--json", type=Path, default=HERE / "out" / "bench_allreduce_model.json")
    args = parser.parse_args()

    specs = args.traces or [str(p) for p in DEFAULT_TRACES] + (
        [TP_GLOB] if glob.glob(TP_GLOB) else []
    )
    hardware = load_hardware(args.gpu, args.link) if args.gpu else None
    report = {"traces": [], "buckets": []}
    failed = False
    for path in trace_inputs(specs):
        try:
            trace = load_trace(path)
        except VerifyprofError as exc:
            print(f"{path}: skipped ({exc})")
            continue
        samples = allreduce_samples(
            trace, hardware=hardware, hidden=args.hidden, dtype_bytes=args.dtype_bytes
        )
        unsized = (
            unsized_allreduces(trace) - int((samples["bytes_from"] == "inferred").sum())
            if len(samples)
            else unsized_allreduces(trace)
        )
        devices = (
            ", ".join(sorted(set(trace.devices["name"].astype(str)) - {""})) or "unnamed devices"
        )
        print(
            f"\n{path}  [{trace.format}; {devices}; {len(trace.devices)} device(s) in trace, world"
            f" size {trace.meta.get('world_size', -1)}]"
        )
        print(f"  allreduce kernels with a size: {len(samples)}; without: {unsized}")
        counts = collective_counts(trace)
        print(
            "  collective kernels: "
            + (", ".join(f"{fam} {n}" for fam, n in counts.items()) or "none")
        )
        for warning in trace.warnings:
            if "NCCL" in warning:
                print(f"  note: {warning}")
        buckets = by_bucket(samples)
        entry = {
            "path": str(path),
            "format": trace.format,
            "devices": devices,
            "sized": len(samples),
            "unsized": int(unsized),
            "collective_kernels": counts,
        }
        if buckets.empty:
            report["traces"].append(entry)
            continue
        entry["hardware"] = sorted(set(buckets["hardware"]))
        report["traces"].append(entry)
        print(f"  model: {', '.join(entry['hardware'])}")
        header = (
            f"  {'impl':9} {'measured':9} {'bytes':9} {'bucket':17} {'n':>4} {'ranks':>5}"
            f" {'size p50':>10} {'meas p50 us':>11} {'meas min us':>11} {'model us':>9}"
            f" {'error':>8} {'vs min':>8}   nccl / custom / alpha-beta us"
        )
        print(header)
        for row in buckets.to_dict("records"):
            print(
                f"  {row['impl']:9} {row['basis']:9} {row['bytes_from']:9} {row['bucket']:17}"
                f" {row['samples']:>4} {row['ranks']:>5} {row['bytes_p50']:>10}"
                f" {row['measured_us_p50']:>11.1f} {row['measured_us_min']:>11.1f}"
                f" {row['model_us_p50']:>9.1f} {row['error_p50']:>+8.1%}"
                f" {row['error_vs_min']:>+8.1%}   {row['nccl_us_p50']:.1f} /"
                f" {row['custom_us_p50']:.1f} / {row['alpha_beta_us_p50']:.1f}"
            )
            if (
                args.max_error is not None
                and row["basis"] == "transfer"
                and abs(row["error_p50"]) > args.max_error
            ):
                failed = True
            report["buckets"].append(
                {k: None if isinstance(v, float) and np.isnan(v) else v for k, v in row.items()}
            )
        if args.calls:
            for row in samples.to_dict("records"):
                print(
                    f"    device {row['device']} {row['impl']:8} {row['bytes']:>10} B  measured"
                    f" {row['measured_us']:9.1f} us ({row['basis']})  model {row['model_us']:8.1f}"
                    f" us  {row['error']:+.1%}"
                )
        if (buckets["basis"] == "kernel").any():
            print(
                "  measured = whole kernel time on one rank: it includes waiting for the other"
                " ranks, so it is an upper bound of the"
            )
            print(
                "  transfer the model predicts; a negative error there does not show the model is"
                " wrong, only how much was wait."
            )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.json.with_name(f".{args.json.name}.tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(args.json)
    print(f"\nwrote {args.json}")
    if args.max_error is not None:
        print(
            "target: |median error| <= {:.0%} on transfer-measured buckets: {}".format(
                args.max_error, "missed" if failed else "met"
            )
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
