"""Allreduce cost at inference message sizes: alpha-beta ring, NCCL's tuning model, measured tables.

Verify moves ``tokens x hidden x 2 B`` per allreduce (56 KB for 4 tokens of a 7168-wide model),
far below a megabyte, so the cost is latency: a fixed per-call time that barely grows with size.
Where a measured table exists for the topology it wins; otherwise NCCL's own tuning model
(``NVIDIA/nccl src/graph/tuning.cc``, ~2.19+) predicts the NCCL time, and the custom one-shot
kernel is modelled as two barriers plus each rank reading its peers (REFERENCE 6.7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from verifyprof.contracts.bounds import check_count, check_nonnegative, check_positive
from verifyprof.contracts.errors import VerifyprofError

# NCCL tuning.cc: base latency (us) per algorithm and protocol.
NCCL_BASE_LAT_US: dict[str, dict[str, float]] = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 0.0},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
}
# Per-hop hardware latency (us) by algorithm, link kind and protocol.
NCCL_HW_LAT_US: dict[str, dict[str, dict[str, float]]] = {
    "ring": {
        "nvlink": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
        "pcie": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
        "net": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
    },
    "tree": {
        "nvlink": {"LL": 0.6, "LL128": 1.25, "Simple": 28.0},
        "pcie": {"LL": 1.0, "LL128": 1.9, "Simple": 28.0},
        "net": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
    },
}
# Protocol bus-bandwidth factors: LL spends half of each 8-byte line on flags and NCCL caps Ring LL
# at busBw/4 for allreduce; LL128 keeps 120 of 128 bytes.
NCCL_PROTO_BW_FACTOR = {"LL": 0.25, "LL128": 120.0 / 128.0, "Simple": 1.0}


def allreduce_bytes(tokens: int, hidden: int, dtype_bytes: float = 2.0) -> int:
    """Bytes one tensor-parallel allreduce moves: the activations of every token in the step."""
    check_count("tokens", tokens, minimum=1)
    check_count("hidden size", hidden, minimum=1)
    return int(tokens * hidden * dtype_bytes)


def ring_alpha_beta_us(nbytes: float, nranks: int, alpha_us: float, bw_gbps: float) -> float:
    """T_ring(S, n) = 2(n-1) alpha + 2(n-1)/n S/B; B in GB/s (1 GB/s = 1000 bytes/us)."""
    check_count("ranks", nranks, minimum=1)
    if nranks == 1:
        return 0.0
    check_positive("link bandwidth (GB/s)", bw_gbps)
    return 2 * (nranks - 1) * alpha_us + 2 * (nranks - 1) / nranks * nbytes / (1e3 * bw_gbps)


def nccl_latency_us(algo: str, proto: str, link_kind: str, nranks: int, nnodes: int = 1) -> float:
    """NCCL's modelled fixed cost of one allreduce: Ring baseLat + 2(n-1) hwLat; Tree per
    tuning.cc."""
    check_count("ranks", nranks, minimum=1)
    try:
        base = NCCL_BASE_LAT_US[algo][proto]
        hw = NCCL_HW_LAT_US[algo][link_kind][proto]
    except KeyError:
        raise VerifyprofError(
            f"NCCL model: unknown algorithm/link/protocol {algo}/{link_kind}/{proto}"
        ) from None
    if algo == "ring":
        return base + 2 * (nranks - 1) * hw
    per_node = nranks // max(nnodes, 1)
    inter = NCCL_HW_LAT_US["tree"]["net"][proto]
    return base + 2 * ((per_node - 1) * hw + math.log2(max(nnodes, 1)) * inter)


@dataclass(frozen=True)
class NcclChoice:
    us: float
    algo: str
    proto: str


def nccl_allreduce_us(
    nbytes: float, nranks: int, link_kind: str, busbw_gbps: float, nnodes: int = 1
) -> NcclChoice:
    """NCCL's tuning-model time, ``latency + bytes / (1000 algBw)``, minimised over algorithm and
    protocol.

    Ring only within one node (NCCL rarely picks Tree there); LL128 only over NVLink, where NCCL
    enables it by default. ``busbw_gbps`` is the link's large-message NCCL bus bandwidth.
    """
    check_nonnegative("message size", nbytes)
    check_count("ranks", nranks, minimum=1)
    if nranks == 1:
        return NcclChoice(0.0, "none", "none")
    check_positive("NCCL bus bandwidth (GB/s)", busbw_gbps)
    algos = ("ring",) if nnodes <= 1 else ("ring", "tree")
    protos = ("LL", "LL128", "Simple") if link_kind == "nvlink" else ("LL", "Simple")
    best: NcclChoice | None = None
    for algo in algos:
        for proto in protos:
            busbw = busbw_gbps * NCCL_PROTO_BW_FACTOR[proto]
            algbw = busbw * nranks / (2 * (nranks - 1))
            us = nccl_latency_us(algo, proto, link_kind, nranks, nnodes) + nbytes / (1e3 * algbw)
            if best is None or us < best.us:
                best = NcclChoice(us, algo, proto)
    assert best is not None
    return best


def oneshot_us(nbytes: float, nranks: int, barrier_us: float, peer_read_gbps: float) -> float:
    """Custom one-shot: two barriers, then every rank reads all n-1 peers' buffers and reduces."""
    if nranks == 1:
        return 0.0
    return 2 * barrier_us + (nranks - 1) * nbytes / (1e3 * peer_read_gbps)


def twoshot_us(nbytes: float, nranks: int, barrier_us: float, bw_gbps: float) -> float:
    """Custom two-shot: reduce-scatter, barrier, all-gather."""
    if nranks == 1:
        return 0.0
    return 3 * barrier_us + 2 * (nranks - 1) / nranks * nbytes / (1e3 * bw_gbps)


@dataclass(frozen=True)
class MeasuredTable:
    """Measured allreduce latency vs message size for one topology and implementation."""

    impl: str  # "nccl" | "custom" (one-shot/two-shot as the kernel chose) | a named kernel
    gpus: int
    sizes: tuple[int, ...]  # bytes, ascending
    us: tuple[float, ...]
    source: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.us) or not self.sizes:
            raise VerifyprofError(
                f"allreduce table {self.impl} x{self.gpus}: sizes and us must be equal-length,"
                " non-empty"
            )
        if list(self.sizes) != sorted(self.sizes):
            raise VerifyprofError(f"allreduce table {self.impl} x{self.gpus}: sizes must ascend")

    def at(self, nbytes: float) -> float:
        """Linear in log(size) between measured sizes; flat below; linear in size above the last."""
        sizes = np.asarray(self.sizes, dtype=float)
        us = np.asarray(self.us, dtype=float)
        if nbytes <= sizes[0]:
            return float(us[0])
        if nbytes >= sizes[-1]:
            if len(sizes) == 1:
                return float(us[-1])
            slope = max((us[-1] - us[-2]) / (sizes[-1] - sizes[-2]), 0.0)
            return float(us[-1] + slope * (nbytes - sizes[-1]))
        return float(np.interp(np.log(nbytes), np.log(sizes), us))

    def covers(self, nbytes: float) -> bool:
        return self.sizes[0] <= nbytes <= self.sizes[-1]
