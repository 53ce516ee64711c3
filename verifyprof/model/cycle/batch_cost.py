"""The verify's (and a decode step's) cost over batch and context: the roofline of one forward of
``batch`` requests, ``width`` tokens each, over ``context`` tokens of KV each, and where it crosses
the hardware's ridge point.

A decode-time forward reads every weight once whatever the number of tokens, so its GEMMs cost
about the same at batch 1 and 8 until batch x width nears the ridge point (peak FLOPs / bandwidth,
in FLOPs per byte); past it they grow with the tokens. Attention is different: every request reads
its own KV cache, so its bytes grow with batch x context whatever the width, and its FLOPs with
batch x width x context. So a speculative verify (width k+1) crosses the ridge k+1 times sooner
than plain decoding (width 1), which is where speculation stops paying.

As in :mod:`verifyprof.model.cycle.verify_cost`, a measured phase moves by the change of its
roofline floor; what the kernels lose to the floor at the measured shape carries over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from verifyprof.model.cycle.verify_cost import Roofline

if TYPE_CHECKING:
    from verifyprof.model.inputs.hardware import Hardware
    from verifyprof.model.inputs.model_config import ModelConfig

SCALED = ("gemm_dense", "gemm_moe", "attention")


@dataclass(frozen=True)
class Shape:
    """One forward: ``batch`` requests of ``width`` tokens each over ``context`` KV tokens."""

    batch: int
    width: int
    context: float

    @property
    def tokens(self) -> int:
        return self.batch * self.width


def rooflines(model: ModelConfig, shape: Shape, tp: int = 1) -> dict[str, Roofline]:
    """Bytes and FLOPs per phase of one forward of ``shape``, per GPU."""
    t = shape.tokens
    act = model.activation_bytes_per_token() * t
    return {
        "gemm_dense": Roofline(model.dense_bytes(tp) + act, model.dense_flops(t, tp)),
        "gemm_moe": Roofline(model.routed_bytes(t, tp) + act, model.routed_flops(t, tp)),
        "attention": Roofline(
            model.kv_bytes_per_token(tp) * shape.context * shape.batch + act,
            model.attention_flops(t, shape.context, tp),
        ),
    }


def _peaks(model: ModelConfig, hw: Hardware) -> dict[str, float]:
    return {
        "gemm_dense": hw.peak_tflops(model.dense_dtype) * 1e12,
        "gemm_moe": hw.peak_tflops(model.expert_dtype) * 1e12,
        "attention": hw.peak_tflops(model.kv_dtype) * 1e12,
    }


def floors_ms(model: ModelConfig, hw: Hardware, shape: Shape, tp: int = 1) -> dict[str, float]:
    """Each phase's roofline floor (ms): bytes / bandwidth or FLOPs / peak, the larger."""
    bw, peaks = hw.bandwidth_tbps * 1e12, _peaks(model, hw)
    return {p: r.seconds(bw, peaks[p]) * 1e3 for p, r in rooflines(model, shape, tp).items()}


def deltas_ms(
    model: ModelConfig, hw: Hardware, frm: Shape, to: Shape, tp: int = 1
) -> dict[str, float]:
    """How much each GEMM / attention phase moves from ``frm`` to ``to`` (ms): the change of its
    floor."""
    a, b = floors_ms(model, hw, frm, tp), floors_ms(model, hw, to, tp)
    return {p: b[p] - a[p] for p in SCALED}


def ridge_flops_per_byte(model: ModelConfig, hw: Hardware) -> float:
    """The hardware's ridge point for the dense GEMMs' dtype: peak FLOPs / bandwidth."""
    return hw.peak_tflops(model.dense_dtype) / hw.bandwidth_tbps  # TFLOP/s over TB/s


def intensity(model: ModelConfig, shape: Shape, tp: int = 1) -> float:
    """FLOPs per byte of the forward's GEMMs (dense and routed) at ``shape``."""
    r = rooflines(model, shape, tp)
    flops = r["gemm_dense"].flops + r["gemm_moe"].flops
    nbytes = r["gemm_dense"].bytes + r["gemm_moe"].bytes
    return flops / nbytes if nbytes > 0 else 0.0


def compute_bound(model: ModelConfig, hw: Hardware, shape: Shape, tp: int = 1) -> bool:
    """Whether the forward's GEMMs at ``shape`` are past the ridge point (compute-bound)."""
    return intensity(model, shape, tp) >= ridge_flops_per_byte(model, hw)


def ridge_tokens(model: ModelConfig, hw: Hardware, tp: int = 1, limit: int = 1 << 16) -> int | None:
    """The fewest tokens per forward (batch x width) at which the GEMMs reach the ridge point;
    None when none up to ``limit`` does (intensity is non-decreasing in tokens: bisection)."""
    if not compute_bound(model, hw, Shape(limit, 1, 0.0), tp):
        return None
    lo, hi = 0, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(model, hw, Shape(mid, 1, 0.0), tp) else (mid, hi)
    return hi


def kv_fits(model: ModelConfig, memory_gb: float, batch: int, context: float, tp: int = 1) -> bool:
    """Whether the weights and ``batch`` requests' KV cache at ``context`` fit in 90% of the GPU's
    memory (per GPU under tensor parallelism)."""
    experts = model.moe.experts if model.moe else 0
    routed = (
        model.moe_layers * experts * model.expert_params * 2.0 / tp if model.moe is not None else 0
    )
    weights = model.dense_bytes(tp) + routed
    kv = model.kv_bytes_per_token(tp) * context * batch
    return weights + kv <= 0.9 * memory_gb * 1e9
