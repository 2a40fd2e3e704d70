"""The double's toy caching allocator and history ring buffers (see ../../README.md)."""
import os
import sys
import time

ROUND = 512
SMALL = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_ROUND = 2 << 20


class Block:
    __slots__ = ("addr", "size", "requested", "seg", "frames")

    def __init__(self, addr, size, requested, seg):
        self.addr, self.size, self.requested, self.seg = addr, size, requested, seg
        self.frames = []


class Segment:
    def __init__(self, addr, size, kind, expandable=False):
        self.addr, self.size, self.kind = addr, size, kind
        self.expandable = expandable
        self.blocks = {}  # addr -> Block

    def end_of_blocks(self):
        return max((a + b.size for a, b in self.blocks.items()), default=self.addr)

    def fit(self, size):
        cursor = self.addr
        for a in sorted(self.blocks):
            if a - cursor >= size:
                return cursor
            cursor = a + self.blocks[a].size
        return cursor if self.addr + self.size - cursor >= size else None


class Ring:
    """PyTorch's RingBuffer: append until full, then overwrite the oldest."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.items = []
        self.next = 0

    def add(self, item):
        if len(self.items) < self.capacity:
            self.items.append(item)
        else:
            self.items[self.next] = item
            self.next = (self.next + 1) % self.capacity

    def entries(self):
        return self.items[self.next:] + self.items[:self.next]


class Allocator:
    def __init__(self, capacity):
        self.capacity = capacity
        self.segments = {}
        self.next_addr = 0x7F0000000000
        # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, modelled for the large pool: one
        # reserved range whose end is mapped and unmapped in 2 MiB pages.
        self.expandable = os.environ.get("TORCH_DOUBLE_EXPANDABLE") == "1"
        self.exp = None
        self.trace = None
        self.notes = None
        self.context = None
        self.counts = {"allocation.all.allocated": 0, "allocation.all.freed": 0,
                       "segment.all.allocated": 0, "segment.all.freed": 0, "num_ooms": 0}

    # -- history --
    def record(self, enabled, context, max_entries):
        if enabled is None:
            self.trace = self.notes = None
            return
        if self.trace is None or self.trace.capacity != max_entries:
            self.trace = Ring(max(1, min(max_entries, sys.maxsize)))
            self.notes = Ring(max(1, min(max_entries, sys.maxsize)))
        self.context = context

    def _frames(self):
        if not self.context:
            return []
        f = sys._getframe(3)
        out = []
        while f is not None and len(out) < 16:
            out.append({"filename": f.f_code.co_filename, "line": f.f_lineno,
                        "name": f.f_code.co_name})
            f = f.f_back
        return out

    def _te(self, action, addr=0, size=0, frames=None, **extra):
        if self.trace is None:
            return
        e = {"action": action, "addr": addr, "size": size, "stream": 0,
             "time_us": time.time_ns() // 1000, "frames": frames or []}
        e.update(extra)
        self.trace.add(e)

    def annotate(self, stage, name, time_us):
        if self.notes is not None:
            self.notes.add({"stage": stage, "name": name, "device": 0, "time_us": time_us})

    # -- allocation --
    def reserved_bytes(self):
        return sum(s.size for s in self.segments.values())

    def allocated_bytes(self):
        return sum(b.size for s in self.segments.values() for b in s.blocks.values())

    def malloc(self, n):
        size = max(ROUND, (n + ROUND - 1) // ROUND * ROUND)
        kind = "small" if size <= SMALL else "large"
        if kind == "large" and self.expandable:
            return self._malloc_expandable(n, size)
        seg = None
        addr = None
        for s in sorted(self.segments.values(), key=lambda s: s.addr):
            if s.kind == kind:
                addr = s.fit(size)
                if addr is not None:
                    seg = s
                    break
        if seg is None:
            ssize = SMALL_SEGMENT if kind == "small" else \
                (size + LARGE_ROUND - 1) // LARGE_ROUND * LARGE_ROUND
            if self.reserved_bytes() + ssize > self.capacity:
                free = self.capacity - self.reserved_bytes()
                self._te("oom", 0, size, device_free=free)
                self.counts["num_ooms"] += 1
                raise RuntimeError("CUDA out of memory (torch double): tried to allocate %d "
                                   "bytes" % size)
            seg = Segment(self.next_addr, ssize, kind)
            self.next_addr += ssize + (4 << 20)  # a gap, as between real cudaMalloc ranges
            self.segments[seg.addr] = seg
            self.counts["segment.all.allocated"] += 1
            self._te("segment_alloc", seg.addr, ssize)
            addr = seg.addr
        b = Block(addr, size, n, seg)
        b.frames = self._frames()
        seg.blocks[addr] = b
        self.counts["allocation.all.allocated"] += 1
        self._te("alloc", addr, size, b.frames)
        return b

    def _malloc_expandable(self, n, size):
        seg = self.exp
        if seg is None:
            seg = self.exp = Segment(self.next_addr, 0, "large", expandable=True)
            self.next_addr += 1 << 40  # the reservation
        addr = seg.fit(size) if seg.size else None
        if addr is None:
            cursor = seg.end_of_blocks()
            need = cursor + size - (seg.addr + seg.size)
            need = (need + LARGE_ROUND - 1) // LARGE_ROUND * LARGE_ROUND
            if self.reserved_bytes() + need > self.capacity:
                self._te("oom", 0, size, device_free=self.capacity - self.reserved_bytes())
                self.counts["num_ooms"] += 1
                raise RuntimeError("CUDA out of memory (torch double)")
            self._te("segment_map", seg.addr + seg.size, need)
            seg.size += need
            self.segments[seg.addr] = seg
            addr = cursor
        b = Block(addr, size, n, seg)
        b.frames = self._frames()
        seg.blocks[addr] = b
        self.counts["allocation.all.allocated"] += 1
        self._te("alloc", addr, size, b.frames)
        return b

    def free(self, b):
        self._te("free_requested", b.addr, b.size)
        del b.seg.blocks[b.addr]
        self.counts["allocation.all.freed"] += 1
        self._te("free_completed", b.addr, b.size)

    def empty_cache(self):
        for a in sorted(self.segments):
            s = self.segments[a]
            if s.expandable:
                tail = (s.addr + s.size - s.end_of_blocks()) // LARGE_ROUND * LARGE_ROUND
                if tail:
                    self._te("segment_unmap", s.addr + s.size - tail, tail)
                    s.size -= tail
                if not s.size:
                    del self.segments[a]
                continue
            if not s.blocks:
                del self.segments[a]
                self.counts["segment.all.freed"] += 1
                self._te("segment_free", a, s.size)

    def stats(self):
        st = dict(self.counts)
        st["allocated_bytes.all.current"] = self.allocated_bytes()
        st["reserved_bytes.all.current"] = self.reserved_bytes()
        return st

    def snapshot(self):
        self._te("snapshot")
        segs = []
        for a in sorted(self.segments):
            s = self.segments[a]
            blocks, cursor = [], s.addr
            for ba in sorted(s.blocks):
                b = s.blocks[ba]
                if ba > cursor:
                    blocks.append({"address": cursor, "size": ba - cursor, "requested_size": 0,
                                   "state": "inactive", "frames": []})
                blocks.append({"address": ba, "size": b.size, "requested_size": b.requested,
                               "state": "active_allocated", "frames": b.frames})
                cursor = ba + b.size
            if cursor < s.addr + s.size:
                blocks.append({"address": cursor, "size": s.addr + s.size - cursor,
                               "requested_size": 0, "state": "inactive", "frames": []})
            segs.append({"device": 0, "address": s.addr, "total_size": s.size, "stream": 0,
                         "segment_type": s.kind, "segment_pool_id": (0, 0),
                         "is_expandable": s.expandable,
                         "allocated_size": sum(b.size for b in s.blocks.values()),
                         "active_size": sum(b.size for b in s.blocks.values()),
                         "blocks": blocks})
        return {"segments": segs,
                "device_traces": [self.trace.entries() if self.trace else []],
                "external_annotations": self.notes.entries() if self.notes else []}
