"""The MoE GEMM over tokens per forward, fitted to the captures (issue 42): the experts it reads.

A grouped expert GEMM reads only the experts that received tokens. n tokens routing top-K of E
experts independently touch D(n) = E(1 - (1 - K/E)^n) of them per layer (REFERENCE 6.6; MoESD
uses it). Real routing is correlated and skewed: co-batched tokens pick overlapping experts, some
experts are rarely picked, so fewer are touched (Cohere, as a secondary summary reports it: up to
31% fewer). The form used here scales the experts independent routing would add past the first
token's K:

    D_rho(n) = K + rho (D(n) - K),  rho in (0, 1]

``rho`` is the share of independent routing's extra experts that the program's routing touches: 1
is independent routing (the roofline's union), 0.69 is Cohere's "31% fewer" once D(n) >> K. One
token touches K experts whatever rho. The phase's time is taken as proportional to the experts
touched (memory-bound: each touched expert's weights read once), so two captures' MoE GEMM times
at two token counts (batch x verify width) give the ratio D_rho(n2) / D_rho(n1), which rises with
rho: one rho, in closed form. What in the phase does not grow with the experts read (a fixed
tail) lowers the fitted rho too: it is an *effective* share, exact at the captured token counts.

A form that counts correlated tokens as fewer independent ones, E(1 - (1 - K/E)^(1 + (n-1) rho)),
was tried first: where the larger token count nears saturation (5 and 40 tokens of 64 experts,
top-4) its ratio first rises, then falls with rho, so two captures fit two rho alike (0.14 and
0.90 for a true 0.90). The share form has one. Its limit: it keeps the share at every load, where
real routing fills every expert at a large enough batch; past the captured tokens the bands grow.

Where the captures cannot pin rho (one token count; a union that is the same at both, saturated
or one expert; a growth past the form's range), the union is independent routing with a wider
band, and the words say why.

Published anchors (tests/test_expert_union.py; not fitted data):

* vllm-mlx #763: a Qwen3-30B-A3B verify (E = 128, K = 8) takes 8.47 ms at width 1 and 28.13 ms at
  width 8: 3.32x, where independent routing reads 6.45x the experts. Taken as all MoE, rho = 0.43;
  the verify's fixed parts make the MoE share grow more, so 0.43 is a lower bound on rho there.
* ik_llama.cpp #1630: a 2-token forward of GLM-4.5-Air (E = 128, K = 8) costs 3.05x a 1-token
  one. No union reaches it (2 tokens read at most 1.94x one token's experts): the 1-token forward
  runs another kernel path (a matrix-vector product), so the growth is not the experts read. The
  fit says so and keeps independent routing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RHO_MIN = 0.02
# the ratio of the extreme captured token counts must move by more than this over rho's range
# for the captures to tell rho (a union saturated, or one expert, at both cannot)
PIN_SENSITIVITY = 0.05
# a measured ratio this far past what rho in [RHO_MIN, 1] reaches is not the union's growth
OUT_OF_RANGE = 0.03
# the extra band of a union the captures could not pin: independent routing is a pessimistic
# bound (up to 31% more experts than correlated routing, Cohere; at least as far as the form's
# fitted rho was from 1 on vllm-mlx #763's numbers)
UNPINNED_BAND = 0.15


def touched(tokens: float, experts: int, top_k: int, rho: float = 1.0) -> float:
    """Expected distinct experts per MoE layer that ``tokens`` tokens touch (``rho``: the share
    of independent routing's experts past the first token's). Below one token, proportional."""
    if tokens <= 1.0:
        return top_k * max(tokens, 0.0)
    independent = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    return top_k + rho * (independent - top_k)


@dataclass(frozen=True)
class UnionFit:
    """The experts a forward of n tokens touches, fitted to the MoE GEMM's measured times."""

    experts: int
    top_k: int
    rho: float  # 1.0 where not pinned (independent routing)
    pinned: bool
    points: tuple[tuple[float, float], ...]  # measured (tokens per forward, MoE GEMM ms)
    why: str = ""  # where not pinned: why, in words

    def touched(self, tokens: float) -> float:
        return touched(tokens, self.experts, self.top_k, self.rho)

    def independent(self, tokens: float) -> float:
        return touched(tokens, self.experts, self.top_k, 1.0)

    def scale(self, tokens_from: float, tokens_to: float) -> float:
        """The MoE GEMM at ``tokens_to`` over its time at ``tokens_from``."""
        a = self.touched(tokens_from)
        return self.touched(tokens_to) / a if a > 0 else 1.0

    @property
    def band(self) -> float:
        """The extra relative band of what rests on this union (0 where the captures pinned it)."""
        return 0.0 if self.pinned else UNPINNED_BAND

    def growth_words(self) -> str:
        """The MoE GEMM's measured growth per token between the captured token counts."""
        pts = sorted(self.points)
        shown = ", ".join(f"{ms:.3f} ms at {n:g}" for n, ms in pts)
        steps = [
            f"{(b[1] - a[1]) / (b[0] - a[0]) * 1e3:.1f} us a token from {a[0]:g} to {b[0]:g}"
            for a, b in zip(pts, pts[1:])
        ]
        return f"MoE expert GEMM measured {shown} tokens per forward" + (
            f" ({'; '.join(steps)})" if steps else ""
        )

    def union_words(self, tokens: float) -> str:
        """The fitted union beside the independent one at ``tokens`` tokens per forward."""
        head = f"experts touched per layer at {tokens:g} tokens (E={self.experts}, K={self.top_k}):"
        if self.pinned:
            return (
                f"{head} {self.touched(tokens):.1f} fitted (rho {self.rho:.2f}) vs"
                f" {self.independent(tokens):.1f} independent"
            )
        return f"{head} {self.independent(tokens):.1f} independent (rho not pinned: {self.why})"

    def words(self, used: bool = True) -> list[str]:
        """What the curves rest on: the fitted union (``used``), else the model file's
        independent union at the one captured token count (roofline, as before)."""
        top = max(n for n, _ in self.points)
        if not used:
            return [
                self.growth_words(),
                "MoE expert GEMM over tokens per forward: the model file's union, independent"
                f" routing (roofline; one token count captured): {self.independent(top):.1f}"
                f" experts touched per layer at {top:g} tokens; a capture at another batch fits"
                " the routing's own",
            ]
        form = (
            "the MoE GEMM over tokens per forward follows the experts it reads, D_rho(n) ="
            " K + rho (E(1-(1-K/E)^n) - K): "
            + (
                f"rho {self.rho:.2f} fitted to the captures' MoE GEMM times (correlated routing"
                " touches fewer experts than independent routing; docs/GLOSSARY.md)"
                if self.pinned
                else "independent routing (rho 1), a pessimistic bound, band"
                f" +/-{UNPINNED_BAND:.0%} wider"
            )
        )
        return [form, self.growth_words(), self.union_words(top)]

    def to_json(self) -> dict:
        top = max(n for n, _ in self.points)
        return {
            "experts": self.experts,
            "top_k": self.top_k,
            "rho": round(self.rho, 4),
            "pinned": self.pinned,
            "why": self.why,
            "points": [{"tokens": n, "moe_ms": ms} for n, ms in sorted(self.points)],
            "touched_at_top": {
                "tokens": top,
                "fitted": round(self.touched(top), 3),
                "independent": round(self.independent(top), 3),
            },
        }


