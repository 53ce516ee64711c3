"""``python -m verifyprof.workload``: run the speculative-decoding workload and write its summary.

Examples::

    python -m verifyprof.workload --mode eager,graph --steps 40 --num-draft 3 --accept-len 2.0 --out
    s.json
    python -m verifyprof.workload --preset tiny --device cpu --steps 8 --out s.json   # CPU smoke
    run
    torchrun --nproc-per-node 2 -m verifyprof.workload --mode graph --out tp2.json    # tensor
    parallel
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from verifyprof.contracts.plumbing import outputs
from verifyprof.workload.accept import METHODS
from verifyprof.workload.config import (
    DEFAULT,
    DEFAULT_DRAFT,
    TINY,
    TINY_DRAFT,
    RunConfig,
)
from verifyprof.workload.moe import IMPLS

SCHEMA = "verifyprof.workload/1"
PRESETS = {"default": (DEFAULT, DEFAULT_DRAFT), "tiny": (TINY, TINY_DRAFT)}
TARGET_FLAGS = (
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "intermediate",
    "vocab",
    "moe_experts",
    "moe_topk",
    "moe_intermediate",
)
DRAFT_FLAGS = ("layers", "hidden", "heads", "kv_heads", "intermediate")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m verifyprof.workload",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_run_arguments(p)
    _add_setup_arguments(p)
    return p


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """What is measured: the modes, the runs and their steps, the acceptance."""
    p.add_argument(
        "--mode",
        default="eager",
        help=(
            "eager, graph or compile (verify under torch.compile), or several as"
            " eager,graph,compile (measured in one run)"
        ),
    )
    p.add_argument("--steps", type=int, default=40, help="measured speculative iterations per mode")
    p.add_argument(
        "--warmup",
        type=int,
        default=5,
        help="unmeasured iterations per run before the capture window",
    )
    p.add_argument(
        "--decode-steps",
        type=int,
        default=None,
        help="baseline decode steps per mode (default: --steps; 0 skips)",
    )
    p.add_argument(
        "--num-draft", type=int, default=3, help="draft tokens k per iteration (verify width k+1)"
    )
    p.add_argument(
        "--accept-len",
        default="2.0",
        help=(
            "simulated mean accept length incl. the bonus token, or 'greedy' to match drafts for"
            " real"
        ),
    )
    p.add_argument("--accept-method", default="geometric", choices=METHODS)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument(
        "--context",
        type=int,
        default=512,
        help="prompt tokens per sequence (prefilled before the window)",
    )
    p.add_argument(
        "--widths", default="1,2,4,8,16", help="verify widths of the t(n) sweep ('' skips)"
    )
    p.add_argument("--sweep-steps", type=int, default=10, help="verify forwards per sweep width")
    p.add_argument(
        "--pipelined",
        type=int,
        default=0,
        help=(
            "verify forwards per mode launched back to back with no host sync between them (0"
            " skips)"
        ),
    )


def _add_setup_arguments(p: argparse.ArgumentParser) -> None:
    """How it runs: torch.compile, the ranges, the models, the device and the summary file."""
    p.add_argument(
        "--compile-backend", default="inductor", help="torch.compile backend of mode compile"
    )
    p.add_argument(
        "--compile-mode",
        default="reduce-overhead",
        help="torch.compile mode of mode compile (inductor only; 'default' for none)",
    )
    p.add_argument(
        "--no-fullgraph",
        action="store_true",
        help="let Dynamo break the compiled verify into graphs",
    )
    p.add_argument(
        "--no-ranges", action="store_true", help="emit no NVTX ranges (overhead baseline)"
    )
    p.add_argument("--preset", default="default", choices=sorted(PRESETS))
    for flag in TARGET_FLAGS:
        p.add_argument("--" + flag.replace("_", "-"), type=int, default=None)
    for flag in DRAFT_FLAGS:
        p.add_argument("--draft-" + flag.replace("_", "-"), type=int, default=None)
    p.add_argument("--moe-impl", default="auto", choices=IMPLS)
    p.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float16", "float32"))
    p.add_argument(
        "--device", default="auto", help="auto, cpu or cuda (cuda:LOCAL_RANK under torchrun)"
    )
    p.add_argument("--seed", type=int, default=0, help="weights, prompt and simulated acceptance")
    p.add_argument(
        "--out", type=Path, default=None, help="summary JSON (rank r > 0 writes NAME.rank<r>.json)"
    )


def build_configs(args: argparse.Namespace) -> tuple[Any, Any, RunConfig]:
    target, draft = PRESETS[args.preset]
    target = dataclasses.replace(
        target,
        seed=args.seed,
        **{f: getattr(args, f) for f in TARGET_FLAGS if getattr(args, f) is not None},
    )
    draft_changes = {
        f: getattr(args, "draft_" + f)
        for f in DRAFT_FLAGS
        if getattr(args, "draft_" + f) is not None
    }
    draft = dataclasses.replace(draft, vocab=target.vocab, seed=args.seed + 1, **draft_changes)
    if "kv_heads" not in draft_changes and draft.heads % draft.kv_heads:
        draft = dataclasses.replace(draft, kv_heads=draft.heads)
    if args.heads is not None and args.kv_heads is None:
        target = dataclasses.replace(target, kv_heads=args.heads)
    accept = None if args.accept_len.strip().lower() == "greedy" else float(args.accept_len)
    run = RunConfig(
        modes=tuple(m.strip() for m in args.mode.split(",") if m.strip()),
        steps=args.steps,
        warmup=args.warmup,
        decode_steps=args.steps if args.decode_steps is None else args.decode_steps,
        num_draft=args.num_draft,
        accept_len=accept,
        accept_method=args.accept_method,
        batch=args.batch,
        context=args.context,
        widths=_ints(args.widths),
        sweep_steps=args.sweep_steps,
        ranges=not args.no_ranges,
        seed=args.seed,
        moe_impl=args.moe_impl,
        pipelined=args.pipelined,
        compile_backend=args.compile_backend,
        compile_mode=None if args.compile_mode in ("", "default", "none") else args.compile_mode,
        compile_fullgraph=not args.no_fullgraph,
    )
    return target, draft, run


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically (a reader never sees half a summary), into a folder made if missing: the
    workload runs under launchers (torchrun, nsys) that are handed a fresh output path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    outputs.write_json(path, data, indent=1)


def report_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in results:
        if r["kind"] == "spec":
            lines.append(
                f"spec   {r['mode']:5s} accept_len {r['accept_len']:.2f}"
                f"  verify {r['verify_ms']['median']:.3f} ms"
                f"  draft {r['draft_ms']['median']:.3f} ms  step {r['step_ms']['median']:.3f} ms"
                f"  {r['tokens_per_s']:.1f} tok/s"
                + (f"  x{r['speedup_vs_decode']:.2f} vs decode" if "speedup_vs_decode" in r else "")
            )
        elif r["kind"] == "decode":
            lines.append(
                f"decode {r['mode']:5s} step {r['decode_ms']['median']:.3f} ms "
                f" {r['tokens_per_s']:.1f} tok/s"
            )
        elif r["kind"] == "verify_pipelined":
            lines.append(
                f"pipe   {r['mode']:5s} width {r['width']:3d}"
                f"  verify {r['verify_ms']['median']:.3f} ms on the GPU"
                f"  host {r['host_ms']['median']:.3f} ms/step  {r['steps']} steps:"
                f" GPU {r['gpu_elapsed_ms']:.1f} ms, host {r['host_elapsed_ms']:.1f} ms"
                f" + {r['host_wait_ms']:.1f} ms waiting"
            )
        else:
            lines.append(
                f"sweep  {r['mode']:5s} width {r['width']:3d}  verify"
                f" {r['verify_ms']['median']:.3f} ms"
            )
    return lines


def capture_results(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers for a capture manifest: the first speculative run and the decode
    baseline."""
    spec = next((r for r in results if r["kind"] == "spec"), None)
    decode = next(
        (
            r
            for r in results
            if r["kind"] == "decode" and (spec is None or r["mode"] == spec["mode"])
        ),
        None,
    )
    out: dict[str, Any] = {"source": "verifyprof.workload"}
    if spec is not None:
        out.update(
            mode=spec["mode"],
            accept_len=spec["accept_len"],
            tokens_per_s=spec["tokens_per_s"],
            verify_ms=spec["verify_ms"]["median"],
            draft_ms=spec["draft_ms"]["median"],
            cycle_ms=spec["step_ms"]["median"],
        )
    pipelined = next((r for r in results if r["kind"] == "verify_pipelined"), None)
    if spec is None and pipelined is not None:
        out.update(
            mode=pipelined["mode"],
            verify_ms=pipelined["verify_ms"]["median"],
            pipelined=pipelined["steps"],
        )
    if decode is not None:
        out.update(
            baseline_tokens_per_s=decode["tokens_per_s"], decode_ms=decode["decode_ms"]["median"]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        target_cfg, draft_cfg, run = build_configs(args)
        run.validate()
    except ValueError as err:
        print(f"verifyprof.workload: {err}", file=sys.stderr)
        return 2

    from verifyprof.workload.tp import disable_multicast

    disable_multicast()  # before torch.distributed / NCCL can initialise
    import torch

    from verifyprof.workload.runner import Workload, environment
    from verifyprof.workload.tp import init_tp, local_device, shutdown_tp

    try:
        device = local_device(args.device)
    except (ValueError, RuntimeError) as err:
        print(f"verifyprof.workload: {err}", file=sys.stderr)
        return 2
    dtype = {
        "auto": torch.bfloat16 if device.type == "cuda" else torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
        "float32": torch.float32,
    }[args.dtype]
    tp = init_tp(device)
    try:
        try:
            with torch.inference_mode():
                workload = Workload(target_cfg, draft_cfg, run, device=device, dtype=dtype, tp=tp)
        except ValueError as err:
            print(f"verifyprof.workload: {err}", file=sys.stderr)
            return 2
        try:
            results = workload.run_all()
        finally:
            workload.close()
        summary = {
            "schema": SCHEMA,
            "command": [sys.executable, "-m", "verifyprof.workload", *(argv or sys.argv[1:])],
            "config": workload.describe(),
            "env": environment(device),
            "runs": results,
        }
        if args.out is not None:
            out = (
                args.out
                if tp.rank == 0
                else args.out.with_name(f"{args.out.stem}.rank{tp.rank}{args.out.suffix}")
            )
            write_json(out, summary)
        if tp.rank == 0:
            print("\n".join(report_lines(results)))
            capture_dir = os.environ.get("VERIFYPROF_CAPTURE_DIR")
            if capture_dir:  # under `verifyprof capture`: the numbers its manifest records
                write_json(Path(capture_dir) / "results.json", capture_results(results))
    finally:
        shutdown_tp(tp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
