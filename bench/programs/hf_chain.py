"""Chain speculative decoding over transformers' Llama (random weights): a program verifyprof did
not grow from its own workload, for the whole-cycle predictions of ``bench/bench_cycle.py``.

A target and a small drafter share a static KV cache layout (transformers' ``StaticCache``). One
cycle: ``propose`` (the drafter catches up on the last two tokens at width 2, then drafts
token by token: k forwards), ``check`` (the target over the k+1 tokens), ``take`` (the accepted
prefix, read by the host: one sync per cycle, as a server streaming tokens does). Acceptance
is simulated i.i.d. (``--alpha``), as SGLang's SGLANG_SIMULATE_ACC_LEN does, so every mode and
k sees the same accept counts; the tokens are the target's own. ``--num-draft 0`` is plain
decoding (one target forward and one sync per token).

Modes: ``eager``; ``graph`` (each forward captured as a ``torch.cuda.CUDAGraph`` over static
buffers); ``compile`` (each forward under ``torch.compile(mode="reduce-overhead",
fullgraph=True)``: Inductor's fusion plus cudagraph trees).

    python bench/programs/run_hf_chain.py --mode graph --num-draft 3 --steps 64 --out r.json
    python bench/programs/run_hf_chain.py --mode compile --num-draft 0,1,2,4,6 --out r.json

(``run_hf_chain.py`` imports this module, so that its methods can be hooked: a script's own
functions run as ``__main__`` and cannot be.)

Under ``verifyprof capture`` the numbers also go to ``$VERIFYPROF_CAPTURE_DIR/results.json``
(accept_len, tokens_per_s); the measured steps run inside cudaProfilerStart/Stop.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("eager", "graph", "compile"), default="eager")
    p.add_argument(
        "--num-draft",
        default="3",
        help="k drafts per cycle (0: plain decoding); several (0,1,2,4) are measured in turn",
    )
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
        help="several k: measure them in turn this many times (host speed drifts over seconds)",
    )
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


def build(args: argparse.Namespace, hidden: int, layers: int, inter: int, max_len: int):
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    heads = args.heads if hidden == args.hidden else max(hidden // 128, 1)
    cfg = LlamaConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=math.gcd(args.kv_heads, heads),  # grouped-query: kv heads divide
        intermediate_size=inter,
        vocab_size=args.vocab,
        max_position_embeddings=max_len,
    )
    cfg._attn_implementation = "sdpa"
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    model = LlamaForCausalLM(cfg).to(device=args.device, dtype=dtype).eval()
    return model, StaticCache(config=cfg, max_cache_len=max_len)


def at(cache, pos: torch.Tensor) -> None:
    """Write the next keys at ``pos``: newer transformers place them at the cache's own running
    length (ignoring ``cache_position``), so that length is set on the device, in the graph too
    (rejected drafts' entries are then overwritten, as a server's rollback does)."""
    for layer in getattr(cache, "layers", ()):
        length = getattr(layer, "cumulative_length", None)
        if isinstance(length, torch.Tensor) and length.device == pos.device:
            length.copy_(pos[0].reshape(length.shape))


class Forward:
    """One model forward at a fixed width over static input buffers, in the run's mode."""

    def __init__(self, model, cache, width: int, mode: str, device: str):
        self.model, self.cache, self.mode = model, cache, mode
        self.ids = torch.zeros((1, width), dtype=torch.long, device=device)
        self.pos = torch.arange(width, dtype=torch.long, device=device)
        self.graph = None
        self.out = None
        self.fn = self._forward
        if mode == "compile":
            self.fn = torch.compile(self._forward, mode="reduce-overhead", fullgraph=True)

    def _forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        at(self.cache, pos)
        out = self.model(
            input_ids=ids,
            position_ids=pos[None],
            cache_position=pos,
            past_key_values=self.cache,
            use_cache=True,
        )
        return out.logits

    def capture(self) -> None:
        """Graph mode: record the forward once (after eager warm-up calls on a side stream); if
        transformers' forward cannot be captured, cudagraph trees without Inductor instead."""
        try:
            self._capture()
        except Exception as err:  # noqa: BLE001 - any capture failure: the fallback says why
            print(
                f"hf_chain: CUDA graph capture failed ({err}); using backend=cudagraphs",
                file=sys.stderr,
            )
            self.graph, self.mode = None, "compile"
            self.fn = torch.compile(self._forward, backend="cudagraphs", fullgraph=True)
            GRAPH_IMPL[0] = "torch.compile(backend='cudagraphs')"

    def _capture(self) -> None:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward(self.ids, self.pos)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self._forward(self.ids, self.pos)

    def __call__(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.ids.copy_(ids)
        self.pos.copy_(pos)
        if self.graph is not None:
            self.graph.replay()
            return self.out
        if self.mode == "compile":
            torch.compiler.cudagraph_mark_step_begin()
            return self.fn(self.ids, self.pos).clone()
        return self.fn(self.ids, self.pos)


class Models:
    """The target and the drafter with their caches, and each forward once per width (a
    compiled or captured forward is reused by every k that needs it)."""

    def __init__(self, args: argparse.Namespace, max_k: int):
        self.args = args
        self.max_len = args.context + (args.steps + args.warmup) * (max_k + 1) + 8
        torch.manual_seed(args.seed)
        self.target, self.tcache = build(
            args, args.hidden, args.layers, args.intermediate, self.max_len
        )
        self.draft, self.dcache = build(
            args, args.draft_hidden, args.draft_layers, args.draft_hidden * 3, self.max_len
        )
        self.forwards: dict[tuple[str, int], Forward] = {}
        dev = args.device
        ids = torch.zeros((1, 8), dtype=torch.long, device=dev)
        pos = torch.arange(8, device=dev)
        with torch.no_grad():  # the caches allocate on first use: before any capture or compile
            for model, cache in ((self.target, self.tcache), (self.draft, self.dcache)):
                at(cache, pos)
                model(
                    input_ids=ids,
                    position_ids=pos[None],
                    cache_position=pos,
                    past_key_values=cache,
                    use_cache=True,
                )
                for layer in getattr(cache, "layers", ()):
                    length = getattr(layer, "cumulative_length", None)
                    if isinstance(length, torch.Tensor) and args.mode == "compile":
                        torch._dynamo.mark_static_address(length)

    def forward(self, which: str, width: int) -> Forward:
        key = (which, width)
        if key not in self.forwards:
            model, cache = (
                (self.target, self.tcache) if which == "target" else (self.draft, self.dcache)
            )
            fw = Forward(model, cache, width, self.args.mode, self.args.device)
            if self.args.mode == "graph":
                fw.capture()
            self.forwards[key] = fw
        return self.forwards[key]


GOLDEN = (5**0.5 - 1) / 2
GRAPH_IMPL = ["torch.cuda.CUDAGraph"]


class ChainDecoder:
    """The speculative loop; its methods are the phases a user would hook."""

    def __init__(self, args: argparse.Namespace, models: Models, k: int):
        self.args, self.k, self.models = args, k, models
        self.target, self.tcache = models.target, models.tcache
        self.draft, self.dcache = models.draft, models.dcache
        self.verify_fw = models.forward("target", max(k + 1, 1))
        self.extend_fw = models.forward("draft", 2) if k else None
        self.step_fw = models.forward("draft", 1) if k > 1 else None
        self.u = 0.5  # low-discrepancy draws: the mean accept length converges within tens
        self.tokens: list[int] = []
        self.accepted: list[int] = []

    def prefill(self) -> None:
        dev = self.args.device
        ctx = torch.randint(0, self.args.vocab, (1, self.args.context), device=dev)
        pos = torch.arange(self.args.context, device=dev)
        at(self.tcache, pos)
        at(self.dcache, pos)
        with torch.no_grad():
            logits = self.target(
                input_ids=ctx,
                position_ids=pos[None],
                cache_position=pos,
                past_key_values=self.tcache,
                use_cache=True,
            ).logits
            self.draft(
                input_ids=ctx,
                position_ids=pos[None],
                cache_position=pos,
                past_key_values=self.dcache,
                use_cache=True,
            )
        self.n = self.args.context  # tokens in the target's cache
        self.prev = ctx[:, -1:].clone()  # the token before ``last``, in both caches
        self.last = logits[:, -1:].argmax(-1)  # newest token, in neither cache
        self.window = torch.arange(self.k + 1, device=dev)

    def propose(self) -> torch.Tensor:
        """k draft tokens: the drafter over [prev, last] (width 2), then k-1 one-token steps."""
        pos = self.n - 1 + torch.arange(2, device=self.last.device)
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
        pos = self.n + self.window
        return self.verify_fw(torch.cat((self.last, drafts), 1), pos).argmax(-1)

    def take(self, drafts: torch.Tensor, best: torch.Tensor) -> int:
        """Accept a simulated prefix of a drafts; emit the target's tokens; read them (sync)."""
        self.u = (self.u + GOLDEN) % 1.0
        a = sum(self.u < self.args.alpha**i for i in range(1, self.k + 1))
        emitted = best[:, : a + 1]
        self.tokens += emitted[0].tolist()  # the host reads the tokens: one sync per cycle
        self.prev = (drafts[:, a - 1 : a] if a else self.last).clone()
        self.last = best[:, a : a + 1].clone()
        self.n += a + 1
        self.accepted.append(a + 1)
        return a + 1

    def decode(self) -> int:
        """Plain decoding: one target forward over the newest token, read by the host."""
        pos = torch.full((1,), self.n, dtype=torch.long, device=self.last.device)
        self.last = self.verify_fw(self.last, pos)[:, -1:].argmax(-1)
        self.tokens.append(int(self.last.item()))
        self.n += 1
        return 1

    def cycle(self) -> int:
        if not self.k:
            return self.decode()
        drafts = self.propose()
        return self.take(drafts, self.check(drafts))


def measure(args: argparse.Namespace, models: Models, k: int, profile: bool) -> dict:
    """One k: prefill, warm up (compiling or capturing the forwards), then the measured cycles
    (inside cudaProfilerStart/Stop when ``profile``), each timed by the host (the sync ends it)."""
    dec = ChainDecoder(args, models, k)
    cuda = args.device.startswith("cuda")
    with torch.no_grad():
        dec.prefill()
        for _ in range(args.warmup):
            dec.cycle()
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
        if cuda and profile:
            torch.cuda.cudart().cudaProfilerStop()
    return {
        "mode": args.mode,
        "num_draft": k,
        "steps": args.steps,
        "accept_len": tokens / args.steps,
        "tokens_per_s": tokens / elapsed,
        "cycle_ms": elapsed / args.steps * 1e3,
        "tokens": tokens,
        "cycle_ms_each": [(b - a) * 1e3 for a, b in zip(marks, marks[1:])],
    }


def merged(rounds: list[dict]) -> dict:
    """One k measured in several rounds: totals over all, and each round's cycle."""
    steps = sum(r["steps"] for r in rounds)
    tokens = sum(r["tokens"] for r in rounds)
    elapsed = sum(r["cycle_ms"] * r["steps"] for r in rounds) / 1e3
    return rounds[0] | {
        "steps": steps,
        "tokens": tokens,
        "accept_len": tokens / steps,
        "tokens_per_s": tokens / elapsed,
        "cycle_ms": elapsed / steps * 1e3,
        "round_cycle_ms": [r["cycle_ms"] for r in rounds],
        "cycle_ms_each": [c for r in rounds for c in r["cycle_ms_each"]],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ks = [int(x) for x in str(args.num_draft).split(",") if x.strip()]
    models = Models(args, max(ks))
    rounds: dict[int, list[dict]] = {k: [] for k in ks}
    for _ in range(max(args.rounds, 1)):
        for k in ks:
            rounds[k].append(measure(args, models, k, profile=len(ks) == 1))
    runs = [merged(rounds[k]) for k in ks]
    result = {
        "program": "hf_chain",
        "alpha": args.alpha,
        "graph_impl": GRAPH_IMPL[0] if args.mode == "graph" else None,
        "runs": runs,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        **{key: runs[-1][key] for key in ("accept_len", "tokens_per_s", "cycle_ms", "mode")},
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
