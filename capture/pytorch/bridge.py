# fragscope's PyTorch bridge: the Python half, run by the agent (libfragscope-inject.so) inside
# the target's own interpreter, on the agent's bridge thread, holding the GIL it took with
# PyGILState_Ensure. It never runs inside the caching allocator: it reads what the allocator
# recorded through torch.cuda.memory's public history API and hands it to the C++ half as packed
# records (docs/capture.md, "PyTorch blocks"). Events follow the conventions of the snapshot
# importer: segments are framework-level regions (kind segment, named small/large, aux = pool
# id), blocks are framework-level allocations, a block is freed at free_completed, streams are
# numbered densely from 1 in order of first sight (0 is the default stream).
import struct
import sys
from time import perf_counter_ns as _perf_ns

_STR = struct.Struct("<cII")
_STACK = struct.Struct("<cII")
_EVENT = struct.Struct("<cBBHIQQQQqqIIB")
_HEALTH = struct.Struct("<cqIIq")
_META = struct.Struct("<cII")
_LOG = struct.Struct("<cI")

# Event types, levels and region kinds of the capture stream (capture/protocol/protocol.h).
REGION_CREATE, REGION_DESTROY, REGION_MAP, REGION_UNMAP, ALLOC, FREE = 0, 1, 2, 3, 4, 5
MARK, RANGE, OOM = 8, 9, 10
KIND_SEGMENT, KIND_VMM = 0, 2
SMALL_SEGMENT = 2 << 20  # PyTorch's small pool segments are 2 MiB (as the importer infers)
TAIL = 8  # entries remembered to find the last one taken in a wrapped ring buffer
COUNTED = ("alloc", "free_completed", "segment_alloc", "segment_free")
STAT_KEYS = {
    "alloc": "allocation.all.allocated",
    "free_completed": "allocation.all.freed",
    "segment_alloc": "segment.all.allocated",
    "segment_free": "segment.all.freed",
}
MIN_VERSION = (2, 1)


def _version(text):
    parts = []
    for p in str(text).split("+")[0].split(".")[:2]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 2:
        parts.append(0)
    return tuple(parts)


def _fp(e):
    return (e.get("action"), e.get("addr"), e.get("size"), e.get("stream"), e.get("time_us"))


def _afp(a):
    return (a.get("stage"), a.get("name"), a.get("device"), a.get("time_us"))


class Ring:
    """Position of the bridge in one of the allocator's ring buffers (a device's trace, or the
    annotations). Entries come oldest first; once the buffer is full each new entry overwrites
    the oldest, so the last entry taken is found again by its fingerprint (with the TAIL entries
    before it) and everything after it is new. When it is gone the bridge was too late."""

    def __init__(self, fp):
        self.fp = fp
        self.tail = []
        self.length = 0

    def skip(self, entries):
        self.length = len(entries)
        self.tail = [self.fp(e) for e in entries[-TAIL:]]

    def new(self, entries, capacity):
        """(first new index, lost): lost is True when entries were overwritten before now."""
        n = len(entries)
        if not self.tail:
            return 0, False
        if n < capacity and self.length <= n and self.fp(entries[self.length - 1]) == self.tail[-1]:
            return self.length, False  # not wrapped: positions are stable
        # Wrapped. Entries come in time order, so the last one taken is first looked for among
        # those of its time (a binary search), before the scan of every entry from the end; a
        # fingerprint carries its time last.
        t = self.tail[-1][-1]
        if t is not None:
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) // 2
                tm = entries[mid].get("time_us")
                if tm is None:
                    break
                if tm <= t:
                    lo = mid + 1
                else:
                    hi = mid
            else:
                j = lo - 1
                while j >= 0 and entries[j].get("time_us") == t:
                    if self.ends_at(entries, j):
                        return j + 1, False
                    j -= 1
        j = self.scan(entries)
        return (j + 1, False) if j >= 0 else (0, True)

    def scan(self, entries):
        """Index of the last entry taken, scanning every entry from the end; -1 when gone."""
        for j in range(len(entries) - 1, -1, -1):
            if self.ends_at(entries, j):
                return j
        return -1

    def ends_at(self, entries, j):
        """Whether the last entry taken, and the TAIL entries before it, end at entries[j]."""
        if self.fp(entries[j]) != self.tail[-1]:
            return False
        k, i = len(self.tail) - 2, j - 1
        while k >= 0 and i >= 0 and self.fp(entries[i]) == self.tail[k]:
            k -= 1
            i -= 1
        return k < 0 or i < 0


