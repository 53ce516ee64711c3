"""Two ranks (torchrun, gloo) on one H200, each profiled with torch.profiler into its own Kineto file."""
import os
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

dist.init_process_group("gloo")
rank = dist.get_rank()
out = os.environ["TRACE_DIR"]
x = torch.randn(2048, 2048, device="cuda")
w = torch.randn(2048, 2048, device="cuda")


def step():
    global x
    for _ in range(4):
        x = torch.relu(x @ w) * 0.01 + 0.5
    t = x.sum().cpu()
    dist.all_reduce(t)


def ready(p):
    p.export_chrome_trace(f"{out}/run-TP-{rank}.trace.json.gz")


with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=5),
             on_trace_ready=ready) as prof:
    for _ in range(8):
        step()
        prof.step()
dist.destroy_process_group()
print("rank", rank, "done")
