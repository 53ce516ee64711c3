"""Chain speculative decoding over transformers' Llama (random weights): a program verifyprof did
not grow from its own workload, for the whole-cycle predictions of ``bench/bench_cycle.py`` and
``bench/bench_seed.py``.

A target and a small drafter, each with a static KV cache (transformers' ``StaticCache``, one per
batch size). One cycle: ``propose`` (the drafter catches up on the last two tokens at width 2,
then drafts token by token: k forwards), ``check`` (the target over the k+1 tokens), ``take``
(the accepted prefix, read by the host: one sync per cycle, as a server streaming tokens does).
Acceptance is simulated i.i.d. (``--alpha``), as SGLang's SGLANG_SIMULATE_ACC_LEN does, so every
mode and k sees the same accept counts; the tokens are the target's own. ``--num-draft 0`` is
plain decoding (one target forward and one sync per token). ``--batch B``: B rows in lockstep
(every row accepts the same count, so per-request acceptance is unchanged); tokens/s counts all
rows, ``tokens_per_s_per_request`` one.

Modes (``hf_chain_models.py``): ``eager``; ``graph`` (every forward captured as a
``torch.cuda.CUDAGraph``: the "all compiled" setup without Inductor); ``seed`` (plain decoding and
the drafter as graphs, the verify eager: the seed team's configuration); ``compile`` (each forward
under ``torch.compile(mode="reduce-overhead", fullgraph=True)``).

    python bench/programs/run_hf_chain.py --mode graph --num-draft 3 --steps 64 --out r.json
    python bench/programs/run_hf_chain.py --preset 7b --mode graph --batch 1,4 --num-draft 0,2
    python bench/programs/run_hf_chain.py --preset 7b --mode seed --num-draft 4 \
        --sweep-widths 1,2,3,5,7,9 --sweep-steps 6

Several (batch, k) configurations are measured in one process in interleaved ``--rounds``.
``--sweep-widths``: after the measured cycles (inside the profiled window) the target's verify
forward at each width, in the verify's own mode, ``--sweep-steps`` times each
(``ChainDecoder.sweep_check``, a sync after each, outside it), timed by the host.

(``run_hf_chain.py`` imports this module, so that its methods can be hooked: a script's own
functions run as ``__main__`` and cannot be.)

Under ``verifyprof capture`` the numbers also go to ``$VERIFYPROF_CAPTURE_DIR/results.json``
(accept_len, tokens_per_s); the measured steps run inside cudaProfilerStart/Stop.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
from hf_chain_models import GRAPH_IMPL, Models

PRESETS = {
    "7b": {  # Llama-2-7B-like, GQA; weight-bound decode on one H200
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "intermediate": 11008,
        "vocab": 32000,
        "draft_layers": 2,
        "draft_hidden": 1024,
    },
}
# Llama-2-7B-like with full multi-head attention (kv heads = heads = 32): a KV cache of 0.5 MB a
# token, read whole every forward (the static cache), so the verify grows with batch x context
PRESETS["7b-mha"] = PRESETS["7b"] | {"kv_heads": 32}


def ints(text: str) -> list[int]:
    return [int(x) for x in str(text).split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("eager", "graph", "seed", "compile"), default="eager")
    p.add_argument("--preset", choices=sorted(PRESETS), help="model dims (flags given override)")
    p.add_argument(
        "--num-draft",
        default="3",
        help="k drafts per cycle (0: plain decoding); several (0,1,2,4) are measured in turn",
    )
    p.add_argument("--batch", default="1", help="rows in lockstep; several (1,4,16) in turn")
    p.add_argument("--steps", type=int, default=48, help="measured cycles (or decode steps)")
    p.add_argument("--warmup", type=int, default=6)
    p.add_argument("--alpha", type=float, default=0.7, help="simulated i.i.d. acceptance rate")
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--draft-layers", type=int, default=2)
    p.add_argument("--draft-hidden", type=int, default=768)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="several configurations: measure them in turn this many times (host speed drifts)",
    )
    p.add_argument("--sweep-widths", default="", help="verify widths run after the cycles")
    p.add_argument("--sweep-steps", type=int, default=6)
    p.add_argument("--out", type=Path)
    first, _ = p.parse_known_args(argv)
    if first.preset:
        p.set_defaults(**PRESETS[first.preset])
    args = p.parse_args(argv)
    args.sweep = ints(args.sweep_widths)
    return args


GOLDEN = (5**0.5 - 1) / 2


class ChainDecoder:
    """The speculative loop; its methods are the phases a user would hook."""

    def __init__(self, args: argparse.Namespace, models: Models, k: int, batch: int = 1):
        self.args, self.k, self.batch, self.models = args, k, batch, models
        self.target, self.draft = models.target, models.draft
        self.tcache = models.cache("target", batch)
        self.dcache = models.cache("draft", batch)
        role = "verify" if k else "decode"
        self.verify_fw = models.forward("target", k + 1, batch, role)
        self.extend_fw = models.forward("draft", 2, batch, "draft") if k else None
        self.step_fw = models.forward("draft", 1, batch, "draft") if k > 1 else None
        self.u = 0.5  # low-discrepancy draws: the mean accept length converges within tens
        self.tokens: list[int] = []
        self.accepted: list[int] = []

    def prefill(self) -> None:
        """The context in both caches (prefilled once per batch: every k and round of the batch
        restarts at the context's end, its cycles overwriting the last one's entries)."""
        prev, last = self.models.prefilled(self.batch)
        self.n = self.args.context  # tokens in the target's cache
        self.prev = prev.clone()  # the token before ``last``, in both caches
        self.last = last.clone()  # newest token, in neither cache
        dev = self.args.device
        self.window = torch.arange(max(self.k + 1, *self.args.sweep, 1), device=dev)

    def propose(self) -> torch.Tensor:
        """k draft tokens: the drafter over [prev, last] (width 2), then k-1 one-token steps."""
        pos = self.n - 1 + self.window[:2]
        logits = self.extend_fw(torch.cat((self.prev, self.last), 1), pos)
        token = logits[:, -1:].argmax(-1)
        drafts = [token]
        for i in range(1, self.k):
            pos1 = torch.full((1,), self.n + i, dtype=torch.long, device=token.device)
            token = self.step_fw(token, pos1)[:, -1:].argmax(-1)
            drafts.append(token)
        return torch.cat(drafts, 1)

    def check(self, drafts: torch.Tensor) -> torch.Tensor:
        """The target over [last, drafts]: its own next token at each position."""
        pos = self.n + self.window[: self.k + 1]
        return self.verify_fw(torch.cat((self.last, drafts), 1), pos).argmax(-1)

    def take(self, drafts: torch.Tensor, best: torch.Tensor) -> int:
        """Accept a simulated prefix of the drafts (the same count in every row); emit the
        target's tokens; read them (sync)."""
        self.u = (self.u + GOLDEN) % 1.0
        a = sum(self.u < self.args.alpha**i for i in range(1, self.k + 1))
        emitted = best[:, : a + 1]
        self.tokens += emitted.flatten().tolist()  # the host reads the tokens: one sync a cycle
        self.prev = (drafts[:, a - 1 : a] if a else self.last).clone()
        self.last = best[:, a : a + 1].clone()
        self.n += a + 1
        self.accepted.append(a + 1)
        return a + 1

    def decode(self) -> int:
        """Plain decoding: one target forward over the newest token, read by the host."""
        pos = self.n + self.window[:1]
        self.last = self.verify_fw(self.last, pos)[:, -1:].argmax(-1)
        self.tokens += self.last.flatten().tolist()
        self.n += 1
        return 1

    def cycle(self) -> int:
        if not self.k:
            return self.decode()
        drafts = self.propose()
        return self.take(drafts, self.check(drafts))

    def sweep_forward(self, width: int):
        """The target's verify forward at ``width``, in the verify's mode (made and warmed up
        before the profiled window)."""
        return self.models.forward("target", width, self.batch, "verify")

    def sweep_check(self, width: int) -> torch.Tensor:
        """The width sweep's verify: the target over ``width`` tokens after the newest (never
        committed: the next cycle overwrites them)."""
        fw = self.sweep_forward(width)
        return fw(self.last.expand(-1, width), self.n + self.window[:width])


