"""Batched chain speculative decoding over a fine-grained MoE target (random weights): issue 42's
GPU proof program, written apart from ``hf_chain`` (its own networks and option names).

The target (``moe_spec_models.py``, preset ``v2lite``, DeepSeek-V2-Lite-like): 26 layers, hidden
2048, GQA attention (16 heads, 4 KV heads, head dim 128) over a static KV cache, and in every
layer 64 routed experts (intermediate 1408, top-6, run as ONE grouped GEMM over the tokens sorted
by expert) beside one shared expert (intermediate 2816); correlated, non-uniform routing; vocab
32000; ~14.5B parameters (~29 GB in bf16), ~2B read per token. The drafter: a dense 2-layer
decoder, hidden 1024. Every forward is a CUDA graph captured per (sequences, width).

One cycle: ``propose`` (the drafter over [prev, last] at width 2, then k-1 one-token steps),
``check`` (the target over the k+1 tokens), ``take`` (the accepted prefix, read by the host: one
sync a cycle). Acceptance is simulated i.i.d. (``--alpha``; the same count in every sequence);
``--draft-len 0`` is plain decoding (one target forward and one sync per token).

    python bench/programs/run_moe_spec.py --num-seqs 1 --draft-len 4 --cycles 30
    python bench/programs/run_moe_spec.py --num-seqs 1,2,4,8,16,32,64 --draft-len 0,1,2,3,4,5,6 \
        --rounds 2 --out sweep.json             # every (sequences, k); a sequence count at a time
    python bench/programs/run_moe_spec.py --preset tiny --device cpu ...   # a CPU smoke

With one configuration, ``--unprofiled-cycles N`` cycles run first, outside the profiled window
(``unprofiled_tokens_per_s``); the measured ones run inside cudaProfilerStart/Stop, then the
verify at each ``--verify-widths`` (``--verify-reps`` times, still inside). Under ``verifyprof
capture`` the numbers also go to ``$VERIFYPROF_CAPTURE_DIR/results.json``. ``run_moe_spec.py``
imports this module so that ``SpecLoop``'s methods can be hooked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
from moe_spec_models import GROUPED, Models

TARGETS = {  # the target's dims; the drafter's are draft_*
    "v2lite": {
        "layers": 26, "hidden": 2048, "heads": 16, "kv_heads": 4, "experts": 64, "top_k": 6,
        "expert_inter": 1408, "shared_inter": 2816, "vocab": 32000,
        "draft_layers": 2, "draft_hidden": 1024, "draft_inter": 2816,
    },
    "tiny": {  # the CPU smoke and the tests
        "layers": 2, "hidden": 128, "heads": 4, "kv_heads": 2, "experts": 32, "top_k": 4,
        "expert_inter": 64, "shared_inter": 128, "vocab": 512,
        "draft_layers": 1, "draft_hidden": 64, "draft_inter": 128,
    },
}  # fmt: skip
GOLDEN = (5**0.5 - 1) / 2


def ints(text: str) -> list[int]:
    return [int(x) for x in str(text).split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(TARGETS), default="v2lite")
    p.add_argument("--num-seqs", default="1", help="sequences in lockstep; several: in turn")
    p.add_argument("--draft-len", default="4", help="k drafts a cycle (0: plain); several: in turn")
    p.add_argument("--prompt-len", type=int, default=512, help="context before the cycles")
    p.add_argument("--alpha", type=float, default=0.6, help="simulated i.i.d. acceptance rate")
    p.add_argument("--cycles", type=int, default=24, help="measured cycles per config and round")
    p.add_argument("--warmup-cycles", type=int, default=4)
    p.add_argument("--rounds", type=int, default=1, help="configs measured in turn this often")
    p.add_argument("--unprofiled-cycles", type=int, default=0, help="one config: before the window")
    p.add_argument("--verify-widths", default="", help="one config: verify widths after it")
    p.add_argument("--verify-reps", type=int, default=6)
    p.add_argument("--route-pop", type=float, default=0.5, help="expert popularity bias sd")
    p.add_argument("--route-topic", type=float, default=0.8, help="per-sequence topic bias sd")
    for key in TARGETS["v2lite"]:
        p.add_argument("--" + key.replace("_", "-"), type=int)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="the results JSON (also $VERIFYPROF_CAPTURE_DIR)")
    args = p.parse_args(argv)
    dims = TARGETS[args.preset] | {
        key: getattr(args, key) for key in TARGETS["v2lite"] if getattr(args, key) is not None
    }
    hd = dims["hidden"] // dims["heads"]
    dheads = max(dims["draft_hidden"] // hd, 1)
    args.dims = dims
    args.target_cfg = {
        **{key: dims[key] for key in ("layers", "hidden", "heads", "kv_heads", "vocab")},
        **{key: dims[key] for key in ("experts", "top_k", "expert_inter", "shared_inter")},
        "route_pop": args.route_pop, "route_topic": args.route_topic, "seed": args.seed,
    }  # fmt: skip
    args.draft_cfg = {
        "layers": dims["draft_layers"], "hidden": dims["draft_hidden"], "heads": dheads,
        "kv_heads": max(dheads * dims["kv_heads"] // dims["heads"], 1),
        "inter": dims["draft_inter"], "vocab": dims["vocab"],
    }  # fmt: skip
    args.ks, args.seqs, args.widths = ints(args.draft_len), ints(args.num_seqs), []
    if len(args.ks) * len(args.seqs) == 1:
        args.widths = ints(args.verify_widths)
    if not 0 <= args.alpha <= 1 or min(args.ks) < 0 or min(args.seqs) < 1:
        p.error("--alpha in [0, 1], --draft-len >= 0, --num-seqs >= 1")
    return args


class SpecLoop:
    """The speculative loop of ``rows`` sequences at draft length ``k``; its methods are the
    phases a user hooks."""

    def __init__(self, args: argparse.Namespace, models: Models, k: int, rows: int):
        self.args, self.models, self.k, self.rows = args, models, k, rows
        self.verify_fw = models.forward("target", rows, k + 1)
        self.extend_fw = models.forward("draft", rows, 2) if k else None
        self.step_fw = models.forward("draft", rows, 1) if k > 1 else None
        self.u = 0.5  # low-discrepancy draws: the accept length converges within tens of cycles
        self.emitted = 0

    def start(self) -> None:
        """Back to the prompt's end (the prompt is prefilled once per row count; every k and
        round restarts there, its cycles overwriting the last one's cache entries)."""
        prev, last = self.models.prefilled(self.rows)
        self.n, self.prev, self.last = self.args.prompt_len, prev.clone(), last.clone()
        widest = max(self.k + 1, 2, *self.args.widths)
        self.window = torch.arange(widest, device=self.args.device)

    def propose(self) -> torch.Tensor:
        """k draft tokens: the drafter over [prev, last] (width 2), then k-1 one-token steps."""
        token = self.extend_fw(torch.cat((self.prev, self.last), 1), self.n - 1 + self.window[:2])
        drafts = [token[:, -1:]]
        for i in range(1, self.k):
            drafts.append(self.step_fw(drafts[-1], self.n + i + self.window[:1]).clone())
        return torch.cat(drafts, 1)

    def check(self, drafts: torch.Tensor) -> torch.Tensor:
        """The target over [last, drafts]: its own next token at each position."""
        return self.verify_fw(torch.cat((self.last, drafts), 1), self.n + self.window[: self.k + 1])

    def take(self, drafts: torch.Tensor, best: torch.Tensor) -> int:
        """Accept a simulated prefix (the same count in every sequence); read the emitted tokens
        on the host (one sync a cycle)."""
        self.u = (self.u + GOLDEN) % 1.0
        a = sum(self.u < self.args.alpha**i for i in range(1, self.k + 1))
        self.emitted += len(best[:, : a + 1].flatten().tolist())
        self.prev = (drafts[:, a - 1 : a] if a else self.last).clone()
        self.last = best[:, a : a + 1].clone()
        self.n += a + 1
        return a + 1

    def decode(self) -> int:
        """Plain decoding: the target over the newest token, read by the host."""
        self.last = self.verify_fw(self.last, self.n + self.window[:1]).clone()
        self.emitted += len(self.last.flatten().tolist())
        self.n += 1
        return 1

    def cycle(self) -> int:
        if not self.k:
            return self.decode()
        drafts = self.propose()
        return self.take(drafts, self.check(drafts))

    def sweep_check(self, width: int) -> torch.Tensor:
        """The verify at ``width`` after the newest token (never committed)."""
        fw = self.models.forward("target", self.rows, width)
        return fw(self.last.expand(-1, width), self.n + self.window[:width])


