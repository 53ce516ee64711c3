"""The models of :mod:`hf_chain`: transformers' Llama target and drafter (random weights), their
static KV caches (one per batch size) and each forward at a fixed (width, batch) in its execution
mode: eager, a ``torch.cuda.CUDAGraph`` replay, or ``torch.compile``.

Which forwards replay graphs (``Models.graphed``):

* ``graph``: every forward (plain decode, draft, verify, the width sweep);
* ``seed``: the seed team's configuration: plain decoding (the target at width 1) and every
  drafter forward as graphs, the verify (the target at width k+1, and the width sweep) eager;
* ``eager`` / ``compile``: none (compile: each forward under ``torch.compile``).

Every forward made is printed (``hf_chain: forward ...``) and listed in the results' ``forwards``,
so the choice can be checked on a CPU, where no graph is captured.
"""

from __future__ import annotations

import gc
import math
import sys
import time

import torch

GRAPH_IMPL = ["torch.cuda.CUDAGraph"]
PREFILL_TOKENS = 8192  # tokens (batch x width) per prefill forward: batch 64 x 2048 in chunks


def build(args, hidden: int, layers: int, inter: int, max_len: int):
    """A random-weight Llama built directly on the device in its dtype (bf16 on CUDA): a 7B
    model initialised on the CPU and moved costs about a minute per process."""
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
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(args.device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(before)
    model = model.to(device=args.device, dtype=dtype).eval()
    return model, cfg, StaticCache


def at(cache, pos: torch.Tensor) -> None:
    """Write the next keys at ``pos``: newer transformers place them at the cache's own running
    length (ignoring ``cache_position``), so that length is set on the device, in the graph too
    (rejected drafts' entries are then overwritten, as a server's rollback does)."""
    for layer in getattr(cache, "layers", ()):
        length = getattr(layer, "cumulative_length", None)
        if isinstance(length, torch.Tensor) and length.device == pos.device:
            length.copy_(pos[0].reshape(length.shape))


def run_model(model, cache, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """One forward over ``ids`` (batch, width) at positions ``pos`` (width,): every row in
    lockstep at the same positions."""
    at(cache, pos)
    out = model(
        input_ids=ids,
        position_ids=pos[None].expand(ids.shape[0], -1),
        cache_position=pos,
        past_key_values=cache,
        use_cache=True,
    )
    return out.logits


class Forward:
    """One model forward at a fixed (batch, width) over static input buffers, in ``mode``."""

    def __init__(self, model, cache, width: int, batch: int, mode: str, device: str):
        self.model, self.cache, self.mode = model, cache, mode
        self.ids = torch.zeros((batch, width), dtype=torch.long, device=device)
        self.pos = torch.arange(width, dtype=torch.long, device=device)
        self.graph = None
        self.out = None
        self.fn = self._forward
        if mode == "compile":
            self.fn = torch.compile(self._forward, mode="reduce-overhead", fullgraph=True)

    def _forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return run_model(self.model, self.cache, ids, pos)

    def capture(self) -> None:
        """Record the forward once (after eager warm-up calls on a side stream); if
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
    """The target and the drafter, a static cache of each per batch size, and each forward once
    per (model, width, batch, graphed): a captured forward is reused by every k that needs it."""

    def __init__(self, args, max_k: int):
        self.args = args
        widest = max([max_k + 1, *getattr(args, "sweep", [])])
        self.max_len = args.context + (args.steps + args.warmup) * (max_k + 1) + widest + 8
        started = time.perf_counter()
        torch.manual_seed(args.seed)
        self.target, self.tcfg, self.cache_cls = build(
            args, args.hidden, args.layers, args.intermediate, self.max_len
        )
        self.draft, self.dcfg, _ = build(
            args, args.draft_hidden, args.draft_layers, args.draft_hidden * 3, self.max_len
        )
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.init_s = time.perf_counter() - started
        print(f"hf_chain: init {self.init_s:.1f} s (weights built on {args.device})", flush=True)
        self.caches: dict[tuple[str, int], object] = {}
        self.forwards: dict[tuple[str, int, int, bool], Forward] = {}
        self.prefills: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.made: list[dict] = []

    def model(self, which: str):
        return self.target if which == "target" else self.draft

    def cache(self, which: str, batch: int):
        """The static cache of ``which`` for ``batch`` rows (transformers 5 sizes a StaticCache
        on first use, so its first forward has the batch's rows: max_batch_size = batch), filled
        before any capture or compile."""
        key = (which, batch)
        if key not in self.caches:
            cfg = self.tcfg if which == "target" else self.dcfg
            cache = self.cache_cls(config=cfg, max_cache_len=self.max_len)
            ids = torch.zeros((batch, 8), dtype=torch.long, device=self.args.device)
            pos = torch.arange(8, device=self.args.device)
            with torch.no_grad():
                run_model(self.model(which), cache, ids, pos)
            if self.args.mode == "compile":
                for layer in getattr(cache, "layers", ()):
                    length = getattr(layer, "cumulative_length", None)
                    if isinstance(length, torch.Tensor):
                        torch._dynamo.mark_static_address(length)
            self.caches[key] = cache
        return self.caches[key]

    def graphed(self, which: str, role: str) -> bool:
        """Does this forward replay a CUDA graph? ``role``: decode (plain decoding's target at
        width 1), verify (the target over k+1 tokens, and the width sweep), draft."""
        mode = self.args.mode
        if mode == "graph":
            return True
        if mode == "seed":
            return which == "draft" or role == "decode"
        return False

    def forward(self, which: str, width: int, batch: int, role: str) -> Forward:
        graphed = self.graphed(which, role)
        key = (which, width, batch, graphed)
        if key not in self.forwards:
            cache = self.cache(which, batch)
            mode = "compile" if self.args.mode == "compile" else "graph" if graphed else "eager"
            fw = Forward(self.model(which), cache, width, batch, mode, self.args.device)
            if graphed and self.args.device.startswith("cuda"):
                fw.capture()
            self.forwards[key] = fw
            made = {"model": which, "width": width, "batch": batch, "role": role}
            made["mode"] = mode
            self.made.append(made)
            print(
                f"hf_chain: forward {which} width={width} batch={batch} ({role}): {mode}",
                file=sys.stderr,
                flush=True,
            )
        return self.forwards[key]

    def prefilled(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Random context tokens through both models into ``batch``'s caches, once (in chunks of
        at most ``PREFILL_TOKENS`` tokens: one forward at batch 1, a 7B's activations at batch
        64 x 2048 would not fit beside its cache); the last context token and the target's next
        token."""
        if batch not in self.prefills:
            dev, length = self.args.device, self.args.context
            ctx = torch.randint(0, self.args.vocab, (batch, length), device=dev)
            chunk = max(PREFILL_TOKENS // batch, 1)
            with torch.no_grad():
                for lo in range(0, length, chunk):
                    hi = min(lo + chunk, length)
                    pos = torch.arange(lo, hi, device=dev)
                    logits = run_model(self.target, self.cache("target", batch), ctx[:, lo:hi], pos)
                    run_model(self.draft, self.cache("draft", batch), ctx[:, lo:hi], pos)
                    last = logits[:, -1:].argmax(-1)
                    del logits
            self.prefills[batch] = (ctx[:, -1:].clone(), last)
        return self.prefills[batch]

    def release(self, batch: int) -> None:
        """Free ``batch``'s static caches, graphs and prefill (a 7B MHA cache at batch 64 and
        context 2048 is ~70 GiB: two batches' would not fit on an H200)."""
        self.prefills.pop(batch, None)
        for key in [key for key in self.forwards if key[2] == batch]:
            del self.forwards[key]
        for key in [key for key in self.caches if key[1] == batch]:
            del self.caches[key]
        gc.collect()
        if self.args.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        print(f"hf_chain: released batch={batch}", file=sys.stderr, flush=True)
