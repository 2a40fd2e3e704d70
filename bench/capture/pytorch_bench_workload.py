"""Allocator-heavy loop for bench_capture_pytorch: N rounds of 8 tensor allocations and their
frees (16 allocator calls per round, 24 trace entries) on whatever `torch` is on the path (the
double in the benchmark). Prints the loop's own time, so interpreter start-up and the recorder
are not counted:  ACTIONS <calls> SECONDS <s>"""
import sys
import time

import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
sizes = [512, 4096, 65536, 262144, 1 << 20, 3 << 20, 8192, 131072]
keep = torch.empty(1024, dtype=torch.uint8, device="cuda")  # CUDA init (the agent loads here)
time.sleep(0.3)  # the bridge enables the history before the timed loop
t0 = time.perf_counter()
for r in range(rounds):
    ts = [torch.empty(s, dtype=torch.uint8, device="cuda") for s in sizes]
    del ts
elapsed = time.perf_counter() - t0
print("ACTIONS %d SECONDS %.6f" % (rounds * len(sizes) * 2, elapsed))
