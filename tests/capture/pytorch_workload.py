"""A PyTorch workload with known tensor allocations, for fragscope's bridge tests (with the
torch double, tests/capture/torch_double) and for scripts/gpu-check.sh (with real PyTorch).

  python3 pytorch_workload.py STATE.json [--frames N] [--burst N] [--wait-recording]

--wait-recording: after CUDA is initialised (the agent loads there, as it does at cuInit), wait
until the bridge has enabled the memory history (its first _snapshot leaves an entry) so that
what follows is recorded as it happens; the tensor allocated before that is pre-existing.
Frames 0..N-1, each inside record_function("frame i"):
  a = 256 KiB (kept until the end), b = 512 KiB (freed at once), c = 4 MiB (freed at frame end)
--oom: then one 1 PiB tensor, which must fail with out-of-memory (exit 3 if not).
--burst N: then N allocate/free pairs of 1 KiB while holding the GIL (switch interval raised),
  3 trace entries each (alloc, free_requested, free_completed): with a small max_entries the
  bridge cannot drain in time and must count what it lost.
At the end: empty_cache(), then STATE.json gets the allocator's final state from _snapshot():
active blocks and segments, and the wall time of the work.
"""
import json
import sys
import time

import torch

KIB = 1024
KEEP = []  # alive until the interpreter's teardown, after the bridge's last drain


def main():
    args = sys.argv[1:]
    out = args[0]
    frames = int(args[args.index("--frames") + 1]) if "--frames" in args else 4
    burst = int(args[args.index("--burst") + 1]) if "--burst" in args else 0
    oom = "--oom" in args
    wait = "--wait-recording" in args

    first = torch.empty(64 * KIB, dtype=torch.uint8, device="cuda")  # initialises CUDA
    if wait:
        deadline = time.monotonic() + 20
        enabled = getattr(getattr(torch, "_C", None), "_cuda_isHistoryEnabled", None)
        while time.monotonic() < deadline:
            if enabled is not None:
                if enabled():
                    break
                time.sleep(0.01)
                continue
            traces = torch.cuda.memory._snapshot().get("device_traces") or []
            if any(len(t) for t in traces):
                break
            if not getattr(torch, "IS_TORCH_DOUBLE", False):
                # Real PyTorch: an action recorded once the history is on ends the wait.
                probe = torch.empty(512, dtype=torch.uint8, device="cuda")
                del probe
            time.sleep(0.01)
        else:
            print("the memory history was never enabled", file=sys.stderr)
            return 4
    t0 = time.perf_counter()
    kept = KEEP
    kept.append(first)
    for i in range(frames):
        with torch.profiler.record_function("frame %d" % i):
            a = torch.empty(256 * KIB, dtype=torch.uint8, device="cuda")
            b = torch.empty(512 * KIB, dtype=torch.uint8, device="cuda")
            del b
            c = torch.empty(4096 * KIB, dtype=torch.uint8, device="cuda")
            kept.append(a)
            time.sleep(0.02)
            del c
    if burst:
        old = sys.getswitchinterval()
        sys.setswitchinterval(30.0)  # keep the GIL: no drain can happen during the burst
        for _ in range(burst):
            x = torch.empty(KIB, dtype=torch.uint8, device="cuda")
            del x
        sys.setswitchinterval(old)
    if oom:
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # 1 PiB: must fail
            print("a 1 PiB tensor did not fail", file=sys.stderr)
            return 3
        except RuntimeError:
            pass
    torch.cuda.empty_cache()
    if hasattr(torch.cuda, "synchronize"):
        torch.cuda.synchronize()
    work_s = time.perf_counter() - t0
    snap = torch.cuda.memory._snapshot()
    blocks, segments = [], []
    for s in snap["segments"]:
        if not s.get("is_expandable"):
            segments.append([int(s["address"]), int(s["total_size"])])
        for b in s["blocks"]:
            if str(b["state"]).startswith("active"):
                blocks.append([int(b["address"]), int(b["size"])])
    with open(out, "w") as f:
        json.dump({"blocks": sorted(blocks), "segments": sorted(segments), "work_s": work_s,
                   "torch": torch.__version__, "frames": frames, "burst": burst}, f)
    print("pytorch workload done: %d blocks, %d segments" % (len(blocks), len(segments)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
