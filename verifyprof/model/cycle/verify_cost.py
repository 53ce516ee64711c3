"""Verify cost vs width: the MoE expert union D(n) and t(n) scaled from one measured verify.

Verify at small width is memory-bound: weights are read once whatever the number of tokens, so
dense GEMMs cost about the same at width 2 or 8 until n x batch nears the ridge point (peak
FLOPs / bandwidth). MoE breaks that: n tokens touch D(n) = E(1 - (1 - k/E)^n) distinct experts
per layer (REFERENCE 6.6; ``model_config.expert_union``), and each touched expert's weights are
read.

``t(n)`` starts from a *measured* verify (the breakdown's phases at width n0; Sequoia: t(n) is
measured, we extrapolate only where the trace has no other width). A GEMM or attention phase is
``floor + overhead``: its roofline floor (bytes / bandwidth or FLOPs / peak) plus what the kernels
measurably lose to it (launch latency, tails, partial waves), which depends on the kernels, not
on the width. So with hardware known the phase moves by the change of its floor, and the
overhead measured at n0 carries over. (A first version scaled the whole phase by the floor's
ratio; on the H200 MoE workload that overpredicted t(16) by 22%, because the grouped GEMM's
fixed cost does not grow with the expert union.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verifyprof.model.cycle.expert_union import UnionFit
    from verifyprof.model.inputs.hardware import Hardware
    from verifyprof.model.inputs.model_config import ModelConfig


@dataclass(frozen=True)
class Roofline:
    bytes: float
    flops: float

    def seconds(self, bandwidth_bps: float, flops_per_s: float) -> float:
        return max(self.bytes / bandwidth_bps, self.flops / flops_per_s)


@dataclass
class WidthScaling:
    """Per-phase time at width n from the measured width n0: ``t * factor + delta_ms``, with
    reasons."""

    factors: dict[str, float]
    notes: list[str] = field(default_factory=list)
    deltas_ms: dict[str, float] = field(default_factory=dict)

    def apply(self, phases_ms: dict[str, float]) -> dict[str, float]:
        return {
            p: max(t * self.factors.get(p, 1.0) + self.deltas_ms.get(p, 0.0), 0.0)
            for p, t in phases_ms.items()
        }


def phase_rooflines(
    model: ModelConfig, tokens: float, tp: int = 1, context: float = 0.0
) -> dict[str, Roofline]:
    """Bytes and FLOPs per phase of one forward over ``tokens`` tokens (batch x width), per GPU."""
    act = model.activation_bytes_per_token() * tokens
    return {
        "gemm_dense": Roofline(model.dense_bytes(tp) + act, model.dense_flops(tokens, tp)),
        "gemm_moe": Roofline(model.routed_bytes(tokens, tp) + act, model.routed_flops(tokens, tp)),
        "attention": Roofline(
            model.kv_bytes_per_token(tp) * context + act, model.attention_flops(tokens, context, tp)
        ),
    }


def width_scaling(
    tokens_from: float,
    tokens_to: float,
    model: ModelConfig | None,
    hardware: Hardware | None,
    tp: int = 1,
    context: float = 0.0,
    allreduce_us: callable | None = None,
    union: UnionFit | None = None,
) -> WidthScaling:
    """How each phase's time changes from ``tokens_from`` to ``tokens_to`` tokens per forward.

    Without a model config every phase is assumed width-independent (memory-bound, same kernels);
    with one, GEMM and attention phases scale by their roofline ratio (needs hardware for the
    FLOPs side; bytes-only otherwise) and allreduce by the latency model's ratio. With ``union``
    (the experts touched, fitted to the captures' MoE GEMM times) the MoE GEMM scales by its
    ratio instead of the roofline's.
    """
    factors: dict[str, float] = {}
    deltas: dict[str, float] = {}
    notes: list[str] = []
    if model is None:
        notes.append(
            "no model config: every phase taken as width-independent (memory-bound verify, same"
            " kernels)"
        )
    else:
        a = phase_rooflines(model, tokens_from, tp, context)
        b = phase_rooflines(model, tokens_to, tp, context)
        if hardware is not None:
            bw = hardware.bandwidth_tbps * 1e12
            peak = {
                "gemm_dense": model.dense_dtype,
                "gemm_moe": model.expert_dtype,
                "attention": model.kv_dtype,
            }
            for phase in a:
                flops = hardware.peak_tflops(peak[phase]) * 1e12
                ta, tb = a[phase].seconds(bw, flops), b[phase].seconds(bw, flops)
                deltas[phase] = (tb - ta) * 1e3
            notes.append(
                "GEMM/attention phases move by the change of their roofline floor (bytes /"
                f" {hardware.bandwidth_tbps:g} TB/s or FLOPs / peak on {hardware.name}); what they"
                " lose to the floor at the measured width carries over"
            )
        else:
            for phase in a:
                factors[phase] = b[phase].bytes / a[phase].bytes if a[phase].bytes > 0 else 1.0
            notes.append(
                "no hardware given: GEMM/attention phases scaled by bytes read only (memory-bound)"
            )
        if model.moe is not None and union is not None:
            factors["gemm_moe"] = union.scale(tokens_from, tokens_to)
            deltas.pop("gemm_moe", None)
            notes.append(_union_note(union, tokens_from, tokens_to))
        elif model.moe is not None:
            notes.append(
                f"MoE expert union D(n) = E(1-(1-k/E)^n), E={model.moe.experts},"
                f" k={model.moe.top_k}: D({tokens_from:g})={model.expert_union(tokens_from):.1f} ->"
                f" D({tokens_to:g})={model.expert_union(tokens_to):.1f} (uniform independent"
                " routing: a pessimistic bound)"
            )
        if context == 0 and ("attention" in factors or "attention" in deltas):
            factors.pop("attention", None)
            deltas.pop("attention", None)
            notes.append("attention taken as width-independent (no --context given)")
        if allreduce_us is not None:
            hidden_bytes = model.activation_bytes_per_token()
            t0, t1 = (
                allreduce_us(tokens_from * hidden_bytes),
                allreduce_us(tokens_to * hidden_bytes),
            )
            if t0 > 0:
                factors["allreduce"] = t1 / t0
    notes.append(
        "norms, elementwise, sampling, spec kernels, copies, launch gaps and host waits unchanged"
        " (same kernel count)"
    )
    return WidthScaling(factors, notes, deltas)


def _union_note(union: UnionFit, tokens_from: float, tokens_to: float) -> str:
    """The MoE GEMM's move by the union fitted to the captures, beside independent routing's."""
    a, b = union.touched(tokens_from), union.touched(tokens_to)
    return f"MoE expert GEMM x{b / a:.2f}: experts touched {a:.1f} -> {b:.1f} per layer" + (
        f" (rho {union.rho:.2f} fitted to the captures; independent routing"
        f" {union.independent(tokens_from):.1f} -> {union.independent(tokens_to):.1f})"
        if union.pinned
        else f" (independent routing: rho not pinned, {union.why})"
    )
