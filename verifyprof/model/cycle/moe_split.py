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
"""

from __future__ import annotations

from dataclasses import replace

from verifyprof.model.cycle.expert_union import UnionFit
from verifyprof.model.cycle.phase_fit import Point
from verifyprof.model.cycle.width_fit import WidthFit, fit_widths

MOE = "gemm_moe"


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
