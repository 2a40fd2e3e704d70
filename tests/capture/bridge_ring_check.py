"""Known-answer cases for the PyTorch bridge's Ring (capture/pytorch/bridge.py): where the new
entries start in a history ring buffer, and whether entries were overwritten before the drain.
Usage: python3 bridge_ring_check.py path/to/bridge.py"""
import sys

ns = {}
exec(open(sys.argv[1]).read(), ns)
Ring, fp = ns["Ring"], ns["_fp"]


def mk(i, addr=None):
    # Entry i: address and time i (or a fixed address at time 0, to repeat entries exactly).
    return {"action": "alloc", "addr": i if addr is None else addr, "size": 1, "stream": 0,
            "time_us": i if addr is None else 0}


# Capacity 10 in every case.
# 1. Not full, grown from 2 to 3 entries: the new one starts at index 2.
r = Ring(fp)
r.skip([mk(0), mk(1)])
assert r.new([mk(i) for i in range(3)], 10) == (2, False)
# 2. Full with 0..9, then 4 more came (the buffer holds 4..13): the last taken (9) is at index
#    5, the new ones start at 6, nothing lost.
r = Ring(fp)
r.skip([mk(i) for i in range(10)])
assert r.new([mk(i) for i in range(4, 14)], 10) == (6, False)
# 3. Then 20 more (the buffer holds 24..33): 13 is gone, all 10 are new and some were lost.
r.skip([mk(i) for i in range(4, 14)])
assert r.new([mk(i) for i in range(24, 34)], 10) == (0, True)
# 4. Identical repeated entries a, b: taken 1 2 3 4 a b a b a b (full); one more came, so the
#    buffer holds 2 3 4 a b a b a b 50. The last taken (b) matches at indices 4, 6 and 8; only at
#    8 do the 7 entries before it equal the remembered tail (3 4 a b a b a), so the new one
#    starts at 9; at 6 the tail would need 4 a b a before, and finds 2 3 4 a.
ab = [mk(0, 7), mk(0, 8)]
r = Ring(fp)
r.skip([mk(i) for i in range(1, 5)] + ab * 3)
assert r.new([mk(i) for i in range(2, 5)] + ab * 3 + [mk(50)], 10) == (9, False)
# 5. Times out of order (the binary search by time lands on the wrong entry): taken 0..9; the
#    buffer holds 4..9, then X (time 20), Y (time 9, another address), Z (30), W (40). The
#    search for time 9 finds Y, whose fingerprint differs; the scan from the end finds 9 at
#    index 5, so the new entries start at 6.
r = Ring(fp)
r.skip([mk(i) for i in range(10)])
late = [mk(20), {"action": "alloc", "addr": 99, "size": 1, "stream": 0, "time_us": 9}, mk(30),
        mk(40)]
assert r.new([mk(i) for i in range(4, 10)] + late, 10) == (6, False)
# 6. A large wrapped ring in time order (capacity 1000, 1000 taken, 400 more came): the search
#    by time finds the last taken (999) at index 599.
r = Ring(fp)
r.skip([mk(i) for i in range(1000)])
assert r.new([mk(i) for i in range(400, 1400)], 1000) == (600, False)
print("ring ok: 6 cases")
