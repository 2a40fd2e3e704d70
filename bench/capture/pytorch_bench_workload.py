"""Allocator loop for bench_capture_pytorch and scripts/gpu-check.sh: ROUNDS rounds of 8 tensor
allocations and their frees (16 allocator calls per round, 24 trace entries) on whatever `torch`
is on the path, with WORK_US microseconds of other Python work after each allocation (0: as
allocator-heavy as Python can be; 20: closer to a model, where each tensor comes with kernels).
Prints the loop's own time, so interpreter start-up and the recorder are not counted:
  ACTIONS <calls> SECONDS <s>
Usage: pytorch_bench_workload.py [ROUNDS [WORK_US]]   (BENCH_HISTORY=1: enable the history itself)"""
import os
import sys
import time

import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
work = float(sys.argv[2]) / 1e6 if len(sys.argv) > 2 else 0.0


def busy(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


sizes = [512, 4096, 65536, 262144, 1 << 20, 3 << 20, 8192, 131072]
keep = torch.empty(1024, dtype=torch.uint8, device="cuda")  # CUDA init (the agent loads here)
if os.environ.get("BENCH_HISTORY"):
    # The allocator's own cost of keeping the history, without the bridge draining it.
    torch.cuda.memory._record_memory_history("all", context=None, max_entries=32768)
time.sleep(0.3)  # the bridge enables the history before the timed loop
t0 = time.perf_counter()
for r in range(rounds):
    ts = []
    for s in sizes:
        ts.append(torch.empty(s, dtype=torch.uint8, device="cuda"))
        if work:
            busy(work)
    del ts
elapsed = time.perf_counter() - t0
print("ACTIONS %d SECONDS %.6f" % (rounds * len(sizes) * 2, elapsed))
