"""Deterministic random weights: the same tensor for the same (seed, name) on every rank and run."""

from __future__ import annotations

import zlib

import torch


def param(
    name: str, shape: tuple[int, ...], std: float, *, seed: int, device: torch.device
) -> torch.Tensor:
    """A full fp32 parameter drawn from its own generator, so shards sliced from it agree across
    ranks and a TP=N model computes the same function as the TP=1 model of the same seed."""
    gen = torch.Generator(device=device)
    gen.manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63))
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std
