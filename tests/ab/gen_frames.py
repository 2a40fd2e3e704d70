#!/usr/bin/env python3
"""A stand-in for a video generation, for the `fragscope ab` tests (docs/ab.md).

Writes numbered PNG frames of smooth synthetic motion (a texture sliding one pixel per frame)
and acts like a generation under the environment it is given, as a PyTorch process would read
it:

  --alloc-break F   frame F breaks (another scene) only while the caching allocator is on
                    (PYTORCH_NO_CUDA_MEMORY_CACHING unset or 0) and expandable segments are off
                    (no expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF):
                    a frame that follows the allocator
  --content-break F frame F breaks in every arm: the content's fault
  --nondeterministic  seeded by the run's folder name: one frame of each run breaks, a different
                    one in every run, and every pixel carries +-1 grey level of noise

Bad behaviours for the error tests, under PYTORCH_NO_CUDA_MEMORY_CACHING=1 only:
  --no-caching fail|nothing|short   exit 3 after a line on stderr | write no frame |
                    write two frames fewer

Standard library only (PNG through zlib and struct). Frames go to --out (default
$FRAGSCOPE_RUN_DIR) as frame_0000.png, frame_0001.png, ...
"""

import argparse
import math
import os
import random
import struct
import sys
import zlib


def png(path, width, height, rows):
    """rows: a list of bytes objects, 3 * width bytes each (RGB)."""
    raw = b"".join(b"\x00" + r for r in rows)

    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def smooth(x, y, t):
    """A smooth texture sliding right by one pixel per frame."""
    u = x - t
    v = 128 + 55 * math.sin(2 * math.pi * u / 17.0) * math.cos(2 * math.pi * y / 13.0)
    v += 35 * math.sin(2 * math.pi * (u + 0.6 * y) / 29.0)
    return v


def broken(x, y, t):
    """Another scene: a hard checkerboard."""
    return 230 if ((x // 6) + (y // 6)) % 2 == 0 else 20


def frame(width, height, t, bad, rng):
    rows = []
    for y in range(height):
        row = bytearray()
        for x in range(width):
            g = broken(x, y, t) if bad else smooth(x, y, t)
            px = (g, 0.8 * g + 25, 255 - 0.7 * g)
            for c in px:
                if rng is not None:
                    c += rng.choice((-1, 0, 1))
                row.append(max(0, min(255, int(round(c)))))
        rows.append(bytes(row))
    return rows


def allocator_on(env):
    if env.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") not in ("", "0"):
        return False
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = env.get(name, "").replace(" ", "")
        if "expandable_segments:True" in conf.split(","):
            return False
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("FRAGSCOPE_RUN_DIR", ""))
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--size", default="64x48")
    p.add_argument("--alloc-break", type=int, action="append", default=[])
    p.add_argument("--content-break", type=int, action="append", default=[])
    p.add_argument("--nondeterministic", action="store_true")
    p.add_argument("--no-caching", choices=("fail", "nothing", "short"))
    a = p.parse_args()
    if not a.out:
        sys.exit("gen_frames.py: --out or FRAGSCOPE_RUN_DIR is needed")
    width, height = (int(v) for v in a.size.split("x"))
    os.makedirs(a.out, exist_ok=True)
    env = os.environ
    frames = a.frames
    no_caching = env.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") not in ("", "0")
    if no_caching and a.no_caching == "fail":
        print("generating with the caching allocator off", file=sys.stderr)
        print("RuntimeError: CUDA error: out of memory (simulated)", file=sys.stderr)
        sys.exit(3)
    if no_caching and a.no_caching == "nothing":
        return
    if no_caching and a.no_caching == "short":
        frames -= 2
    bad = set(a.content_break)
    if allocator_on(env):
        bad.update(a.alloc_break)
    rng = None
    if a.nondeterministic:
        # Seeded by the run: the same run name gives the same frames, two runs differ.
        seed = zlib.crc32(os.path.basename(os.path.normpath(a.out)).encode())
        rng = random.Random(seed)
        bad.add(4 + seed % (frames - 6))
    for t in range(frames):
        png(os.path.join(a.out, "frame_%04d.png" % t), width, height,
            frame(width, height, t, t in bad, rng))


if __name__ == "__main__":
    main()