def timed(loop: SpecLoop, cycles: int, cuda: bool) -> tuple[int, float, list[float]]:
    """``cycles`` cycles timed by the host: tokens per sequence, seconds, ms of each."""
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    marks, tokens = [start], 0
    for _ in range(cycles):
        tokens += loop.cycle()
        marks.append(time.perf_counter())
    if cuda:
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - start, [(b - a) * 1e3 for a, b in zip(marks, marks[1:])]


def measure(args, models: Models, k: int, rows: int, profile: bool) -> dict:
    """One (rows, k): warm-up, the unprofiled cycles, then the measured ones (inside the profiled
    window when ``profile``), then the verify-width sweep inside it."""
    cuda = args.device.startswith("cuda")
    loop = SpecLoop(args, models, k, rows)
    extra: dict = {}
    with torch.no_grad():
        loop.start()
        for _ in range(args.warmup_cycles):
            loop.cycle()
        if args.unprofiled_cycles and profile:
            n, secs, _ = timed(loop, args.unprofiled_cycles, cuda)
            extra = {"unprofiled_tokens_per_s": rows * n / secs, "unprofiled_cycles": n}
        for width in args.widths:  # made (captured) and run once outside the window
            loop.sweep_check(width)
        if cuda and profile:
            torch.cuda.cudart().cudaProfilerStart()
        tokens, secs, each = timed(loop, args.cycles, cuda)
        if args.widths:
            extra["sweep_ms"] = {str(w): sweep_width(args, loop, w, cuda) for w in args.widths}
        if cuda and profile:
            torch.cuda.cudart().cudaProfilerStop()
    return {
        "num_draft": k, "batch": rows, "context": args.prompt_len, "steps": args.cycles,
        "tokens": tokens, "accept_len": tokens / args.cycles, "cycle_ms": secs / args.cycles * 1e3,
        "tokens_per_s": rows * tokens / secs, "tokens_per_s_per_request": tokens / secs,
        "cycle_ms_each": each, **extra,
    }  # fmt: skip