def sweep(args: argparse.Namespace, dec: ChainDecoder, cuda: bool) -> dict[str, list[float]]:
    """Each sweep width ``--sweep-steps`` times, a sync after each; host ms per call."""
    out: dict[str, list[float]] = {}
    for width in args.sweep:
        times = []
        for _ in range(args.sweep_steps):
            t0 = time.perf_counter()
            dec.sweep_check(width)
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        out[str(width)] = times
    return out


def measure(
    args: argparse.Namespace, models: Models, k: int, batch: int, profile: bool, widths: bool
) -> dict:
    """One (batch, k): prefill, warm up (compiling or capturing the forwards), then the measured
    cycles (inside cudaProfilerStart/Stop when ``profile``), each timed by the host (the sync
    ends it); then the width sweep when ``widths``, still inside the window."""
    dec = ChainDecoder(args, models, k, batch)
    cuda = args.device.startswith("cuda")
    with torch.no_grad():
        dec.prefill()
        for _ in range(args.warmup):
            dec.cycle()
        for width in args.sweep if widths else ():
            fw = dec.sweep_forward(width)  # made (captured) and run once outside the window
            fw(dec.last.expand(-1, width), dec.n + dec.window[:width])
        dec.accepted.clear()
        if cuda:
            torch.cuda.synchronize()
            if profile:
                torch.cuda.cudart().cudaProfilerStart()
        start = time.perf_counter()
        marks = [start]
        tokens = 0
        for _ in range(args.steps):
            tokens += dec.cycle()
            marks.append(time.perf_counter())
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        swept = sweep(args, dec, cuda) if widths else None
        if cuda and profile:
            torch.cuda.cudart().cudaProfilerStop()
    return {
        "mode": args.mode,
        "num_draft": k,
        "batch": batch,
        "context": args.context,
        "steps": args.steps,
        "accept_len": tokens / args.steps,
        "tokens_per_s": batch * tokens / elapsed,
        "tokens_per_s_per_request": tokens / elapsed,
        "cycle_ms": elapsed / args.steps * 1e3,
        "tokens": tokens,
        "cycle_ms_each": [(b - a) * 1e3 for a, b in zip(marks, marks[1:])],
        **({"sweep_ms": swept} if swept is not None else {}),
    }


