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


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_snapshot_fixtures.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, data in (("multi-device.pickle", multi_device()),
                       ("v2-history.pickle", v2_history())):
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(data, f, protocol=4)


if __name__ == "__main__":
    main()
