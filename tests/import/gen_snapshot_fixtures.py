#!/usr/bin/env python3
"""Writes PyTorch-format allocator snapshots (torch.cuda.memory._dump_snapshot pickles) that
exercise every snapshot feature fragscope reads, with the standard library only:

  multi-device.pickle  three devices (the third with segments, no trace); an ordinary segment with an active_pending_free block, a
                       private pool (segment_pool_id (1, 5)), an expandable segment grown by
                       segment_map around a live block, shrunk by segment_unmap, plus a second
                       mapped range; a ring-buffer-truncated trace (it starts with the
                       free_completed of a block freed before it, blocks allocated before it
                       exist only in the final segments); pending frees; three OOM entries;
                       allocator_settings; user_metadata and compile_context; frames;
                       external_annotations (frames, a metric, a named range).
  v2-history.pickle    the PyTorch ~2.0 layout: blocks without 'address', with 'history'.
  bursts.pickle        a complete trace whose segment releases come in bursts spread over time,
                       as a draining GPU spreads them (the first cudaFree of a burst waits for
                       the device): device 0 two empty_cache() calls (the second right before
                       a cudaMalloc), device 1 a free-and-retry, device 2 garbage collection
                       (garbage_collection_threshold:0.5 of the 200 MiB an OOM entry tells) and
                       a failed request. Worked out in tests/alloc/tst_whatif_timing.cpp.
  current.pickle       what PyTorch 2.11-2.13 adds, written with pickle protocol 5: a truncated
                       history (allocator_settings trace_alloc_overflowed, trace_alloc_max_entries)
                       with a ghost block, pool_id on trace entries, an active_awaiting_free block,
                       annotate entries, user_metadata holding an integer of 2**70, an FX frame
                       (fx_node_op, fx_node_name, fx_node_target, fx_original_trace),
                       ProfilerStep#N external annotations, host_segments and host_traces.
                       Worked out in tests/import/tst_import_snapshot_current.cpp.

The expected figures are worked out by hand in tests/import/tst_import_fixtures.cpp; this
script only writes what the comments there describe. Usage: gen_snapshot_fixtures.py OUTDIR
"""
import os
import pickle
import sys

KiB = 1024
MiB = 1024 * KiB

SIDE_STREAM = 0x5555  # raw stream id on device 1 (fragscope renumbers it 1)

FORWARD = [{"name": "forward", "filename": "model.py", "line": 42},
           {"name": "<module>", "filename": "train.py", "line": 7}]


def block(address, size, state, requested=None, frames=None):
    b = {"address": address, "size": size,
         "requested_size": requested if requested is not None else (
             size if state == "active_allocated" else 0),
         "state": state}
    b["frames"] = frames if frames is not None else []
    return b


def segment(device, address, blocks, stream=0, pool=(0, 0), kind="large", expandable=False):
    total = sum(b["size"] for b in blocks)
    return {"device": device, "address": address, "total_size": total,
            "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
            "active_size": sum(b["size"] for b in blocks if b["state"].startswith("active")),
            "requested_size": sum(b["requested_size"] for b in blocks),
            "stream": stream, "segment_type": kind, "segment_pool_id": pool,
            "is_expandable": expandable, "frames": [], "blocks": blocks}


def entry(action, addr, size, t, stream=0, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
         "frames": extra.pop("frames", [])}
    e.update(extra)
    return e


def annotation(stage, name, t, device=0):
    return {"stage": stage, "name": name, "device": device, "time_us": t}


