"""A small decoder LM in plain torch with a static KV cache, shaped like a serving engine's.

Every forward takes ``tokens [B, T]`` and ``start [B]`` (tokens already in the cache per
sequence) as device tensors, writes the new keys/values at ``start .. start+T-1`` and attends
causally over the whole static cache through a mask. No Python value depends on the data, so
the same forward runs eager, as a multi-token verify, or captured in a CUDA graph and replayed
with new contents in the same buffers.

Weights are random but deterministic: each parameter is drawn whole from its own generator
seeded by (model seed, parameter name), then this rank's shard is sliced out, so a TP=2 model
computes the same function as the TP=1 model with the same seed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verifyprof.workload.config import ModelConfig
from verifyprof.workload.moe import MoE
from verifyprof.workload.tp import TP
from verifyprof.workload.weights import param


def _sdpa_has_gqa() -> bool:
    """``enable_gqa`` exists from torch 2.5; without it the KV heads are repeated."""
    q = torch.zeros(1, 2, 1, 4)
    try:
        F.scaled_dot_product_attention(q, q[:, :1], q[:, :1], enable_gqa=True)
        return True
    except TypeError:  # pragma: no cover - torch < 2.5
        return False


_SDPA_GQA = _sdpa_has_gqa()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, GPT-NeoX half-split form; ``cos``/``sin`` are ``[B, T, 1, D/2]``."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Attention(torch.nn.Module):
    def __init__(
        self, cfg: ModelConfig, layer: int, tp: TP, device: torch.device, dtype: torch.dtype
    ):
        super().__init__()
        self.tp = tp
        self.heads = cfg.heads // tp.world
        self.kv_heads = cfg.kv_heads // tp.world
        self.head_dim = cfg.head_dim
        d, h = cfg.head_dim, cfg.hidden
        std = h**-0.5

        def full(part: str, rows: int) -> torch.Tensor:
            return param(
                f"layers.{layer}.attn.{part}", (rows, h), std, seed=cfg.seed, device=device
            )

        q = tp.shard(full("q", cfg.heads * d), 0)
        k = tp.shard(full("k", cfg.kv_heads * d), 0)
        v = tp.shard(full("v", cfg.kv_heads * d), 0)
        self.w_qkv = torch.cat((q, k, v)).to(dtype)  # column-parallel, fused
        o = param(
            f"layers.{layer}.attn.o",
            (h, cfg.heads * d),
            (cfg.heads * d) ** -0.5,
            seed=cfg.seed,
            device=device,
        )
        self.w_o = tp.shard(o, 1).to(dtype)  # row-parallel: partial sums, then allreduce
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def allocate(self, batch: int, max_len: int) -> None:
        shape = (batch, self.kv_heads, max_len, self.head_dim)
        self.k_cache = torch.zeros(shape, dtype=self.w_qkv.dtype, device=self.w_qkv.device)
        self.v_cache = torch.zeros_like(self.k_cache)

    def forward(self, x: torch.Tensor, ctx: dict[str, torch.Tensor]) -> torch.Tensor:
        b, t, _ = x.shape
        qkv = F.linear(x, self.w_qkv)
        q, k, v = qkv.split(
            [
                self.heads * self.head_dim,
                self.kv_heads * self.head_dim,
                self.kv_heads * self.head_dim,
            ],
            dim=-1,
        )
        q = rotate(q.view(b, t, self.heads, self.head_dim), ctx["cos"], ctx["sin"])
        k = rotate(k.view(b, t, self.kv_heads, self.head_dim), ctx["cos"], ctx["sin"])
        v = v.view(b, t, self.kv_heads, self.head_dim)
        # Scatter the new keys/values into the static cache at each sequence's positions.
        self.k_cache[ctx["batch_index"], :, ctx["positions"]] = k
        self.v_cache[ctx["batch_index"], :, ctx["positions"]] = v
        keys, values = self.k_cache, self.v_cache
        kwargs = {}
        if self.kv_heads != self.heads:
            if _SDPA_GQA:
                kwargs["enable_gqa"] = True
            else:  # pragma: no cover - torch < 2.5
                rep = self.heads // self.kv_heads
                keys, values = keys.repeat_interleave(rep, 1), values.repeat_interleave(rep, 1)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), keys, values, attn_mask=ctx["mask"], **kwargs
        )
        out = F.linear(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim), self.w_o)
        return self.tp.all_reduce(out)


class MLP(torch.nn.Module):
    """Dense SwiGLU: column-parallel fused gate/up, row-parallel down, one allreduce."""

    def __init__(
        self, cfg: ModelConfig, layer: int, tp: TP, device: torch.device, dtype: torch.dtype
    ):
        super().__init__()
        self.tp = tp
        h, f = cfg.hidden, cfg.intermediate
        gate = tp.shard(
            param(f"layers.{layer}.mlp.gate", (f, h), h**-0.5, seed=cfg.seed, device=device), 0
        )
        up = tp.shard(
            param(f"layers.{layer}.mlp.up", (f, h), h**-0.5, seed=cfg.seed, device=device), 0
        )
        self.w_gate_up = torch.cat((gate, up)).to(dtype)
        down = param(f"layers.{layer}.mlp.down", (h, f), f**-0.5, seed=cfg.seed, device=device)
        self.w_down = tp.shard(down, 1).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = F.linear(x, self.w_gate_up).chunk(2, dim=-1)
        return self.tp.all_reduce(F.linear(F.silu(gate) * up, self.w_down))


class Layer(torch.nn.Module):
    def __init__(
        self,
        cfg: ModelConfig,
        layer: int,
        tp: TP,
        device: torch.device,
        dtype: torch.dtype,
        moe_impl: str,
    ):
        super().__init__()
        self.eps = cfg.norm_eps
        self.norm_attn = torch.ones(cfg.hidden, device=device, dtype=dtype)
        self.norm_mlp = torch.ones(cfg.hidden, device=device, dtype=dtype)
        self.attn = Attention(cfg, layer, tp, device, dtype)
        self.mlp = (
            MoE(cfg, layer, tp, device, dtype, moe_impl)
            if cfg.moe_experts
            else MLP(cfg, layer, tp, device, dtype)
        )

    def forward(self, x: torch.Tensor, ctx: dict[str, torch.Tensor]) -> torch.Tensor:
        x = x + self.attn(rms_norm(x, self.norm_attn, self.eps), ctx)
        return x + self.mlp(rms_norm(x, self.norm_mlp, self.eps))


class DecoderLM(torch.nn.Module):
    """Embedding, ``layers`` x (attention + MLP/MoE), final norm, vocab-parallel lm_head."""

    def __init__(
        self,
        cfg: ModelConfig,
        *,
        device: torch.device,
        dtype: torch.dtype,
        tp: TP | None = None,
        moe_impl: str = "auto",
    ):
        super().__init__()
        tp = tp or TP()
        cfg.validate(tp.world)
        self.cfg, self.tp, self.device, self.dtype = cfg, tp, device, dtype
        self.embed = param("embed", (cfg.vocab, cfg.hidden), 1.0, seed=cfg.seed, device=device).to(
            dtype
        )
        self.layers = torch.nn.ModuleList(
            Layer(cfg, i, tp, device, dtype, moe_impl) for i in range(cfg.layers)
        )
        self.norm = torch.ones(cfg.hidden, device=device, dtype=dtype)
        head = param(
            "lm_head", (cfg.vocab, cfg.hidden), cfg.hidden**-0.5, seed=cfg.seed, device=device
        )
        self.lm_head = tp.shard(head, 0).to(dtype)
        self.max_len = 0

    @property
    def moe_impl(self) -> str | None:
        return self.layers[0].mlp.impl if self.cfg.moe_experts else None

    def allocate(self, batch: int, max_len: int) -> None:
        """Static KV cache and rotary tables for ``batch`` sequences of up to ``max_len`` tokens."""
        self.batch, self.max_len = batch, max_len
        for layer in self.layers:
            layer.attn.allocate(batch, max_len)
        half = self.cfg.head_dim // 2
        inv_freq = 1.0 / (
            self.cfg.rope_theta
            ** (torch.arange(half, device=self.device, dtype=torch.float32) / half)
        )
        angles = (
            torch.arange(max_len, device=self.device, dtype=torch.float32)[:, None]
            * inv_freq[None, :]
        )
        self.cos_table, self.sin_table = angles.cos().to(self.dtype), angles.sin().to(self.dtype)
        self.key_positions = torch.arange(max_len, device=self.device)
        self.batch_index = torch.arange(batch, device=self.device)[:, None]

    def forward(
        self, tokens: torch.Tensor, start: torch.Tensor, logits: str = "all"
    ) -> torch.Tensor:
        """Logits ``[B, T, V]`` (``logits="all"``), of the last token ``[B, 1, V]`` (``"last"``),
        or the final hidden states (``"none"``: a KV-cache-only pass such as draft-extend)."""
        t = tokens.shape[1]
        positions = start[:, None] + self.key_positions[:t][None, :]
        ctx = {
            "positions": positions,
            "batch_index": self.batch_index,
            "cos": self.cos_table[positions][:, :, None, :],
            "sin": self.sin_table[positions][:, :, None, :],
            # query at position p sees keys 0..p of its own sequence: causal within the new block
            "mask": (self.key_positions[None, None, :] <= positions[:, :, None])[:, None],
        }
        x = F.embedding(tokens, self.embed)
        for layer in self.layers:
            x = layer(x, ctx)
        if logits == "none":
            return x
        if logits == "last":
            x = x[:, -1:]
        x = rms_norm(x, self.norm, self.cfg.norm_eps)
        return self.tp.all_gather_last(F.linear(x, self.lm_head))
