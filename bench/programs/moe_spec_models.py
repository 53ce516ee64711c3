"""The networks of :mod:`moe_spec` (random weights, plain PyTorch): a fine-grained MoE target and
a small dense drafter, their static KV caches (one per row count) and each forward at a fixed
(rows, width) replayed as a ``torch.cuda.CUDAGraph``.

The target's MoE layer: a router (softmax, top-k of E, renormalised) over E routed experts plus
one shared expert. The routed experts run as ONE grouped GEMM over the tokens sorted by expert
(``torch._grouped_mm`` with cumulative offsets), so only the experts that received tokens are
read: the cost of a forward follows the distinct experts its tokens touch. A torch without
``torch._grouped_mm`` (before 2.8) is refused at start: no other path reads each touched expert
once per forward without a host sync (which a CUDA graph cannot hold).

Routing is not uniform: the router's logits are a token term (a random router over the normed
hidden state, unit scale), plus a per-layer expert popularity bias (N(0, ``route_pop``²)), plus a
per-sequence topic bias (N(0, ``route_topic``²) per row and layer, fixed): tokens of one sequence
prefer the same experts, as real routing does. At the default 0.5 / 0.8 a numpy simulation of
top-6 of 64 gives 18 distinct experts for 5 tokens of one sequence where independent routing
gives 25 (27% fewer: the "up to 31% fewer" reported for real routing), 31 for one token of each
of 8 sequences (35 independent), 61 of 64 at 64 sequences. ``routing_stats`` measures it.
"""

from __future__ import annotations

import gc
import math
import sys

import torch
import torch.nn.functional as F

GROUPED = "torch._grouped_mm"


def rope(pos: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=pos.device, dtype=torch.float32) / dim))
    freqs = pos.float()[:, None] * inv[None]
    return freqs.cos(), freqs.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x.float().chunk(2, -1)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1).to(x.dtype)