class Bridge:
    def __init__(self, max_entries=32768, stacks="none", max_wait=1.0):
        self.max_entries = max(16, int(max_entries))
        self.max_wait = float(max_wait)  # seconds: the longest a new entry waits for a drain
        self.fallback_wait = min(self.max_wait, 0.1)  # without counters: drain this often
        self.last_drain = 0.0
        self.counted_at_drain = 0
        self.stacks = stacks  # none | python | all
        self.out = []
        self.strings = {}
        self.stack_ids = {}
        self.enabled = False
        self.gave_up = False
        self.stopped = False
        self.stopping = False
        self.streams = {}
        self.rings = {}
        self.notes = Ring(_afp)
        self.open_ranges = {}
        self.note_device = None
        self.live = {}  # device -> {block address: size}
        self.segs = {}  # device -> {segment address: size}
        self.pieces = {}  # device -> {mapped address: size} (expandable segments)
        self.reserved = {}  # device -> {reservation address: size}
        self.taken = {}  # device -> {action: count}
        self.stats0 = {}
        self.lost = 0
        self.lost_on = {}
        self.corrections = 0
        self.drained = 0
        self.drains = 0
        self.snapshot_ns = 0
        self.preexisting = 0
        self.free_requested = 0
        self.skipped = {}
        self.last_ns = 0
        self.polled = False
        self.repairing = False
        self._snap, self._snap_segs = {}, None
        self.pid = __import__("os").getpid()

    # -- packed records (read by capture/pytorch/bridge_decode.cpp) --
    def sid(self, text):
        if not text:
            return 0
        i = self.strings.get(text)
        if i is None:
            i = len(self.strings) + 1
            self.strings[text] = i
            b = text.encode("utf-8", "replace")
            self.out.append(_STR.pack(b"S", i, len(b)) + b)
        return i

    def stack(self, frames):
        if not frames or self.stacks == "none":
            return 0
        key = tuple((f.get("filename", ""), f.get("line", 0), f.get("name", "")) for f in frames)
        i = self.stack_ids.get(key)
        if i is None:
            ids = [self.sid("%s (%s:%s)" % (n, fn, ln)) for fn, ln, n in key]
            i = len(self.stack_ids) + 1
            self.stack_ids[key] = i
            self.out.append(_STACK.pack(b"K", i, len(ids)) + struct.pack("<%dI" % len(ids), *ids))
        return i

    def event(self, t, dev, ns, addr=0, size=0, aux=0, stream=0, name=0, kind=0, end=0,
              stack=0, flags=0, requested=0):
        self.out.append(_EVENT.pack(b"E", t, kind, dev, stream, addr, size, aux, requested, ns,
                                    end, name, stack, flags))

    def log(self, text):
        b = text.encode("utf-8", "replace")
        self.out.append(_LOG.pack(b"L", len(b)) + b)

    def meta(self, key, value):
        self.out.append(_META.pack(b"M", self.sid(key), self.sid(str(value))))

    def health(self, value, kind, detail, ns):
        self.out.append(_HEALTH.pack(b"H", value, self.sid(kind), self.sid(detail), ns))

    def take(self, status):
        data = status + b"".join(self.out)
        self.out = []
        return data

    # -- the allocator's state --
    def stream_id(self, raw):
        if not raw:
            return 0
        i = self.streams.get(raw)
        if i is None:
            i = len(self.streams) + 1
            self.streams[raw] = i
        return i

    def region(self, dev, ns, addr, size, stream, pool, seg_type):
        if not seg_type:
            seg_type = "small" if size <= SMALL_SEGMENT else "large"
        self.event(REGION_CREATE, dev, ns, addr, size, pool, self.stream_id(stream),
                   self.sid(seg_type), KIND_SEGMENT)
        self.segs.setdefault(dev, {})[addr] = size

    def unregion(self, dev, ns, addr, size):
        self.event(REGION_DESTROY, dev, ns, addr, size)
        self.segs.setdefault(dev, {}).pop(addr, None)

    def map(self, dev, ns, addr, size):
        res = self.reserved.setdefault(dev, {})
        inside = any(a <= addr and addr + size <= a + s for a, s in res.items())
        if not inside:
            # The reservation behind an expandable segment is not in the trace: each mapping
            # seen outside a known one gets its own (docs/capture.md, limits).
            self.event(REGION_CREATE, dev, ns, addr, size, 0, 0, self.sid("expandable"),
                       KIND_VMM, flags=1)
            res[addr] = size
        self.event(REGION_MAP, dev, ns, addr, size)
        self.pieces.setdefault(dev, {})[addr] = size

    def unmap(self, dev, ns, addr, size):
        pieces = self.pieces.setdefault(dev, {})
        end = addr + size
        for a, s in sorted(pieces.items()):
            if a < end and a + s > addr:
                self.event(REGION_UNMAP, dev, ns, a, s)
                del pieces[a]
                if a < addr:
                    self.event(REGION_MAP, dev, ns, a, addr - a)
                    pieces[a] = addr - a
                if a + s > end:
                    self.event(REGION_MAP, dev, ns, end, a + s - end)
                    pieces[end] = a + s - end

    def alloc(self, dev, ns, addr, size, stream, requested=0, frames=None):
        self.event(ALLOC, dev, ns, addr, size, 0, self.stream_id(stream),
                   stack=self.stack(frames), requested=requested)
        self.live.setdefault(dev, {})[addr] = size

    def free(self, dev, ns, addr, size, stream):
        self.event(FREE, dev, ns, addr, size, 0, self.stream_id(stream))
        self.live.setdefault(dev, {}).pop(addr, None)

    def state_of(self, snap):
        """(segments, blocks, pieces) per device from a snapshot's 'segments'."""
        segs, blocks, pieces = {}, {}, {}
        for s in snap.get("segments", []):
            dev = int(s.get("device", 0))
            addr, size = int(s["address"]), int(s["total_size"])
            pool = s.get("segment_pool_id") or (0, 0)
            info = (size, s.get("stream", 0), ((int(pool[0]) << 32) | (int(pool[1]) & 0xFFFFFFFF)),
                    s.get("segment_type"))
            if s.get("is_expandable"):
                pieces.setdefault(dev, {})[addr] = size
            else:
                segs.setdefault(dev, {})[addr] = info
            cursor = addr
            for b in s.get("blocks", []):
                baddr = int(b.get("address", cursor))
                bsize = int(b["size"])
                cursor = baddr + bsize
                if str(b.get("state", "")).startswith("active"):
                    blocks.setdefault(dev, {})[baddr] = (bsize, s.get("stream", 0),
                                                         int(b.get("requested_size", 0)),
                                                         b.get("frames"))
        return segs, blocks, pieces

    # -- steps --
    def check(self, torch):
        """None when this torch can be recorded, else the one message that says why not."""
        ver = getattr(torch, "__version__", "?")
        if getattr(getattr(torch, "version", None), "cuda", None) is None and \
                getattr(getattr(torch, "version", None), "hip", None) is None:
            return ("torch %s is a CPU-only build (torch.version.cuda is None): PyTorch blocks "
                    "are not recorded; the capture goes on with what the CUDA agent sees" % ver)
        if _version(ver) < MIN_VERSION:
            return ("torch %s is older than %d.%d: its memory history has no timestamps or no "
                    "string API, so PyTorch blocks are not recorded; the capture goes on with "
                    "what the CUDA agent sees" % ((ver,) + MIN_VERSION))
        mem = getattr(getattr(torch, "cuda", None), "memory", None)
        for name in ("_record_memory_history", "_snapshot"):
            if not hasattr(mem, name):
                return ("torch %s has no torch.cuda.memory.%s: PyTorch blocks are not recorded; "
                        "the capture goes on with what the CUDA agent sees" % (ver, name))
        return None

    def enable(self, torch, now_ns):
        mem = torch.cuda.memory
        kw = {"max_entries": self.max_entries}
        try:
            import inspect
            impl = getattr(mem, "_record_memory_history_impl", mem._record_memory_history)
            params = inspect.signature(impl).parameters
        except (TypeError, ValueError):
            params = {}
        if "global_record_annotations" in params:
            kw["global_record_annotations"] = True  # record_function ranges from every thread
        ctx = None if self.stacks == "none" else "alloc"
        mem._record_memory_history("all", context=ctx,
                                   stacks="all" if self.stacks == "all" else "python", **kw)
        self.enabled = True
        snap = mem._snapshot()
        segs, blocks, pieces = self.state_of(snap)
        ns = now_ns
        for dev, d in sorted(segs.items()):
            for addr, (size, stream, pool, stype) in sorted(d.items()):
                self.region(dev, ns, addr, size, stream, pool, stype)
        for dev, d in sorted(pieces.items()):
            for addr, size in sorted(d.items()):
                self.map(dev, ns, addr, size)
        for dev, d in sorted(blocks.items()):
            for addr, (size, stream, req, frames) in sorted(d.items()):
                self.alloc(dev, ns, addr, size, stream, req, frames)
                self.preexisting += 1
        if self.preexisting:
            self.event(MARK, 0, ns, name=self.sid(
                "pytorch: %d blocks alive when recording began (pre-existing)" % self.preexisting))
        traces = snap.get("device_traces") or []
        for dev, tr in enumerate(traces):
            ring = self.rings.setdefault(dev, Ring(_fp))
            ring.skip(tr)  # history before recording began: its result is the state above
        self.notes.skip(snap.get("external_annotations") or [])
        for dev in range(len(traces)):
            self.stats0[dev] = self.counters(torch, dev)
            self.taken[dev] = dict.fromkeys(COUNTED, 0)
        self.counted_at_drain = sum(sum(c.values()) for c in self.stats0.values() if c)
        self.last_drain = __import__("time").monotonic()
        self.meta("pytorch.version", getattr(torch, "__version__", "?"))
        self.meta("pytorch.bridge", "torch.cuda.memory history, max_entries=%d, stacks=%s"
                  % (self.max_entries, self.stacks))
        self.meta("pytorch.free_event", "free_completed")

    def counters(self, torch, dev):
        """The allocator's cumulative action counts (None when torch does not give them).
        torch._C._cuda_memoryStats (nested, built in C++) is far cheaper than memory_stats()."""
        raw = getattr(getattr(torch, "_C", None), "_cuda_memoryStats", None)
        if raw is not None:
            try:
                st = raw(dev)
                return {"alloc": int(st["allocation"]["all"]["allocated"]),
                        "free_completed": int(st["allocation"]["all"]["freed"]),
                        "segment_alloc": int(st["segment"]["all"]["allocated"]),
                        "segment_free": int(st["segment"]["all"]["freed"])}
            except Exception:
                pass
        try:
            st = torch.cuda.memory_stats(dev)
        except Exception:
            return None
        return {a: int(st.get(k, 0)) for a, k in STAT_KEYS.items()}

    def due(self, torch):
        """Whether to drain now. A drain costs about the whole ring (_snapshot converts every
        entry), so it waits until a third of the ring may have filled since the last one, or
        max_wait has passed with anything new; the allocator's counters say how much came (a
        counted action brings at most 1.5 entries: alloc, free_requested + free_completed)."""
        import time
        now = time.monotonic()
        total = 0
        for dev in self.stats0:
            c = self.counters(torch, dev)
            if c is None:
                total = None
                break
            total += sum(c.values())
        waited = now - self.last_drain
        if total is None:
            due = waited >= self.fallback_wait
        else:
            pending = total - self.counted_at_drain
            due = pending * 1.5 >= self.max_entries / 3 or (pending > 0 and waited >= self.max_wait)
            if due:
                self.counted_at_drain = total
        if due:
            self.last_drain = now
        return due

    def snap_segs(self):
        """(device, address) -> (size, stream, pool, type) of the current drain's snapshot."""
        if self._snap_segs is None:
            self._snap_segs = {}
            for dev, d in self.state_of(self._snap)[0].items():
                for addr, info in d.items():
                    self._snap_segs[(dev, addr)] = info
        return self._snap_segs

    def drain(self, torch, now_ns):
        t0 = _perf_ns()
        snap = torch.cuda.memory._snapshot()
        self.snapshot_ns += _perf_ns() - t0  # torch's part of a drain (the rest is ours)
        self._snap, self._snap_segs = snap, None
        self.drains += 1
        traces = snap.get("device_traces") or []
        lost_any = False
        for dev, tr in enumerate(traces):
            ring = self.rings.setdefault(dev, Ring(_fp))
            first, lost = ring.new(tr, self.max_entries)
            taken = self.taken.setdefault(dev, dict.fromkeys(COUNTED, 0))
            self.repairing = lost  # what the lost entries made may be freed by the ones left
            self.apply_all(dev, tr, first, taken)
            self.drained += len(tr) - first
            ring.skip(tr)
            if lost:
                lost_any = True
                n = 1
                base, cur = self.stats0.get(dev), self.counters(torch, dev)
                if base is not None and cur is not None:
                    missing = sum(cur[a] - base[a] for a in COUNTED) - sum(taken.values())
                    n = max(1, missing - self.lost_on.get(dev, 0))
                self.lost_on[dev] = self.lost_on.get(dev, 0) + n
                self.lost += n
                self.health(n, "dropped_records",
                            "PyTorch allocator trace entries overwritten before the bridge "
                            "drained them (device %d; raise FRAGSCOPE_PYTORCH_MAX_ENTRIES)" % dev,
                            now_ns)
        notes = snap.get("external_annotations") or []
        first, lost = self.notes.new(notes, self.max_entries)
        for a in notes[first:]:
            self.annotation(a)
        self.notes.skip(notes)
        if lost:
            self.health(1, "dropped_records",
                        "record_function annotations overwritten before the bridge drained them",
                        now_ns)
        if lost_any:
            self.reconcile(snap, now_ns)
        self._snap, self._snap_segs = {}, None  # the snapshot can be large: do not keep it

    def apply_all(self, dev, entries, first, taken):
        """The entries from first on. alloc, free_requested and free_completed (nearly all of
        a trace) take a fast path; everything else goes through apply()."""
        pack, append, last = _EVENT.pack, self.out.append, self.last_ns
        live = self.live.setdefault(dev, {})
        streams, with_stacks, repairing = self.streams, self.stacks != "none", self.repairing
        allocs = frees = requested = 0
        for i in range(first, len(entries)):
            e = entries[i]
            act = e["action"]
            t = e.get("time_us")
            ns = t * 1000 if t is not None else last
            if ns < last:
                ns = last
            last = ns
            if act == "alloc" or act == "free_completed":
                addr, size, raw = e["addr"], e["size"], e["stream"]
                sid = (streams.get(raw) or self.stream_id(raw)) if raw else 0
                if act == "alloc":
                    allocs += 1
                    stack = self.stack(e.get("frames")) if with_stacks else 0
                    append(pack(b"E", ALLOC, 0, dev, sid, addr, size, 0, 0, ns, 0, 0, stack, 0))
                    live[addr] = size
                else:
                    frees += 1
                    if repairing and addr not in live:
                        self.corrections += 1  # allocated by an entry that was lost
                        continue
                    append(pack(b"E", FREE, 0, dev, sid, addr, size, 0, 0, ns, 0, 0, 0, 0))
                    live.pop(addr, None)
            elif act == "free_requested":
                requested += 1  # the block stays allocated until free_completed
            else:
                self.last_ns = last
                self.apply(dev, e, taken)
        self.last_ns = last
        taken["alloc"] += allocs
        taken["free_completed"] += frees
        self.free_requested += requested

    def apply(self, dev, e, taken):
        act = e.get("action")
        t = e.get("time_us")
        ns = int(t) * 1000 if t is not None else self.last_ns
        if ns < self.last_ns:
            ns = self.last_ns
        self.last_ns = ns
        addr, size, stream = int(e.get("addr", 0) or 0), int(e.get("size", 0) or 0), \
            e.get("stream", 0)
        if act in taken:
            taken[act] += 1
        if act == "alloc":
            self.alloc(dev, ns, addr, size, stream, 0, e.get("frames"))
        elif act == "free_completed" or act == "free":
            if self.repairing and addr not in self.live.get(dev, {}):
                self.corrections += 1  # allocated by an entry that was lost
            else:
                self.free(dev, ns, addr, size, stream)
        elif act == "free_requested":
            self.free_requested += 1  # the block stays allocated until free_completed
        elif act == "segment_alloc":
            # The trace has no segment type and (before recent torch) no pool: take them from
            # the snapshot of this drain when the segment is still there with the same size.
            now = self.snap_segs().get((dev, addr))
            pool = e.get("pool_id")
            if pool:
                pool = (int(pool[0]) << 32) | (int(pool[1]) & 0xFFFFFFFF)
            elif now is not None and now[0] == size:
                pool = now[2]
            self.region(dev, ns, addr, size, stream, pool or 0,
                        now[3] if now is not None and now[0] == size else None)
        elif act == "segment_free":
            if self.repairing and addr not in self.segs.get(dev, {}):
                self.corrections += 1
            else:
                self.unregion(dev, ns, addr, size)
        elif act == "segment_map":
            self.map(dev, ns, addr, size)
        elif act == "segment_unmap":
            self.unmap(dev, ns, addr, size)
        elif act == "oom":
            self.event(OOM, dev, ns, 0, size, int(e.get("device_free", 0) or 0),
                       self.stream_id(stream))
        elif act == "snapshot":
            pass  # the bridge's own drains leave one each
        else:
            self.skipped[act] = self.skipped.get(act, 0) + 1

    def annotation(self, a):
        dev = int(a.get("device", 0) or 0)
        if self.note_device is None:
            self.note_device = dev
        if dev != self.note_device:
            return  # PyTorch copies each range to every device: keep one copy
        name = str(a.get("name", ""))
        ns = int(a.get("time_us", 0) or 0) * 1000
        if a.get("stage") == "START":
            self.open_ranges.setdefault(name, []).append(ns)
        else:
            starts = self.open_ranges.get(name)
            if starts:
                start = starts.pop()
                self.event(RANGE, 0, start, name=self.sid(name), end=max(ns, start))

    def reconcile(self, snap, now_ns):
        """After a loss: bring the recorded state to the snapshot's, and count the changes."""
        segs, blocks, pieces = self.state_of(snap)
        ns = max(now_ns, self.last_ns)
        for dev in set(self.live) | set(blocks):
            live, want = self.live.get(dev, {}), blocks.get(dev, {})
            for addr, size in sorted(live.items()):
                if want.get(addr, (None,))[0] != size:
                    self.free(dev, ns, addr, size, 0)
                    self.corrections += 1
        for dev in set(self.segs) | set(segs):
            have, want = self.segs.get(dev, {}), segs.get(dev, {})
            for addr, size in sorted(have.items()):
                if want.get(addr, (None,))[0] != size:
                    self.unregion(dev, ns, addr, size)
                    self.corrections += 1
            for addr, (size, stream, pool, stype) in sorted(want.items()):
                if addr not in self.segs.get(dev, {}):
                    self.region(dev, ns, addr, size, stream, pool, stype)
                    self.corrections += 1
        for dev, d in pieces.items():
            have = self.pieces.get(dev, {})
            if have != d:
                for addr, size in sorted(list(have.items())):
                    self.unmap(dev, ns, addr, size)
                for addr, size in sorted(d.items()):
                    self.map(dev, ns, addr, size)
                self.corrections += 1
        for dev, want in blocks.items():
            live = self.live.setdefault(dev, {})
            for addr, (size, stream, req, frames) in sorted(want.items()):
                if addr not in live:
                    self.alloc(dev, ns, addr, size, stream, req, frames)
                    self.corrections += 1

    def finish(self, now_ns):
        for name, starts in self.open_ranges.items():
            for start in starts:
                self.event(RANGE, 0, start, name=self.sid(name), end=max(now_ns, start))
        self.open_ranges = {}
        self.meta("pytorch.bridge_drains", self.drains)
        self.meta("pytorch.bridge_entries", self.drained)
        self.meta("pytorch.bridge_snapshot_ns", self.snapshot_ns)
        self.meta("pytorch.bridge_lost_entries", self.lost)
        self.meta("pytorch.bridge_corrections", self.corrections)
        self.meta("pytorch.preexisting_allocations", self.preexisting)
        self.meta("pytorch.free_requested", self.free_requested)
        for act, n in sorted(self.skipped.items()):
            self.meta("pytorch.skipped." + str(act), n)

    def step(self, recording, now_ns, final=False, force=False):
        """One poll from the C++ thread. The first byte says what happened: R recording,
        W waiting for torch/CUDA, I idle, X stopped for good (the rest are records)."""
        if self.gave_up or self.stopped:
            return self.take(b"X")
        final = final or self.stopping
        self.polled = bool(recording)
        torch = sys.modules.get("torch")
        try:
            if not recording or (final and not self.enabled):
                if self.enabled:
                    if torch is not None:
                        self.drain(torch, now_ns)
                        torch.cuda.memory._record_memory_history(None)
                    self.finish(now_ns)
                    pending = self.out
                    self.__init__(self.max_entries, self.stacks, self.max_wait)
                    self.out = pending
                if final:
                    self.stopped = True
                    return self.take(b"X")
                return self.take(b"I")
            if torch is None or not hasattr(torch, "cuda"):
                return self.take(b"W")
            if not self.enabled:
                why = self.check(torch)
                if why:
                    self.gave_up = True
                    self.log(why)
                    self.meta("pytorch.bridge", "off: " + why)
                    return self.take(b"X")
                if not torch.cuda.is_initialized():
                    return self.take(b"W")  # never initialise CUDA from the bridge
                self.enable(torch, now_ns)
            elif final or force or self.due(torch):
                self.drain(torch, now_ns)
            if final:
                self.finish(now_ns)
                self.stopped = True
                return self.take(b"X")
            return self.take(b"R")
        except Exception as exc:  # a torch we do not understand: say so once, stop
            self.gave_up = True
            self.log("the PyTorch bridge stopped: %s: %s" % (type(exc).__name__, exc))
            return self.take(b"X")


def _at_exit():
    # Python is shutting down: the bridge thread takes its last drain now, while the interpreter
    # is whole, and then never asks for the GIL again. Sleeping releases the GIL to it.
    import time
    b = _fragscope_bridge
    b.stopping = True
    if b.pid != __import__("os").getpid():
        return  # a forked child: the bridge thread stayed in the parent
    if not b.polled and not b.enabled:
        return  # the thread is idle: it does not ask for the GIL without a recorder
    deadline = time.monotonic() + 3.0
    while not b.stopped and not b.gave_up and time.monotonic() < deadline:
        time.sleep(0.002)
