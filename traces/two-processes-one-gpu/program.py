"""A small GPU program (torch only): matmuls and elementwise ops in a loop, about 4 s."""
import time
import torch

x = torch.randn(2048, 2048, device="cuda")
w = torch.randn(2048, 2048, device="cuda")
end = time.time() + 4
while time.time() < end:
    for _ in range(8):
        x = torch.relu(x @ w) * 0.01 + 0.5
    torch.cuda.synchronize()
print("done", float(x.sum()))
