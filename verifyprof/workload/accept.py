"""Simulated acceptance, like SGLang's ``SGLANG_SIMULATE_ACC_LEN``: a fixed mean accept length.

The accept length counts the bonus token (SGLang's ``spec_accept_length``), so with k drafts it
is 1 + a for a in 0..k accepted drafts. Draws come from a golden-ratio (Weyl) sequence offset by
the seed instead of a PRNG: deterministic, identical for eager and graph runs of the same seed,
and the running mean converges to the target within a few tens of steps.

Methods:

* ``geometric``: every draft position is accepted with the same probability alpha given the
  previous one was (Leviathan et al.'s i.i.d. model, REFERENCE 6.2), alpha solved so that
  ``sum_{i=0..k} alpha^i`` equals the requested length; the survival curve is ``alpha^i``.
* ``fixed``: the integer part of ``accept_len - 1`` always, one more draft with the fractional
  part as probability (TensorRT-LLM's ``FORCE_NUM_ACCEPTED_TOKENS``).
"""

from __future__ import annotations

import math

import torch

METHODS = ("geometric", "fixed")
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def solve_alpha(accept_len: float, num_draft: int) -> float:
    """The per-position acceptance rate whose expected accept length over k drafts is
    ``accept_len``."""
    target = accept_len
    if target <= 1.0:
        return 0.0
    if target >= num_draft + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(num_draft + 1)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def uniforms(count: int, seed: int) -> torch.Tensor:
    """``count`` low-discrepancy draws in [0, 1), in float64, shifted by the seed."""
    offset = (seed * math.sqrt(2.0)) % 1.0
    return torch.remainder(offset + _GOLDEN * torch.arange(1, count + 1, dtype=torch.float64), 1.0)


def accepted_drafts(
    accept_len: float,
    num_draft: int,
    steps: int,
    batch: int,
    *,
    seed: int = 0,
    method: str = "geometric",
) -> torch.Tensor:
    """Accepted draft counts (0..k, bonus token not counted), ``[steps, batch]`` int64 on the
    CPU."""
    if method not in METHODS:
        raise ValueError(f"unknown acceptance method {method!r} ({', '.join(METHODS)})")
    if not 1.0 <= accept_len <= num_draft + 1:
        raise ValueError(f"accept length {accept_len} outside [1, {num_draft + 1}]")
    u = uniforms(steps * batch, seed).view(steps, batch)
    if method == "fixed":
        extra = accept_len - 1.0
        whole = math.floor(extra)
        counts = whole + (u < extra - whole).to(torch.int64)
        return counts.clamp(max=num_draft)
    alpha = solve_alpha(accept_len, num_draft)
    survival = torch.tensor([alpha**i for i in range(1, num_draft + 1)], dtype=torch.float64)
    return (u[..., None] < survival).sum(-1).to(torch.int64)


def survival_curve(accept_len: float, num_draft: int, method: str = "geometric") -> list[float]:
    """P(draft i is accepted) for i = 1..k under the method's model (for the summary)."""
    if method == "fixed":
        extra = accept_len - 1.0
        return [1.0 if i <= extra else max(0.0, extra - (i - 1)) for i in range(1, num_draft + 1)]
    alpha = solve_alpha(accept_len, num_draft)
    return [alpha**i for i in range(1, num_draft + 1)]
