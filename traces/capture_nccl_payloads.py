"""Real NCCL NVTX payloads on one GPU: the fixture behind tests/test_nccl_payload_blobs.py.

NCCL opens an NVTX range per API call with a typed payload holding the message size; nsys keeps
the values only with `nsys export --include-blobs=true`. One rank on one GPU is enough to get
real ranges and blobs (a multi-GPU machine was not lent): all_reduce / broadcast / all_gather of
known sizes, under nsys, exported with blobs.

    source .device/nsys-env.sh
    nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -o OUT/nccl -f true python3 traces/capture_nccl_payloads.py
    nsys export --type sqlite --include-blobs=true -o OUT/nccl.sqlite OUT/nccl.nsys-rep
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # multicast stays off on these machines
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29531")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

SIZES = [1024, 14 * 1024, 56 * 1024, 1 << 20]  # bytes: decode/verify-sized bf16 allreduces, and 1 MiB


def main() -> int:
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    calls = []
    for nbytes in SIZES:
        x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        dist.all_reduce(x)
        calls.append({"op": "all_reduce", "bytes": nbytes})
        dist.broadcast(x, src=0)
        calls.append({"op": "broadcast", "bytes": nbytes})
        out = torch.empty_like(x)
        dist.all_gather_into_tensor(out, x)
        calls.append({"op": "all_gather", "bytes": nbytes})
    torch.cuda.synchronize()
    dist.destroy_process_group()
    json.dump({"nccl": ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__, "calls": calls},
              sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
