"""Tensor parallelism: one process per GPU (torchrun), Megatron-style sharding, NCCL allreduce.

Column-parallel QKV and gate/up, row-parallel o_proj and down followed by one allreduce each
(two per layer, as in SGLang's RowParallelLinear), and a vocab-parallel lm_head whose logits
are all-gathered (SGLang's LogitsProcessor). NVLink multicast (NVLS) stays off: the H200
machines must not use it, so its switches are set before the process group exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def disable_multicast() -> None:
    """Force NVLink multicast off (overriding the environment) before NCCL initialises."""
    os.environ.update(MULTICAST_OFF)


@dataclass
class TP:
    """This process's place in the tensor-parallel group (world 1: no communication at all)."""

    rank: int = 0
    world: int = 1
    group: dist.ProcessGroup | None = None

    def shard(self, full: torch.Tensor, dim: int) -> torch.Tensor:
        """This rank's contiguous slice of ``full`` along ``dim``."""
        if self.world == 1:
            return full
        return full.chunk(self.world, dim=dim)[self.rank].contiguous()

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(x, group=self.group)
        return x

    def all_gather_last(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenate every rank's ``x`` along the last dimension (vocab-parallel logits)."""
        if self.world == 1:
            return x
        flat = x.reshape(-1, x.shape[-1]).contiguous()
        out = torch.empty((self.world,) + flat.shape, dtype=x.dtype, device=x.device)
        if hasattr(dist, "all_gather_into_tensor") and dist.get_backend(self.group) != "gloo":
            dist.all_gather_into_tensor(out, flat, group=self.group)
        else:
            dist.all_gather(list(out.unbind(0)), flat, group=self.group)
        return out.permute(1, 0, 2).reshape(x.shape[:-1] + (self.world * x.shape[-1],))

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier(group=self.group)


def init_tp(device: torch.device) -> TP:
    """Join the process group torchrun describes (``WORLD_SIZE``/``RANK``), or run alone.

    NCCL on CUDA, gloo on CPU. A world size of 1 under torchrun still creates the group, so
    the same code path (allreduce calls included) runs at TP 1.
    """
    disable_multicast()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if "RANK" not in os.environ and world == 1:
        return TP()
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs = {"device_id": device} if device.type == "cuda" else {}
        dist.init_process_group(backend=backend, **kwargs)
    return TP(rank=dist.get_rank(), world=dist.get_world_size(), group=dist.group.WORLD)


def local_device(requested: str) -> torch.device:
    """The device for this process: ``cuda:LOCAL_RANK`` under torchrun, ``cpu`` without CUDA."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {requested!r} requested but CUDA is not available")
    if requested == "cuda":
        index = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device(requested)


def shutdown_tp(tp: TP) -> None:
    if tp.group is not None and dist.is_initialized():
        dist.destroy_process_group()
