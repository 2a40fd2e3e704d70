#!/usr/bin/env python3
"""Writes a PyTorch-format allocator snapshot pickle of about TARGET bytes, streaming.

The structure is what torch.cuda.memory._dump_snapshot() writes: a dict with 'segments' (each
with blocks) and 'device_traces' (one list per device of trace-entry dicts with action, addr,
size, stream, time_us, frames). Keys, action strings and frame dicts are memo references, as
in real dumps. The pickle opcodes are written directly so that the generator never holds the
whole object in memory. The trace is consistent with the final state by construction: every
step allocates a few blocks in a working segment and frees them again; the persistent blocks
were allocated before the trace started.

usage: gen_snapshot.py OUT TARGET_BYTES
"""
import struct
import sys

out_path, target = sys.argv[1], int(sys.argv[2])
MB = 1 << 20
SEG_BASE = 0x7F0000000000
SEG_SIZE = 20 * MB
N_SEGS = 64
PERSIST = 2 * MB  # per segment, allocated before the trace (block 0)

buf = bytearray()
memo = 0


def memoize():
    global memo
    buf.append(0x94)
    memo += 1
    return memo - 1


def ustr(s):
    b = s.encode()
    buf.append(0x8C)
    buf.append(len(b))
    buf.extend(b)
    return memoize()


def get(i):
    if i < 256:
        buf.extend(b"h" + bytes([i]))
    else:
        buf.extend(b"j" + struct.pack("<I", i))


def long1(v):
    n = (v.bit_length() + 8) // 8
    buf.extend(bytes([0x8A, n]) + v.to_bytes(n, "little", signed=True))


def integer(v):
    if 0 <= v < 256:
        buf.extend(b"K" + bytes([v]))
    elif -(1 << 31) <= v < (1 << 31):
        buf.extend(b"J" + struct.pack("<i", v))
    else:
        long1(v)


buf.extend(b"\x80\x04")
buf.append(ord("}"))
memoize()
buf.append(ord("("))
keys = {}

f = open(out_path, "wb")


def flush(force=False):
    if force or len(buf) > 8 * MB:
        f.write(buf)
        buf.clear()


def key(k):
    if k in keys:
        get(keys[k])
    else:
        keys[k] = ustr(k)


def sval(s):  # string value, memoized once
    if s in keys:
        get(keys[s])
    else:
        keys[s] = ustr(s)


# shared frame dicts
frames = []
for i, (name, fn, line) in enumerate([("forward", "model.py", 54), ("generate", "pipeline.py", 210),
                                      ("denoise_step", "unet.py", 88), ("attention", "attn.py", 17)]):
    buf.append(ord("}"))
    frames.append(memoize())
    buf.append(ord("("))
    key("name"); sval(name)
    key("filename"); sval(fn)
    key("line"); integer(line)
    buf.append(ord("u"))
    buf.append(ord("0"))
for k in ["action", "addr", "size", "stream", "time_us", "frames", "alloc", "free_requested", "free_completed"]:
    key(k)
    buf.append(ord("0"))  # POP: keep them memoized only


# segments
key("segments")
buf.append(ord("]"))
memoize()
buf.append(ord("("))
for s in range(N_SEGS):
    addr = SEG_BASE + s * SEG_SIZE
    buf.append(ord("}"))
    memoize()
    buf.append(ord("("))
    key("device"); integer(0)
    key("address"); long1(addr)
    key("total_size"); integer(SEG_SIZE)
    key("stream"); integer(0)
    key("segment_type"); sval("large")
    key("is_expandable"); buf.append(0x89)
    key("blocks")
    buf.append(ord("]"))
    memoize()
    buf.append(ord("("))
    for (baddr, bsize, state) in [(addr, PERSIST, "active_allocated"), (addr + PERSIST, SEG_SIZE - PERSIST, "inactive")]:
        buf.append(ord("}"))
        memoize()
        buf.append(ord("("))
        key("address"); long1(baddr)
        key("size"); integer(bsize)
        key("requested_size"); integer(bsize)
        key("state"); sval(state)
        key("frames"); buf.append(ord("]")); memoize()
        buf.append(ord("u"))
    buf.append(ord("e"))
    buf.append(ord("u"))
buf.append(ord("e"))

key("device_traces")
buf.append(ord("]"))
memoize()
buf.append(ord("]"))  # device 0's trace, appended to device_traces at the end
memoize()

K = {k: keys[k] for k in ["action", "addr", "size", "stream", "time_us", "frames"]}
A = {k: keys[k] for k in ["alloc", "free_requested", "free_completed"]}


def entry_bytes(action, addr, size, t, fr):
    b = bytearray(b"}\x94(")
    b += bytes([ord("h"), K["action"], ord("h"), A[action], ord("h"), K["addr"]])  # all < 256
    n = (addr.bit_length() + 8) // 8
    b += bytes([0x8A, n]) + addr.to_bytes(n, "little", signed=True)
    b += bytes([ord("h"), K["size"]]) + b"J" + struct.pack("<i", size)
    b += bytes([ord("h"), K["stream"], ord("K"), 0, ord("h"), K["time_us"]])
    n = (t.bit_length() + 8) // 8
    b += bytes([0x8A, n]) + t.to_bytes(n, "little", signed=True)
    b += bytes([ord("h"), K["frames"]]) + b"]\x94("
    for x in fr:
        b += bytes([ord("h"), x]) if x < 256 else b"j" + struct.pack("<I", x)
    b += b"eu"
    return b


t = 1_700_000_000_000_000
entries = 0
step = 0
sizes = [512, 4096, 65536, 1 * MB, 2 * MB, 512 * 1024]
batch = bytearray()
in_batch = 0
while f.tell() + len(buf) < target:
    seg = step % N_SEGS
    base = SEG_BASE + seg * SEG_SIZE + PERSIST
    addrs = []
    off = 0
    fr = [frames[step % 4], frames[(step + 1) % 4]]
    for i in range(4):
        sz = sizes[(step + i) % len(sizes)]
        addrs.append((base + off, sz))
        batch += entry_bytes("alloc", base + off, sz, t, fr)
        off += sz
        t += 3
    for a, sz in addrs:
        batch += entry_bytes("free_requested", a, sz, t, fr)
        batch += entry_bytes("free_completed", a, sz, t + 1, fr)
        t += 2
    entries += 12
    in_batch += 12
    step += 1
    if in_batch >= 996:
        buf.append(ord("("))
        buf.extend(batch)
        buf.append(ord("e"))
        batch = bytearray()
        in_batch = 0
        flush()
if in_batch:
    buf.append(ord("("))
    buf.extend(batch)
    buf.append(ord("e"))
buf.append(ord("a"))  # the device's list into device_traces
buf.append(ord("u"))  # top-level SETITEMS
buf.append(ord("."))
flush(True)
f.close()
print(f"{out_path}: {entries} trace entries, {N_SEGS} segments")
