"""A step's MoE expert GEMM apart from the rest of it (issue 42): the rest moves as its own
measurements say, the MoE GEMM by the experts its tokens touch (:mod:`expert_union`).

Two measured populations do not route as the cycle's verify does:

* **a width sweep** of one token repeated across the width (a program's sweep feeds its newest
  token ``width`` times): its tokens pick the same experts, so its MoE GEMM stays at one token's
  experts whatever the width (moe_spec's sweep: 1.6 ms at width 1 to 7 where the cycle's width-5
  verify reads 3.7 ms). Its other phases grow with the width as the verify's do. So the width
  model takes the sweep less its own measured MoE GEMM, and the MoE GEMM from the union.
* **plain decoding's steps** (a traced decode or ``capture --decode-cmd``'s rate): one token per
  request, so b requests touch D(b) experts, which saturates once every expert is read. A line
  through two batches' steps would extrapolate the MoE GEMM's growth linearly (at batch 64, 3x
  the measured step where every expert was already read by batch 32). So the line goes through
  the steps less the union's MoE GEMM, and the union's is added back at the batch.

The MoE's routing kernels (``moe_aux``: top-k gating, the sort of the token-expert pairs, scans)
do not move with the requests or their KV cache either: their work is the tokens per forward
times K, and their time goes by steps where a kernel switches at a size (moe_spec's sort: 8.7 us
a layer up to 128 pairs, 26.8 us past it, so 0.5 ms more per forward from 22 tokens on). A line
through two captures spreads that step over every load between them; every forward that measured
the routing (the captures' verifies and their width sweeps, whose repeated token sorts as many
pairs as any) says where it is: :func:`routing_curve`.
"""

from __future__ import annotations

from dataclasses import replace

from verifyprof.model.cycle.expert_union import UnionFit
from verifyprof.model.cycle.phase_fit import Point
from verifyprof.model.cycle.width_fit import WidthFit, fit_widths

MOE = "gemm_moe"
ROUTING = "moe_aux"


def sweep_rest(
    widths: dict[int, float],
    moe: dict[int, float],
    own_moe_ms: float,
    u: UnionFit,
    batch: int,
    w0: int,
) -> dict[int, float]:
    """A width sweep's times less its MoE GEMM: the sweep's own where it measured it (``moe``),
    else the union's at its tokens, moved from the verify's own (``own_moe_ms`` at ``batch`` x
    its width ``w0``)."""
    return {
        w: t - moe.get(w, own_moe_ms * u.scale(batch * w0, batch * w)) for w, t in widths.items()
    }


def width_change(
    widths: dict[int, float],
    moe: dict[int, float],
    own_moe_ms: float,
    u: UnionFit,
    batch: int,
    w0: int,
    w: int,
) -> tuple[float, float, WidthFit | None]:
    """From the verify's own width ``w0`` to ``w``: the rest's change (the sweep less its MoE
    GEMM, the bounded monotone fit) and the MoE GEMM's (the union at the tokens, from the
    verify's own; at width 1 the sweep's own, which repeats no token), and the rest's fit (None:
    fewer than two widths, the rest kept)."""
    fit = fit_widths(sweep_rest(widths, moe, own_moe_ms, u, batch, w0))
    rest = fit.at(w)[0] - fit.at(w0)[0] if fit is not None else 0.0
    if w == 1 and 1 in moe:  # one token a request repeats nothing: its routing is the cycle's
        return rest, moe[1] - own_moe_ms, fit
    return rest, own_moe_ms * (u.scale(batch * w0, batch * w) - 1.0), fit


def plain_less_moe(points: list[Point], u: UnionFit) -> list[Point]:
    """Plain decoding's measured steps less the union's MoE GEMM at their tokens (one a
    request): what is left grows with the requests and their KV cache."""
    return [
        replace(p, phases_ms={"step": p.phases_ms["step"] - u.ms_at(p.batch * p.width)})
        for p in points
    ]


def routing_curve(
    points: list[Point], sweeps: list[tuple[Point, dict[int, float]]]
) -> WidthFit | None:
    """The MoE routing kernels' time over tokens per forward, from every forward that measured
    them: the captures' verifies (``points``) and their width sweeps (``(the capture's step,
    {width: routing ms}``), pooled by tokens (batch x width) in one monotone fit, not bounded by
    proportional growth (a kernel's switch steps past it); None where fewer than two token counts
    measured it."""
    pooled: dict[int, list[float]] = {}
    for p in points:
        if p.phases_ms.get(ROUTING, 0.0) > 0:
            pooled.setdefault(int(p.tokens), []).append(p.phases_ms[ROUTING])
    for ref, routing in sweeps:
        for w, ms in routing.items():
            pooled.setdefault(ref.batch * w, []).append(ms)
    means = {n: sum(ms) / len(ms) for n, ms in pooled.items()}
    return fit_widths(means, {n: len(ms) for n, ms in pooled.items()}, proportional=False)