def sweep_width(args, loop: SpecLoop, width: int, cuda: bool) -> list[float]:
    times = []
    for _ in range(args.verify_reps):
        t0 = time.perf_counter()
        loop.sweep_check(width)
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def merged(rounds: list[dict]) -> dict:
    """One configuration over its rounds: totals, and each round's (hf_chain's sweep format)."""
    steps, tokens = sum(r["steps"] for r in rounds), sum(r["tokens"] for r in rounds)
    secs = sum(r["cycle_ms"] * r["steps"] for r in rounds) / 1e3
    rows = rounds[0]["batch"]
    return rounds[0] | {
        "steps": steps, "tokens": tokens, "accept_len": tokens / steps,
        "tokens_per_s": rows * tokens / secs, "tokens_per_s_per_request": tokens / secs,
        "cycle_ms": secs / steps * 1e3,
        "round_cycle_ms": [r["cycle_ms"] for r in rounds],
        "round_tokens_per_s": [r["tokens_per_s"] for r in rounds],
        "round_accept_len": [r["accept_len"] for r in rounds],
        "cycle_ms_each": [c for r in rounds for c in r["cycle_ms_each"]],
    }  # fmt: skip


def run_all(args, models: Models) -> tuple[list[dict], dict]:
    """Every (rows, k): a row count at a time (its graphs captured first, freed after), its k in
    interleaved rounds; the routing's distinct experts per row count."""
    single = len(args.ks) * len(args.seqs) == 1
    rounds: dict[tuple[int, int], list[dict]] = {}
    routing = {}
    for rows in args.seqs:
        for k in args.ks:  # every graph captured before the prompt is prefilled: a capture
            SpecLoop(args, models, k, rows)  # writes its dummy keys at positions 0..width-1
        for width in args.widths:
            models.forward("target", rows, width)
        routing[str(rows)] = models.routing_stats(rows, [1, 2, 5])
        for _ in range(max(args.rounds, 1)):
            for k in args.ks:
                rounds.setdefault((rows, k), []).append(measure(args, models, k, rows, single))
        models.release(rows)
        print(f"moe_spec: {rows} sequences done", file=sys.stderr, flush=True)
    return [merged(rounds[(b, k)]) for b in args.seqs for k in args.ks], routing


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.device.startswith("cuda"):
        torch.set_num_threads(1)  # the CPU smoke: intra-op threads only spin on a shared host
    started = time.perf_counter()
    widest = max(max(args.ks) + 1, *args.widths, 5)
    cycles = args.warmup_cycles + args.cycles + args.unprofiled_cycles
    models = Models(args, args.prompt_len + cycles * (max(args.ks) + 1) + widest + 8)
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    init_s = time.perf_counter() - started
    print(f"moe_spec: init {init_s:.1f} s ({GROUPED}, {args.device})", file=sys.stderr, flush=True)
    runs, routing = run_all(args, models)
    last = runs[-1]
    result = {
        "program": "moe_spec", "preset": args.preset, "dims": args.dims, "alpha": args.alpha,
        "route_pop": args.route_pop, "route_topic": args.route_topic, "grouped_gemm": GROUPED,
        "graphs": cuda and all(f["mode"] == "cuda-graph" for f in models.made),
        "init_s": init_s, "wall_s": time.perf_counter() - started,
        "max_cache_len": models.max_len, "forwards": models.made, "routing": routing,
        "runs": runs, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        **{key: last[key] for key in ("accept_len", "tokens_per_s", "tokens_per_s_per_request",
                                      "cycle_ms", "batch", "context")},
        **({"unprofiled_tokens_per_s": last["unprofiled_tokens_per_s"]}
           if "unprofiled_tokens_per_s" in last else {}),
        "num_draft": last["num_draft"] or None,  # verifyprof's bound: k >= 1 (plain: none)
        "accept_len_convention": "tokens_per_verify",
    }  # fmt: skip
    line = json.dumps(result)
    print(line)
    for target in (args.out, os.environ.get("VERIFYPROF_CAPTURE_DIR")):
        if target:
            path = Path(target)
            path = path / "results.json" if path.is_dir() else path
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(line + "\n")
            tmp.replace(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