class Net(torch.nn.Module):
    """A pre-norm decoder: GQA attention over a static cache, then a dense MLP (the drafter) or
    the MoE (the target). ``forward(ids, pos, cache, topic)`` -> the next token at each position
    (argmax inside the forward, so a graph replay returns token ids)."""

    def __init__(self, cfg: dict, moe: bool, device: str, dtype: torch.dtype):
        super().__init__()
        self.cfg, self.moe = cfg, moe
        h, heads, kvh = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
        self.hd = h // heads
        self.layers = cfg["layers"]
        f = {"device": device, "dtype": dtype}

        def w(*shape: int, scale: float = 1.0) -> torch.nn.Parameter:
            t = torch.empty(*shape, **f).normal_(0.0, scale / math.sqrt(shape[-1]))
            return torch.nn.Parameter(t, requires_grad=False)

        out_scale = 1.0 / math.sqrt(2 * self.layers)
        L = self.layers
        self.embed = w(cfg["vocab"], h, scale=math.sqrt(h))
        self.head = w(cfg["vocab"], h)
        self.qkv = torch.nn.ParameterList(w((heads + 2 * kvh) * self.hd, h) for _ in range(L))
        self.o = torch.nn.ParameterList(w(h, heads * self.hd, scale=out_scale) for _ in range(L))
        if moe:
            e, ei, si = cfg["experts"], cfg["expert_inter"], cfg["shared_inter"]
            self.router = torch.nn.ParameterList(w(e, h) for _ in range(L))
            gen = torch.Generator(device="cpu").manual_seed(cfg.get("seed", 0) + 7)
            pop = torch.randn(L, e, generator=gen) * cfg["route_pop"]
            self.register_buffer("pop", pop.to(device), persistent=False)
            # (E, N, K) stored, used as (E, K, N): the column-major B of torch's own tests
            self.w13 = torch.nn.ParameterList(w(e, 2 * ei, h) for _ in range(L))
            self.w2 = torch.nn.ParameterList(w(e, h, ei, scale=out_scale) for _ in range(L))
            inter = si
        else:
            inter = cfg["inter"]
        self.up = torch.nn.ParameterList(w(2 * inter, h) for _ in range(L))
        self.down = torch.nn.ParameterList(w(h, inter, scale=out_scale) for _ in range(L))

    def attention(self, i: int, x: torch.Tensor, rot, cache, pos, mask) -> torch.Tensor:
        b, n, _ = x.shape
        heads, kvh, hd = self.cfg["heads"], self.cfg["kv_heads"], self.hd
        qkv = F.linear(x, self.qkv[i]).view(b, n, heads + 2 * kvh, hd).transpose(1, 2)
        q, k, v = qkv.split((heads, kvh, kvh), 1)
        q, k = rotate(q, *rot), rotate(k, *rot)
        kc, vc = cache[i]
        kc.index_copy_(2, pos, k)
        vc.index_copy_(2, pos, v)
        g = heads // kvh  # grouped query heads as extra query rows: the cache is read once
        q = q.reshape(b, kvh, g * n, hd)
        out = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
        out = out.view(b, heads, n, hd).transpose(1, 2).reshape(b, n, heads * hd)
        return F.linear(out, self.o[i])

    def mlp(self, i: int, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(x, self.up[i]).chunk(2, -1)
        return F.linear(F.silu(gate) * up, self.down[i])

    def experts(self, i: int, x: torch.Tensor, topic: torch.Tensor, stats: list | None):
        """Routed experts: top-k, tokens sorted by expert, one grouped GEMM up, one down."""
        e, k = self.cfg["experts"], self.cfg["top_k"]
        logits = F.linear(x, self.router[i]).float() + self.pop[i] + topic
        weight, idx = logits.softmax(-1).topk(k, -1)
        weight = weight / weight.sum(-1, keepdim=True)
        flat = idx.flatten()
        if stats is not None:
            stats.append(int(flat.unique().numel()))
        order = flat.argsort(stable=True)
        counts = torch.zeros(e, dtype=torch.int32, device=x.device)
        counts.index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = counts.cumsum(0, dtype=torch.int32)
        src = order // k
        hid = torch._grouped_mm(x[src], self.w13[i].transpose(-2, -1), offs=offs)
        gate, up = hid.chunk(2, -1)
        y = torch._grouped_mm(F.silu(gate) * up, self.w2[i].transpose(-2, -1), offs=offs)
        y = y * weight.flatten()[order, None].to(y.dtype)
        return torch.zeros_like(x).index_add_(0, src, y)

    def forward(self, ids, pos, cache, topic=None, stats: list | None = None) -> torch.Tensor:
        b, n = ids.shape
        x = F.embedding(ids, self.embed)
        rot = rope(pos, self.hd)
        size = cache[0][0].shape[2]
        g = self.cfg["heads"] // self.cfg["kv_heads"]
        seen = torch.arange(size, device=ids.device)[None, :] <= pos[:, None]  # (n, cache)
        mask = seen.repeat(g, 1)[None, None]  # rows of (group, position), as q's
        for i in range(self.layers):
            x = x + self.attention(i, F.rms_norm(x, (x.shape[-1],)), rot, cache, pos, mask)
            y = F.rms_norm(x, (x.shape[-1],))
            out = self.mlp(i, y)
            if self.moe:
                rows = topic[i][:, None].expand(-1, n, -1).reshape(b * n, -1)  # no host sync
                flat = y.reshape(b * n, -1)
                out = out + self.experts(i, flat, rows, stats).view(b, n, -1)
            x = x + out
        return F.linear(F.rms_norm(x, (x.shape[-1],)), self.head).argmax(-1)


class Forward:
    """One forward at a fixed (rows, width) over static input buffers; on CUDA a graph."""

    def __init__(self, net: Net, cache, topic, rows: int, width: int, device: str):
        self.net, self.cache, self.topic = net, cache, topic
        self.ids = torch.zeros((rows, width), dtype=torch.long, device=device)
        self.pos = torch.arange(width, dtype=torch.long, device=device)
        self.graph, self.out, self.failed = None, None, None
        if device.startswith("cuda"):
            try:
                self._capture()
            except RuntimeError as err:  # said in the results' forwards, never silent
                self.graph, self.failed = None, str(err).splitlines()[0][:200]

    def _capture(self) -> None:
        """Two eager calls on a side stream, then the forward recorded once."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self.net(self.ids, self.pos, self.cache, self.topic)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.net(self.ids, self.pos, self.cache, self.topic)

    def __call__(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.ids.copy_(ids)
        self.pos.copy_(pos)
        if self.graph is not None:
            self.graph.replay()
            return self.out
        return self.net(self.ids, self.pos, self.cache, self.topic)


class Models:
    """Target and drafter, a static cache of each per row count, each forward made once per
    (net, rows, width) and reused by every draft length that needs it."""

    def __init__(self, args, max_len: int):
        self.args, self.dev = args, args.device
        self.max_len = -(-max_len // 64) * 64  # the attention mask's rows aligned
        dtype = torch.bfloat16 if self.dev.startswith("cuda") else torch.float32
        self.dtype = dtype
        torch.manual_seed(args.seed)
        with torch.no_grad():
            self.target = Net(args.target_cfg, True, self.dev, dtype)
            self.draft = Net(args.draft_cfg, False, self.dev, dtype)
        self.caches: dict[tuple[str, int], list] = {}
        self.topics: dict[int, torch.Tensor] = {}
        self.forwards: dict[tuple[str, int, int], Forward] = {}
        self.prefills: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.made: list[dict] = []

    def net(self, which: str) -> Net:
        return self.target if which == "target" else self.draft

    def cache(self, which: str, rows: int) -> list:
        key = (which, rows)
        if key not in self.caches:
            cfg = self.net(which).cfg
            shape = (rows, cfg["kv_heads"], self.max_len, cfg["hidden"] // cfg["heads"])
            self.caches[key] = [
                (
                    torch.zeros(shape, dtype=self.dtype, device=self.dev),
                    torch.zeros(shape, dtype=self.dtype, device=self.dev),
                )
                for _ in range(cfg["layers"])
            ]
        return self.caches[key]

    def topic(self, rows: int) -> torch.Tensor:
        """Each row's fixed per-layer topic bias over the experts (layers, rows, E)."""
        if rows not in self.topics:
            cfg = self.args.target_cfg
            gen = torch.Generator(device="cpu").manual_seed(self.args.seed * 1000 + rows)
            t = torch.randn(cfg["layers"], rows, cfg["experts"], generator=gen)
            self.topics[rows] = (t * cfg["route_topic"]).to(self.dev)
        return self.topics[rows]

    def forward(self, which: str, rows: int, width: int) -> Forward:
        key = (which, rows, width)
        if key not in self.forwards:
            topic = self.topic(rows) if which == "target" else None
            with torch.no_grad():
                fw = Forward(self.net(which), self.cache(which, rows), topic, rows, width, self.dev)
            self.forwards[key] = fw
            how = "cuda-graph" if fw.graph is not None else "eager"
            if fw.failed:
                how = f"eager (CUDA graph capture failed: {fw.failed})"
            self.made.append({"model": which, "rows": rows, "width": width, "mode": how})
            print(f"moe_spec: forward {which} rows={rows} width={width}: {how}", file=sys.stderr)
        return self.forwards[key]

    def prefilled(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Random prompt tokens through both nets into ``rows``' caches, once (chunks of at most
        4096 tokens); the prompt's last token and the target's next one."""
        if rows not in self.prefills:
            length = self.args.prompt_len
            ctx = torch.randint(0, self.args.target_cfg["vocab"], (rows, length), device=self.dev)
            chunk = max(4096 // rows, 1)
            with torch.no_grad():
                for lo in range(0, length, chunk):
                    hi = min(lo + chunk, length)
                    pos = torch.arange(lo, hi, device=self.dev)
                    nxt = self.target(
                        ctx[:, lo:hi], pos, self.cache("target", rows), self.topic(rows)
                    )
                    self.draft(ctx[:, lo:hi], pos, self.cache("draft", rows))
            self.prefills[rows] = (ctx[:, -1:].clone(), nxt[:, -1:].clone())
        return self.prefills[rows]

    def routing_stats(self, rows: int, widths: list[int]) -> dict[str, float]:
        """Mean distinct experts per MoE layer for one eager forward of ``rows`` x width tokens
        at the prompt's end (never committed: overwritten later), against independent routing."""
        cfg, out = self.args.target_cfg, {}
        e, k = cfg["experts"], cfg["top_k"]
        self.prefilled(rows)
        gen = torch.Generator(device="cpu").manual_seed(self.args.seed + 11)
        for width in widths:
            stats: list[int] = []
            pos = torch.arange(width, device=self.dev) + self.args.prompt_len
            ids = torch.randint(0, cfg["vocab"], (rows, width), generator=gen).to(self.dev)
            with torch.no_grad():
                self.target(ids, pos, self.cache("target", rows), self.topic(rows), stats)
            n = rows * width
            out[str(width)] = {"tokens": n, "distinct": sum(stats) / len(stats),
                               "independent": e * (1 - (1 - k / e) ** n)}  # fmt: skip
        return out

    def release(self, rows: int) -> None:
        """Free ``rows``' caches, graphs and prefill before the next row count."""
        self.prefills.pop(rows, None)
        self.topics.pop(rows, None)
        for key in [key for key in self.forwards if key[1] == rows]:
            del self.forwards[key]
        for key in [key for key in self.caches if key[1] == rows]:
            del self.caches[key]
        gc.collect()
        if self.dev.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
