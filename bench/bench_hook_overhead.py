"""Hook overhead: verify time with verifyprof's hooks vs without, in one run, eager and CUDA-graph.

    python bench/bench_hook_overhead.py                         # H200: default workload, eager +
    graph
    python bench/bench_hook_overhead.py --device cpu --preset tiny --rounds 4 --steps 20   # CPU
    smoke run
    nsys profile -t cuda,nvtx -o bench/out/hooks python bench/bench_hook_overhead.py      # NVTX
    recorded

One process, one model, one set of CUDA graphs. The project's workload runs with its built-in
ranges off; the arms take turns round by round (order alternating, so drift and clocks hit all
alike), each a block of ``--steps`` speculative iterations:

* ``none``: no ranges at all (the baseline);
* ``hooks``: ``hooks.install("workload")`` puts spec_step/draft/verify/accept/draft_extend ranges
  around the workload's methods from the outside, as on a server (uninstalled after the block);
* ``builtin``: the workload's own ``nvtx_range`` calls, for comparison.

The verify time is the workload's own per-iteration measurement (CUDA events around the verify
call, or the host clock on the CPU), so a hook's host cost counts wherever it delays the GPU.
Prints the median verify time per arm and the ratio hooks/none (the median over rounds of the
ratio of the arms' medians within a round, so slow drift cancels) against issue 4's targets (under
1% with CUDA graphs, under 2% eager), plus the host cost of one hooked call; writes the numbers
to ``--out`` (default bench/out/bench_hook_overhead.json). ``--check`` exits 1 when a target is
missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TARGETS = {"graph": 0.01, "eager": 0.02}  # max overhead of hooks on verify time, issue 4
ARMS = ("none", "hooks", "builtin")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument(
        "--preset",
        default="auto",
        choices=("auto", "default", "tiny"),
        help="workload model (auto: default on CUDA, tiny on CPU)",
    )
    p.add_argument("--modes", default="auto", help="eager,graph (auto: both on CUDA, eager on CPU)")
    p.add_argument("--rounds", type=int, default=30, help="turns of every arm")
    p.add_argument("--steps", type=int, default=20, help="speculative iterations per arm per round")
    p.add_argument("--warmup", type=int, default=10, help="iterations per arm before measuring")
    p.add_argument("--num-draft", type=int, default=3)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument(
        "--context", type=int, default=None, help="prompt tokens (default 512 on CUDA, 64 on CPU)"
    )
    p.add_argument("--out", type=Path, default=HERE / "out" / "bench_hook_overhead.json")
    p.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    return p.parse_args(argv)


def host_cost_ns(calls: int = 200_000) -> dict[str, float]:
    """Nanoseconds one call costs: plain, hooked without a range (predicate false), hooked with
    one."""
    from verifyprof.capture.hooks import api as hooks

    def noop(x: int) -> int:
        return x

    hooked = hooks.wrap(noop, "verify", attrs=lambda call: {"bs": 1, "tokens": 4})
    skipped = hooks.wrap(noop, "verify", when=lambda call: False)
    out = {}
    for name, fn in (("plain", noop), ("hook_skipped", skipped), ("hook_range", hooked)):
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter_ns()
            for i in range(calls):
                fn(i)
            best = min(best, (time.perf_counter_ns() - start) / calls)
        out[name] = best
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from verifyprof.capture.hooks import api as hooks
    from verifyprof.contracts.plumbing.nvtx import nvtx_range
    from verifyprof.workload.config import (
        DEFAULT,
        DEFAULT_DRAFT,
        TINY,
        TINY_DRAFT,
        RunConfig,
    )
    from verifyprof.workload.runner import Workload

    @contextlib.contextmanager
    def no_range(name: str, payload: object = None, **attrs: object) -> Iterator[None]:
        yield

    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    cuda = device.type == "cuda"
    preset = args.preset if args.preset != "auto" else ("default" if cuda else "tiny")
    target_cfg, draft_cfg = {"default": (DEFAULT, DEFAULT_DRAFT), "tiny": (TINY, TINY_DRAFT)}[
        preset
    ]
    modes = tuple(
        m
        for m in (
            args.modes if args.modes != "auto" else ("eager,graph" if cuda else "eager")
        ).split(",")
        if m
    )
    run = RunConfig(
        modes=modes,
        steps=args.steps,
        warmup=0,
        decode_steps=0,
        num_draft=args.num_draft,
        accept_len=2.0,
        batch=args.batch,
        context=args.context or (512 if cuda else 64),
        widths=(),
        sweep_steps=0,
        ranges=False,
    )
    dtype = torch.bfloat16 if cuda else torch.float32
    try:
        with torch.inference_mode():
            workload = Workload(target_cfg, draft_cfg, run, device=device, dtype=dtype)
    except ValueError as err:
        print(f"bench_hook_overhead: {err}", file=sys.stderr)
        return 2

    def arm(name: str) -> None:
        hooks.uninstall()
        workload.range = nvtx_range if name == "builtin" else no_range
        if name == "hooks":
            hooks.install("workload")

    # [mode, arm] -> one list of per-iteration times per round
    verify: dict[tuple[str, str], list[list[float]]] = {(m, a): [] for m in modes for a in ARMS}
    step: dict[tuple[str, str], list[list[float]]] = {(m, a): [] for m in modes for a in ARMS}
    started = time.time()
    with torch.inference_mode():
        for mode in modes:
            for name in ARMS:
                arm(name)
                workload.run_spec(mode, args.warmup, seed=1)
            for r in range(args.rounds):
                for name in ARMS if r % 2 == 0 else ARMS[::-1]:
                    arm(name)
                    result = workload.run_spec(mode, args.steps, seed=r)
                    verify[mode, name].append(result["per_step"]["verify_ms"])
                    step[mode, name].append(result["per_step"]["step_ms"])
    arm("none")
    host = host_cost_ns()

    def pooled(rounds: list[list[float]]) -> float:
        return statistics.median(x for values in rounds for x in values)

    def paired(times: dict, mode: str, arm_name: str) -> float:
        """Median over rounds of (median of arm / median of none) in the same round: drift
        cancels."""
        return statistics.median(
            statistics.median(a) / statistics.median(b)
            for a, b in zip(times[mode, arm_name], times[mode, "none"])
        )

    rows = []
    for mode in modes:
        med = {a: pooled(verify[mode, a]) for a in ARMS}
        step_med = {a: pooled(step[mode, a]) for a in ARMS}
        overhead = paired(verify, mode, "hooks") - 1
        rows.append(
            {
                "mode": mode,
                "verify_ms_median": med,
                "step_ms_median": step_med,
                "ratio_hooks_over_none": paired(verify, mode, "hooks"),
                "ratio_builtin_over_none": paired(verify, mode, "builtin"),
                "step_ratio_hooks_over_none": paired(step, mode, "hooks"),
                "overhead": overhead,
                "target": TARGETS.get(mode) if cuda else None,  # the targets are for GPUs
                "samples": sum(map(len, verify[mode, "hooks"])),
                "ok": not cuda or overhead < TARGETS.get(mode, float("inf")),
            }
        )

    print(
        f"hook overhead on the verify step: workload {preset}, {device.type}, bs={args.batch},"
        f" k={args.num_draft}, {args.rounds} rounds x {args.steps} steps per arm"
        f" ({time.time() - started:.0f} s)"
    )
    print(
        f"{'mode':6s} {'verify none':>12s} {'hooks':>10s} {'builtin':>10s} {'hooks/none':>11s} "
        f"{'builtin/none':>13s} {'step h/n':>9s}  target"
    )
    for r in rows:
        m = r["verify_ms_median"]
        verdict = (
            f"< {r['target']:.0%}: {'PASS' if r['ok'] else 'FAIL'}"
            if r["target"] is not None
            else "(targets apply to CUDA runs)"
        )
        print(
            f"{r['mode']:6s} {m['none']:10.4f}ms {m['hooks']:8.4f}ms {m['builtin']:8.4f}ms "
            f"{r['ratio_hooks_over_none']:11.4f} {r['ratio_builtin_over_none']:13.4f} "
            f"{r['step_ratio_hooks_over_none']:9.4f}  {verdict}"
        )
    print(
        f"host cost per call: plain {host['plain']:.0f} ns, hooked (predicate false)"
        f" {host['hook_skipped']:.0f} ns, hooked with a range {host['hook_range']:.0f} ns"
    )

    summary = {
        "schema": "verifyprof.bench_hook_overhead/1",
        "device": device.type,
        "preset": preset,
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        "torch": torch.__version__,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "modes": rows,
        "host_cost_ns": host,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=1) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    return 1 if args.check and not all(r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
