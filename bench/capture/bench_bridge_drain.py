"""The PyTorch bridge's own Python work per drained trace entry (capture/pytorch/bridge.py), on
synthetic history rings shaped like real PyTorch's (alloc / free_requested / free_completed
entries in time order, no stacks), without torch: where the new entries start in a wrapped ring
(Ring.new) and turning them into records (Bridge.apply_all). Baseline, measured in the same run:
the scan from the ring's end that Ring.new falls back to (its only method before the search by
time). torch's own _snapshot() is not in these figures (scripts/gpu-check.sh reports it).
Usage: bench_bridge_drain.py path/to/bridge.py [--runs N]"""
import statistics
import sys
import time

ns = {}
exec(open(sys.argv[1]).read(), ns)
Bridge, Ring, fp, COUNTED = ns["Bridge"], ns["Ring"], ns["_fp"], ns["COUNTED"]
runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
CAP, STEP, TOTAL = 32768, 11000, 200000  # a drain every third of the ring, as bridge.due() asks


def entry(i):
    act = ("alloc", "free_requested", "free_completed")[i % 3]
    return {"action": act, "addr": 0x7F0000000000 + (i // 3) % 64 * 4096, "size": 4096,
            "stream": 0, "time_us": 1000 + i, "frames": [], "device_free": 0}


entries = [entry(i) for i in range(TOTAL)]


def one_run():
    ring, base_ring, bridge = Ring(fp), Ring(fp), Bridge()
    taken = dict.fromkeys(COUNTED, 0)
    ring.skip(entries[:CAP])
    base_ring.skip(entries[:CAP])
    t_new = t_scan = t_apply = 0.0
    n = 0
    for end in range(CAP + STEP, TOTAL + 1, STEP):
        tr = entries[end - CAP:end]
        t0 = time.perf_counter()
        first, lost = ring.new(tr, CAP)
        t1 = time.perf_counter()
        base_first = base_ring.scan(tr) + 1  # the baseline: Ring.new's fallback
        t2 = time.perf_counter()
        bridge.apply_all(0, tr, first, taken)
        t3 = time.perf_counter()
        if lost or first != CAP - STEP or base_first != first:
            sys.exit(f"wrong start: {first} (scan {base_first}, lost {lost}), {CAP - STEP} expected")
        ring.skip(tr)
        base_ring.skip(tr)
        bridge.out = []
        t_new += t1 - t0
        t_scan += t2 - t1
        t_apply += t3 - t2
        n += STEP
    return t_new / n * 1e9, t_scan / n * 1e9, t_apply / n * 1e9


results = [one_run() for _ in range(runs)]
new, base, apply = (statistics.median(r[i] for r in results) for i in range(3))
print(f"bench_bridge_drain: {CAP}-entry ring, a drain per {STEP} new entries, median of {runs} runs")
print(f"  finding the new entries (Ring.new)        {new:8.1f} ns/entry")
print(f"  baseline: scan from the end               {base:8.1f} ns/entry  ({base / max(new, 1e-9):.0f}x)")
print(f"  records from the entries (apply_all)      {apply:8.1f} ns/entry")
print(f"  bridge's Python per entry: {new + apply:.0f} ns (with the scan: {base + apply:.0f} ns, "
      f"{(new + apply) / (base + apply):.2f}x)")