def merged(rounds: list[dict]) -> dict:
    """One configuration measured in several rounds: totals over all, and each round's."""
    steps = sum(r["steps"] for r in rounds)
    tokens = sum(r["tokens"] for r in rounds)
    elapsed = sum(r["cycle_ms"] * r["steps"] for r in rounds) / 1e3
    batch = rounds[0]["batch"]
    swept = next((r["sweep_ms"] for r in rounds if "sweep_ms" in r), None)
    return {key: v for key, v in rounds[0].items() if key != "sweep_ms"} | {
        "steps": steps,
        "tokens": tokens,
        "accept_len": tokens / steps,
        "tokens_per_s": batch * tokens / elapsed,
        "tokens_per_s_per_request": tokens / elapsed,
        "cycle_ms": elapsed / steps * 1e3,
        "round_cycle_ms": [r["cycle_ms"] for r in rounds],
        "round_tokens_per_s": [r["tokens_per_s"] for r in rounds],
        "round_accept_len": [r["accept_len"] for r in rounds],
        "cycle_ms_each": [c for r in rounds for c in r["cycle_ms_each"]],
        **({"sweep_ms": swept} if swept is not None else {}),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ks, batches = ints(args.num_draft), ints(args.batch)
    configs = [(b, k) for b in batches for k in ks]
    models = Models(args, max(ks))
    rounds: dict[tuple[int, int], list[dict]] = {c: [] for c in configs}
    n_rounds = max(args.rounds, 1)
    for b in batches:  # one batch at a time: its caches and graphs freed before the next
        for k in ks:  # every forward made (graphs captured) before the context is prefilled
            ChainDecoder(args, models, k, b)
        for width in args.sweep:
            models.forward("target", width, b, "verify")
        for r in range(n_rounds):  # the batch's k in interleaved rounds (host speed drifts)
            for k in ks:
                widths = bool(args.sweep) and r == n_rounds - 1  # the sweep once, last round
                rounds[(b, k)].append(measure(args, models, k, b, len(configs) == 1, widths))
        models.release(b)
    runs = [merged(rounds[c]) for c in configs]
    cuda = args.device.startswith("cuda")
    result = {
        "program": "hf_chain",
        "preset": args.preset,
        "alpha": args.alpha,
        "context": args.context,
        "kv_heads": models.tcfg.num_key_value_heads,
        "max_cache_len": models.max_len,
        "graph_impl": GRAPH_IMPL[0] if args.mode in ("graph", "seed") else None,
        "init_s": models.init_s,
        "forwards": models.made,
        "runs": runs,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        **{
            key: runs[-1][key]
            for key in (
                "accept_len",
                "tokens_per_s",
                "tokens_per_s_per_request",
                "cycle_ms",
                "mode",
                "batch",
                "context",
            )
        },
        "num_draft": runs[-1]["num_draft"] or None,  # verifyprof's bound: k >= 1 (plain: none)
        "accept_len_convention": "tokens_per_verify",
    }
    line = json.dumps(result)
    print(line)
    for target in (args.out, os.environ.get("VERIFYPROF_CAPTURE_DIR")):
        if target:
            path = Path(target)
            path = path / "results.json" if path.is_dir() else path
            path.write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