def multi_device():
    A, P, E = 0x10000000, 0x20000000, 0x40000000
    B, C = 0x80000000, 0x90000000
    segments = [
        segment(0, A, [block(A, 2 * MiB, "active_allocated", 2000000),
                       block(A + 2 * MiB, 1 * MiB, "active_pending_free"),
                       block(A + 3 * MiB, 1 * MiB, "inactive"),
                       block(A + 4 * MiB, 2 * MiB, "active_allocated"),
                       block(A + 6 * MiB, 2 * MiB, "inactive")]),
        segment(0, P, [block(P, 512 * KiB, "active_allocated"),
                       block(P + 512 * KiB, 1536 * KiB, "inactive")],
                pool=(1, 5), kind="small"),
        segment(0, E, [block(E, 2 * MiB, "active_allocated", frames=FORWARD),
                       block(E + 2 * MiB, 4 * MiB, "inactive")], expandable=True),
        segment(0, E + 8 * MiB, [block(E + 8 * MiB, 2 * MiB, "active_allocated")],
                expandable=True),
        segment(1, B, [block(B, 1 * MiB, "active_allocated"),
                       block(B + 1 * MiB, 3 * MiB, "inactive")], stream=SIDE_STREAM),
        segment(1, C, [block(C, 2 * MiB, "active_pending_free")]),
        # device 2: a segment and an empty trace list
        segment(2, 0xA0000000, [block(0xA0000000, 2 * MiB, "inactive")]),
    ]
    dev0 = [
        entry("free_completed", A + 6 * MiB, 2 * MiB, 100),
        entry("segment_map", E, 2 * MiB, 110),
        entry("alloc", E, 2 * MiB, 120, frames=FORWARD, user_metadata="step=3",
              compile_context="layer1/forward"),
        entry("segment_map", E + 2 * MiB, 4 * MiB, 130),
        entry("alloc", E + 2 * MiB, 4 * MiB, 140),
        entry("free_requested", E + 2 * MiB, 4 * MiB, 150),
        entry("free_completed", E + 2 * MiB, 4 * MiB, 151),
        entry("segment_map", E + 6 * MiB, 2 * MiB, 160),
        entry("alloc", E + 6 * MiB, 2 * MiB, 170),
        entry("free_requested", E + 6 * MiB, 2 * MiB, 175),
        entry("free_completed", E + 6 * MiB, 2 * MiB, 176),
        entry("segment_unmap", E + 6 * MiB, 2 * MiB, 180),
        entry("segment_map", E + 8 * MiB, 2 * MiB, 190),
        entry("alloc", E + 8 * MiB, 2 * MiB, 200),
        entry("alloc", A + 2 * MiB, 1 * MiB, 210),
        entry("free_requested", A + 2 * MiB, 1 * MiB, 220),
        {"action": "oom", "addr": 0, "size": 8 * MiB, "stream": 0, "time_us": 230,
         "device_free": 1 * MiB, "frames": []},
        entry("alloc", A + 4 * MiB, 2 * MiB, 240),
    ]
    dev1 = [
        entry("alloc", C, 2 * MiB, 300),
        entry("free_requested", C, 2 * MiB, 310),
        {"action": "oom", "addr": 0, "size": 2 * MiB, "stream": 0, "time_us": 320,
         "device_free": 0, "frames": []},
        {"action": "oom", "addr": 0, "size": 16 * MiB, "stream": SIDE_STREAM, "time_us": 330,
         "device_free": 4 * MiB, "frames": []},
    ]
    annotations = [
        annotation("START", "frame 0", 105),
        annotation("END", "frame 0", 150),
        annotation("START", "frame 1", 150),
        annotation("START", "metric coherence_score=0.02 frame=2", 160),
        annotation("END", "metric coherence_score=0.02 frame=2", 160),
        annotation("END", "frame 1", 200),
        annotation("START", "frame 2", 200),
        annotation("START", "optimizer.step", 205),
        annotation("END", "optimizer.step", 215),
        annotation("END", "frame 2", 245),
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": True, "roundup_power2_divisions": [1, 0, 0]}
    return {"segments": segments, "device_traces": [dev0, dev1, []],
            "allocator_settings": settings, "external_annotations": annotations}


def v2_history():
    S = 0x1000000
    hist = [{"addr": S, "real_size": 1000000, "frames": FORWARD}]
    blocks = [{"size": 1 * MiB, "state": "active_allocated", "history": hist},
              {"size": 1 * MiB, "state": "inactive"}]
    return {"segments": [{"device": 0, "address": S, "total_size": 2 * MiB, "stream": 0,
                          "segment_type": "large", "allocated_size": 1 * MiB,
                          "active_size": 1 * MiB, "blocks": blocks}],
            "device_traces": []}


def alloc_free(trace, addr, size, t_alloc, t_free=None, stream=0):
    """An allocation, and its free (free_requested then free_completed, no wait) if t_free."""
    trace.append(entry("alloc", addr, size, t_alloc, stream))
    if t_free is not None:
        trace.append(entry("free_requested", addr, size, t_free, stream))
        trace.append(entry("free_completed", addr, size, t_free, stream))


def bursts():
    # Device 0: x, y, z (30, 40, 50 MiB: one segment each) and k (4 KiB in a 2 MiB small
    # segment). empty_cache() #1 releases A, B, C (large pool, by size): the first cudaFree waits
    # 200 ms for the device; k's free comes after it. empty_cache() #2 releases A, B and K, and
    # a 30 MiB request follows at once: its cudaMalloc gets A again (the cache held a 30 MiB block
    # before the call, so this was no free-and-retry).
    A, B, C, K = 0x100000000, 0x110000000, 0x120000000, 0x130000000
    d0 = []
    d0 += [entry("segment_alloc", A, 30 * MiB, 100)]
    alloc_free(d0, A, 30 * MiB, 100, 200)
    d0 += [entry("segment_alloc", B, 40 * MiB, 110)]
    alloc_free(d0, B, 40 * MiB, 110, 201)
    d0 += [entry("segment_alloc", C, 50 * MiB, 120)]
    alloc_free(d0, C, 50 * MiB, 120, 202)
    d0 += [entry("segment_alloc", K, 2 * MiB, 130)]
    alloc_free(d0, K, 4 * KiB, 130)
    d0 += [entry("segment_free", A, 30 * MiB, 1000),
           entry("segment_free", B, 40 * MiB, 201000),
           entry("segment_free", C, 50 * MiB, 201020)]
    d0 += [entry("free_requested", K, 4 * KiB, 250000),
           entry("free_completed", K, 4 * KiB, 250000)]
    d0 += [entry("segment_alloc", A, 30 * MiB, 300000)]
    alloc_free(d0, A, 30 * MiB, 300000, 300200)
    d0 += [entry("segment_alloc", B, 40 * MiB, 300100)]
    alloc_free(d0, B, 40 * MiB, 300100, 300201)
    d0.sort(key=lambda e: e["time_us"])  # stable: each alloc stays after its segment_alloc
    d0 += [entry("segment_free", A, 30 * MiB, 301000),
           entry("segment_free", B, 40 * MiB, 451000),
           entry("segment_free", K, 2 * MiB, 451010),
           entry("segment_alloc", A, 30 * MiB, 500000),
           entry("alloc", A, 30 * MiB, 500000)]

    # Device 1: x (30 MiB) and y (40 MiB) cached; z (100 MiB) fits in no cached block and its
    # cudaMalloc fails: the allocator releases A1 and B1 (150 ms for the first) and retries.
    A1, B1, C1 = 0x200000000, 0x210000000, 0x220000000
    d1 = [entry("segment_alloc", A1, 30 * MiB, 100)]
    alloc_free(d1, A1, 30 * MiB, 100, 200)
    d1 += [entry("segment_alloc", B1, 40 * MiB, 110)]
    alloc_free(d1, B1, 40 * MiB, 110, 210)
    d1.sort(key=lambda e: e["time_us"])
    d1 += [entry("segment_free", A1, 30 * MiB, 1000),
           entry("segment_free", B1, 40 * MiB, 151000),
           entry("segment_alloc", C1, 100 * MiB, 151100),
           entry("alloc", C1, 100 * MiB, 151100)]

    # Device 2, garbage collection at 0.5 x 200 MiB = 100 MiB (ages count the large pool's
    # free-block searches since a block was cached): x 50, y 60, z 12 MiB (searches 1-3), x and
    # z freed (base 3), z2 and z3 reuse Z (searches 4, 5; Z base 5), y freed (base 5). big (80
    # MiB, search 6) fits nowhere; reserved 122 > 100 MiB: ages X 3, Y 1, Z 1, mean 5/3: only X
    # goes, then cudaMalloc gets 80 MiB. huge (1 GiB, search 7): ages Y 2, Z 2: both go (Z
    # first, by size), cudaMalloc fails, nothing else is cached: OOM with 120 MiB free on the
    # device and 80 MiB reserved: 200 MiB usable.
    X, Y, Z, BIG = 0x300000000, 0x310000000, 0x320000000, 0x330000000
    d2 = [entry("segment_alloc", X, 50 * MiB, 100), entry("alloc", X, 50 * MiB, 100),
          entry("segment_alloc", Y, 60 * MiB, 110), entry("alloc", Y, 60 * MiB, 110),
          entry("segment_alloc", Z, 12 * MiB, 120), entry("alloc", Z, 12 * MiB, 120),
          entry("free_requested", X, 50 * MiB, 200), entry("free_completed", X, 50 * MiB, 200),
          entry("free_requested", Z, 12 * MiB, 210), entry("free_completed", Z, 12 * MiB, 210)]
    alloc_free(d2, Z, 12 * MiB, 220, 230)
    alloc_free(d2, Z, 12 * MiB, 240, 250)
    d2 += [entry("free_requested", Y, 60 * MiB, 260), entry("free_completed", Y, 60 * MiB, 260),
           entry("segment_free", X, 50 * MiB, 1000),
           entry("segment_alloc", BIG, 80 * MiB, 1200), entry("alloc", BIG, 80 * MiB, 1200),
           entry("segment_free", Z, 12 * MiB, 2000),
           entry("segment_free", Y, 60 * MiB, 102000),
           {"action": "oom", "addr": 0, "size": 1024 * MiB, "stream": 0, "time_us": 102010,
            "device_free": 120 * MiB, "frames": []}]

    segments = [
        segment(0, A, [block(A, 30 * MiB, "active_allocated")]),
        segment(1, C1, [block(C1, 100 * MiB, "active_allocated")]),
        segment(2, BIG, [block(BIG, 80 * MiB, "active_allocated")]),
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.5",
                "max_split_size": -1, "garbage_collection_threshold": 0.5,
                "expandable_segments": False,
                "roundup_power2_divisions": {str(1 << k): 0 for k in range(16)}}
    return {"segments": segments, "device_traces": [d0, d1, d2], "allocator_settings": settings}


FX_FRAMES = [{"name": "call", "filename": "/tmp/torchinductor/cxy.py", "line": 88,
              "fx_node_op": "call_function", "fx_node_name": "addmm",
              "fx_node_target": "aten.addmm.default",
              "fx_original_trace": '  File "model.py", line 12, in forward\n'
                                   '    x = self.linear(x)\n'},
             {"name": "<module>", "filename": "train.py", "line": 7}]


def current():
    S0, S1, S2 = 0x10000000, 0x20000000, 0x30000000
    H = 0x7F0000000000
    segments = [
        segment(0, S0, [block(S0, 1 * MiB, "active_allocated"),
                        block(S0 + 1 * MiB, 1 * MiB, "active_awaiting_free", 1 * MiB),
                        block(S0 + 2 * MiB, 1 * MiB, "inactive"),
                        block(S0 + 3 * MiB, 1 * MiB, "active_allocated", frames=FX_FRAMES)]),
        segment(0, S1, [block(S1, 512 * KiB, "active_allocated"),
                        block(S1 + 512 * KiB, 1536 * KiB, "inactive")],
                pool=(1, 7), kind="small"),
    ]
    dev0 = [
        entry("segment_alloc", S1, 2 * MiB, 100, pool_id=(1, 7)),
        entry("segment_alloc", S2, 2 * MiB, 102, pool_id=(2, 9)),
        entry("segment_free", S2, 2 * MiB, 104, pool_id=(2, 9)),
        entry("annotate", 0, 0, 105, name="step-begin"),
        entry("alloc", S0 + 1 * MiB, 1 * MiB, 110, pool_id=(0, 0),
              user_metadata={"big": 2 ** 70, "tag": "kv-cache"}),
        entry("alloc", S1, 512 * KiB, 120, pool_id=(1, 7)),
        entry("free_requested", S0 + 1 * MiB, 1 * MiB, 130, pool_id=(0, 0)),
        entry("annotate", 0, 0, 140, name="optimizer", stage="START"),
        entry("annotate", 0, 0, 145, name="optimizer", stage="END"),
        entry("alloc", S0 + 3 * MiB, 1 * MiB, 150, frames=FX_FRAMES, pool_id=(0, 0)),
    ]
    host_segments = [
        {"device": -1, "address": H, "total_size": 2 * MiB, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
         "frames": [], "blocks": [block(H, 1 * MiB, "active_allocated"),
                                  block(H + 1 * MiB, 1 * MiB, "inactive")]}]
    host_traces = [
        entry("segment_alloc", H, 2 * MiB, 100),
        entry("alloc", H, 1 * MiB, 115),
        entry("alloc", H + 1 * MiB, 1 * MiB, 125),
        entry("free_requested", H + 1 * MiB, 1 * MiB, 135),
        entry("free_completed", H + 1 * MiB, 1 * MiB, 136),
    ]
    annotations = [annotation("START", "ProfilerStep#0", 100),
                   annotation("END", "ProfilerStep#0", 125),
                   annotation("START", "ProfilerStep#1", 125),
                   annotation("END", "ProfilerStep#1", 155)]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": False,
                "roundup_power2_divisions": {"1": 0},
                "trace_alloc_overflowed": True, "trace_alloc_max_entries": 10}
    return {"segments": segments, "device_traces": [dev0], "allocator_settings": settings,
            "external_annotations": annotations, "host_segments": host_segments,
            "host_traces": host_traces}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_snapshot_fixtures.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in (("multi-device.pickle", multi_device()),
                       ("v2-history.pickle", v2_history()),
                       ("bursts.pickle", bursts()),
                       ("current.pickle", current())):
        with open(os.path.join(out, name), "wb") as f:
            # Python 3.14's default protocol, 5, for what current PyTorch writes
            pickle.dump(data, f, protocol=5 if name == "current.pickle" else 4)


if __name__ == "__main__":
    main()
