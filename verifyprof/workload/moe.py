"""Mixture-of-experts SwiGLU layer: softmax top-k routing and a grouped expert GEMM.

Tokens are sorted by expert and each expert multiplies only its own rows, so a forward reads
the weights of the experts its tokens touch (the expert union D(n) of REFERENCE 6.6), as the
fused MoE kernels of serving engines do. Two implementations of the grouped GEMM:

* ``grouped_mm``: ``torch._grouped_mm`` with the per-expert offsets on the device; no host
  sync, so it can be captured in a CUDA graph (CUTLASS grouped GEMM on sm90 in bf16).
* ``loop``: one ``mm`` per touched expert, with the counts read back to the host (a sync per
  layer); eager only, and the reference the grouped path is checked against.

``auto`` picks ``grouped_mm`` when it exists and matches ``loop`` on a tiny input on this device
and dtype, else ``loop``. Experts are TP-sharded along their intermediate dimension (each rank
reads 1/TP of every touched expert), followed by one allreduce.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verifyprof.workload.config import ModelConfig
from verifyprof.workload.tp import TP
from verifyprof.workload.weights import param

IMPLS = ("auto", "grouped_mm", "loop")


def grouped_loop(x: torch.Tensor, weights: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``x`` rows sorted by expert, ``counts[e]`` rows each: ``x[rows of e] @ weights[e]``."""
    out = x.new_empty((x.shape[0], weights.shape[-1]))
    begin = 0
    for expert, n in enumerate(counts.tolist()):
        if n:
            torch.mm(x[begin : begin + n], weights[expert], out=out[begin : begin + n])
            begin += n
    return out


def grouped_mm(x: torch.Tensor, weights: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    offsets = counts.cumsum(0, dtype=torch.int32)
    return torch._grouped_mm(x, weights, offs=offsets)


def resolve_impl(impl: str, device: torch.device, dtype: torch.dtype) -> str:
    """The implementation ``auto`` stands for here (see the module docstring)."""
    if impl not in IMPLS:
        raise ValueError(f"unknown moe implementation {impl!r} ({', '.join(IMPLS)})")
    if impl != "auto":
        return impl
    if not hasattr(torch, "_grouped_mm"):
        return "loop"
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(24, 64, generator=gen, device=device).to(dtype)
    w = torch.randn(4, 64, 32, generator=gen, device=device).to(dtype)
    counts = torch.tensor([5, 0, 11, 8], device=device)
    try:
        ok = torch.allclose(
            grouped_mm(x, w, counts).float(),
            grouped_loop(x, w, counts).float(),
            rtol=2e-2,
            atol=2e-2,
        )
    except Exception:
        return "loop"
    return "grouped_mm" if ok else "loop"


class MoE(torch.nn.Module):
    def __init__(
        self,
        cfg: ModelConfig,
        layer: int,
        tp: TP,
        device: torch.device,
        dtype: torch.dtype,
        impl: str = "auto",
    ):
        super().__init__()
        self.tp, self.experts, self.topk = tp, cfg.moe_experts, cfg.moe_topk
        self.impl = resolve_impl(impl, device, dtype)
        self._matmul = grouped_mm if self.impl == "grouped_mm" else grouped_loop
        h, f, e = cfg.hidden, cfg.moe_intermediate, cfg.moe_experts
        name = f"layers.{layer}.moe"
        self.w_router = param(f"{name}.router", (e, h), h**-0.5, seed=cfg.seed, device=device).to(
            dtype
        )
        # [E, in, out] row-major, the layout torch._grouped_mm takes as its second operand
        gate = tp.shard(param(f"{name}.gate", (e, h, f), h**-0.5, seed=cfg.seed, device=device), 2)
        up = tp.shard(param(f"{name}.up", (e, h, f), h**-0.5, seed=cfg.seed, device=device), 2)
        self.w_gate_up = torch.cat((gate, up), dim=2).to(dtype).contiguous()
        down = param(f"{name}.down", (e, f, h), f**-0.5, seed=cfg.seed, device=device)
        self.w_down = tp.shard(down, 1).to(dtype).contiguous()

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k experts per token and their renormalised softmax gates, ``[N, k]`` each."""
        probs = torch.softmax(F.linear(x, self.w_router).float(), dim=-1)
        gates, experts = probs.topk(self.topk, dim=-1)
        return experts, (gates / gates.sum(-1, keepdim=True)).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        experts, gates = self.route(x)
        flat = experts.reshape(-1)
        order = flat.argsort(stable=True)  # (token, slot) pairs grouped by expert
        counts = torch.zeros(self.experts, dtype=torch.int64, device=x.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat))
        rows = x[order // self.topk]
        gate, up = self._matmul(rows, self.w_gate_up, counts).chunk(2, dim=-1)
        out_sorted = self._matmul(F.silu(gate) * up, self.w_down, counts)
        out = torch.empty_like(out_sorted)
        out[order] = out_sorted  # back to (token, slot) order: a permutation, deterministic
        out = (out.view(-1, self.topk, shape[-1]) * gates[..., None]).sum(dim=1)
        return self.tp.all_reduce(out.view(shape))
