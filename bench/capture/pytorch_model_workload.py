"""A real model's training steps for scripts/gpu-check.sh: the PyTorch bridge's cost where each
tensor comes with kernels (a 6-layer transformer encoder, d_model 512, batch 16 x 256 tokens,
AdamW), beside the allocator-bound loop of pytorch_bench_workload.py. Three warm-up steps, then
STEPS timed steps (synchronised). Prints the timed steps' own time and allocator calls:
  ACTIONS <allocations + frees> SECONDS <s>
Usage: pytorch_model_workload.py [STEPS]   (BENCH_HISTORY=1: enable the history itself)"""
import os
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                         batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(16, 256, 512, device="cuda")
if os.environ.get("BENCH_HISTORY"):
    # The allocator's own cost of keeping the history, without the bridge draining it.
    torch.cuda.memory._record_memory_history("all", context=None, max_entries=32768)


def step():
    opt.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()


for _ in range(3):
    step()
torch.cuda.synchronize()
time.sleep(0.3)  # the bridge enables the history before the timed steps
stats = torch.cuda.memory_stats()
calls0 = stats["allocation.all.allocated"] + stats["allocation.all.freed"]
t0 = time.perf_counter()
for _ in range(steps):
    step()
torch.cuda.synchronize()
elapsed = time.perf_counter() - t0
stats = torch.cuda.memory_stats()
calls = stats["allocation.all.allocated"] + stats["allocation.all.freed"] - calls0
print("ACTIONS %d SECONDS %.6f" % (calls, elapsed))