def _log_misfit(rhos: np.ndarray, ns: np.ndarray, log_ms: np.ndarray, e: int, k: int):
    """Per rho, the squared misfit of ``log ms = log c + log D_rho(n)`` (c at its best)."""
    d = np.array([[touched(float(n), e, k, float(r)) for n in ns] for r in rhos])
    resid = log_ms[None, :] - np.log(d)
    resid -= resid.mean(axis=1, keepdims=True)
    return (resid**2).sum(axis=1)


def fit_union(experts: int, top_k: int, points: list[tuple[float, float]]) -> UnionFit:
    """rho from the MoE GEMM's measured times at their token counts; independent routing where
    they cannot pin it. Two token counts: the rho whose union grows as the measured times do
    (closed form); three or more: least squares in log time over a grid of rho, the scale free."""
    pts = tuple(sorted((float(n), float(ms)) for n, ms in points if n > 0 and ms > 0))
    counts = sorted({n for n, _ in pts})

    def independent(why: str) -> UnionFit:
        return UnionFit(experts, top_k, 1.0, False, pts, why)

    if len(counts) < 2:
        return independent("one token count captured; a capture at another batch measures it")
    lo, hi = counts[0], counts[-1]
    span_min = touched(hi, experts, top_k, RHO_MIN) / touched(lo, experts, top_k, RHO_MIN)
    span_max = touched(hi, experts, top_k) / touched(lo, experts, top_k)
    if span_max / span_min - 1.0 < PIN_SENSITIVITY:
        return independent(
            f"the union is the same at {lo:g} and {hi:g} tokens whatever the routing (saturated"
            " or one expert at both)"
        )
    mean = {n: float(np.mean([ms for m, ms in pts if m == n])) for n in counts}
    ratio = mean[hi] / mean[lo]
    if ratio > span_max * (1.0 + OUT_OF_RANGE) or ratio < span_min * (1.0 - OUT_OF_RANGE):
        return independent(
            f"the MoE GEMM grew {ratio:.2f}x from {lo:g} to {hi:g} tokens, where the union reads"
            f" {span_min:.2f}x to {span_max:.2f}x the experts: its growth is not the experts"
            " read (another kernel path, or work per token)"
        )
    if len(counts) == 2:
        d_lo, d_hi = (touched(n, experts, top_k) - top_k for n in (lo, hi))
        rho = top_k * (ratio - 1.0) / max(d_hi - ratio * d_lo, 1e-12)
        return UnionFit(experts, top_k, min(max(rho, RHO_MIN), 1.0), True, pts)
    rhos = np.linspace(RHO_MIN, 1.0, 981)
    ns, log_ms = np.array([n for n, _ in pts]), np.log([ms for _, ms in pts])
    best = float(rhos[int(np.argmin(_log_misfit(rhos, ns, log_ms, experts, top_k)))])
    return UnionFit(experts, top_k, best, True, pts)
