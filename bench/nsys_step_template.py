"""One speculative step of the synthetic nsys export (``gen_nsys_export.py``), as a template of host
ops: the kernel keys of each phase (``draft`` / ``verify`` / ``accept`` / ``draft_extend``; a
verify forward of dense and MoE layers, NCCL allreduce where there are several ranks), and the
step as parallel arrays of launches, runtime calls that launch nothing, the accept copy and the
final sync, its verify launched eagerly or replayed as one CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from nsys_export_catalog import (
    DRIVER_LAUNCHED,
    GRAPH_LAUNCH,
    KERNELS,
    LAUNCH_EX,
    LAUNCH_KERNEL,
    MEMCPY_ASYNC,
    NOISE_APIS,
    STREAM_SYNC,
)

from verifyprof.contracts import ranges

# op kinds in a step template
OP_KERNEL, OP_GRAPH_LAUNCH, OP_NOISE, OP_MEMCPY, OP_SYNC = range(5)
PHASES = (ranges.DRAFT, ranges.VERIFY, ranges.ACCEPT, ranges.DRAFT_EXTEND)


def layer(ranks: int, moe: bool) -> list[str]:
    ops = ["add_rmsnorm", "qkv_gemm", "rope", "fa3", "o_gemm"]
    if ranks > 1:
        ops.append("allreduce")
    ops.append("add_rmsnorm")
    ops += (
        ["moe_gate", "moe_align", "fused_moe", "act_mul", "fused_moe", "moe_sum"]
        if moe
        else ["qkv_gemm", "act_mul", "o_gemm"]
    )
    if ranks > 1:
        ops.append("allreduce")
    return ops


def step_phases(ranks: int, layers: int, draft_tokens: int) -> dict[str, list[str]]:
    """Kernel keys per phase of one speculative step."""
    draft_layer = [
        "rmsnorm",
        "qkv_gemm",
        "rope",
        "fi_decode",
        "o_gemm",
        "add_rmsnorm",
        "qkv_gemm",
        "act_mul",
        "o_gemm",
    ]
    draft = []
    for _ in range(draft_tokens - 1):
        draft += draft_layer + ["lm_head", "argmax", "index"]
    draft += ["build_tree"]
    verify = ["index", "add"]
    for i in range(layers):
        verify += layer(ranks, moe=i % 2 == 1)
    verify += ["rmsnorm", "lm_head"]
    accept = ["argmax", "verify_tree", "add", "index"]
    draft_extend = ["assign_cache"] + draft_layer + ["fi_prefill", "lm_head", "argmax"]
    return {
        ranges.DRAFT: draft,
        ranges.VERIFY: verify,
        ranges.ACCEPT: accept,
        ranges.DRAFT_EXTEND: draft_extend,
    }


@dataclass
class Template:
    """One step as parallel arrays of host ops (launches, noise, copies, the final sync)."""

    kind: np.ndarray  # OP_*
    kernel: np.ndarray  # index into KERNEL_KEYS for OP_KERNEL rows inside graphs too, -1 otherwise
    api: np.ndarray  # index into API_NAMES, -1 for graph-node kernels (no runtime row of their own)
    phase: np.ndarray  # index into PHASES
    in_graph: np.ndarray  # bool: kernel replayed by the phase's cudaGraphLaunch
    node: np.ndarray  # graph node index within the graph, -1 otherwise


KERNEL_KEYS = list(KERNELS)
API_NAMES = [LAUNCH_KERNEL, LAUNCH_EX, GRAPH_LAUNCH, MEMCPY_ASYNC, STREAM_SYNC, *NOISE_APIS]


def build_template(phases: dict[str, list[str]], verify_graph: bool) -> Template:
    rows: list[tuple[int, int, int, int, bool, int]] = []
    noise_i = 0
    for p, phase in enumerate(PHASES):
        keys = phases[phase]
        if phase == ranges.ACCEPT:
            rows.append(
                (OP_MEMCPY, -1, API_NAMES.index(MEMCPY_ASYNC), p, False, -1)
            )  # accept lengths -> host
        if phase == ranges.VERIFY and verify_graph:
            rows.append((OP_NOISE, -1, API_NAMES.index(NOISE_APIS[1]), p, False, -1))
            rows.append((OP_GRAPH_LAUNCH, -1, API_NAMES.index(GRAPH_LAUNCH), p, False, -1))
            for node, key in enumerate(keys):
                rows.append((OP_KERNEL, KERNEL_KEYS.index(key), -1, p, True, node))
            continue
        for j, key in enumerate(keys):
            if j % 3 == 0:  # PyTorch asks "am I capturing?" before many launches
                rows.append(
                    (
                        OP_NOISE,
                        -1,
                        API_NAMES.index(NOISE_APIS[noise_i % len(NOISE_APIS)]),
                        p,
                        False,
                        -1,
                    )
                )
                noise_i += 1
            api = LAUNCH_EX if key in DRIVER_LAUNCHED else LAUNCH_KERNEL
            rows.append((OP_KERNEL, KERNEL_KEYS.index(key), API_NAMES.index(api), p, False, -1))
    rows.append(
        (OP_SYNC, -1, API_NAMES.index(STREAM_SYNC), -1, False, -1)
    )  # ends the step, in no phase
    cols = list(zip(*rows))
    return Template(
        kind=np.array(cols[0], np.int8),
        kernel=np.array(cols[1], np.int32),
        api=np.array(cols[2], np.int32),
        phase=np.array(cols[3], np.int8),
        in_graph=np.array(cols[4], bool),
        node=np.array(cols[5], np.int32),
    )


def kernels_per_step(ranks: int, layers: int, draft_tokens: int) -> int:
    return sum(len(v) for v in step_phases(ranks, layers, draft_tokens).values())
