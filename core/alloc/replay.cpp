#include "replay.h"

#include "replay_clock.h"

#include "core/event_sink.h"
#include "core/store/ingest.h"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <map>
#include <unordered_map>

namespace fs::alloc {

bool parsePolicy(const std::string& name, Policy& out)
{
    if (name == "pytorch")
        out = Policy::PyTorch;
    else if (name == "tiered")
        out = Policy::Tiered;
    else
        return false;
    return true;
}

const char* policyName(Policy p)
{
    return p == Policy::Tiered ? "tiered" : "pytorch";
}

namespace {

constexpr uint64_t kGranule = 2ull << 20;

// cudaMalloc as the recording saw it: each new segment gets the address its recorded counterpart
// got while the sizes agree and the range is free in this run; after the first disagreement,
// plain first-fit above every recorded address. While the replay follows the recording, the
// clock may refuse a request as the recorded device did (replay_clock.h).
class RecordedDevice : public SimpleDevice
{
public:
    RecordedDevice(const DeviceTrace& d, uint64_t capacity, bool useRecorded, ReplayClock& clock)
        : SimpleDevice(capacity == 0 ? kNoLimit : capacity, baseAbove(d)), d_(d),
          useRecorded_(useRecorded), clock_(clock)
    {
    }
    uint64_t malloc(uint64_t size, uint64_t reserved) override
    {
        if (!canMap(size, reserved)) return 0;
        while (next_ < d_.segments.size() && d_.segments[next_].expandable)
            ++next_;
        uint64_t addr = 0;
        created = kNoSegment;
        if (useRecorded_ && !diverged_ && next_ < d_.segments.size() &&
            d_.segments[next_].size == size && isFree(d_.segments[next_].address, size)) {
            created = static_cast<uint32_t>(next_);
            addr = d_.segments[next_++].address;
        } else {
            if (!diverged_) divergedAt = static_cast<int64_t>(next_);
            diverged_ = true;
            addr = place(size);
        }
        live_[addr] = {size, created};
        return addr;
    }
    void free(uint64_t addr, uint64_t size) override
    {
        auto it = live_.find(addr);
        freed = it != live_.end() ? it->second.second : kNoSegment;
        if (it != live_.end()) live_.erase(it);
        if (addr >= fallbackBase_) SimpleDevice::free(addr, size);
    }
    bool canMap(uint64_t bytes, uint64_t reserved) override
    {
        return !clock_.refuse(reserved, bytes) && SimpleDevice::canMap(bytes, reserved);
    }
    uint64_t reserveAddressSpace(uint64_t size) override
    {
        for (; nextVmm_ < d_.segments.size(); ++nextVmm_) {
            const RecordedSegment& r = d_.segments[nextVmm_];
            if (r.expandable && useRecorded_ && r.size >= size && isFree(r.address, size)) {
                ++nextVmm_;
                live_[r.address] = {size, kNoSegment};
                return r.address;
            }
        }
        const uint64_t a = place((size + kGranule - 1) / kGranule * kGranule);
        live_[a] = {size, kNoSegment};
        return a;
    }
    int64_t divergedAt = -1;
    // The recorded segment (DeviceTrace::segments index) of the last segment created and of the
    // last one freed; kNoSegment: placed elsewhere.
    uint32_t created = kNoSegment;
    uint32_t freed = kNoSegment;

private:
    static uint64_t baseAbove(const DeviceTrace& d)
    {
        uint64_t top = 0x7f0000000000ULL;
        for (const RecordedSegment& r : d.segments)
            top = std::max(top, r.address + r.size);
        for (const RecordedAlloc& a : d.allocs)
            top = std::max(top, a.address + a.size);
        return (top + (1ull << 30)) / kGranule * kGranule;
    }
    bool isFree(uint64_t addr, uint64_t size) const
    {
        auto it = live_.upper_bound(addr);
        if (it != live_.end() && it->first < addr + size) return false;
        if (it != live_.begin() && std::prev(it)->first + std::prev(it)->second.first > addr)
            return false;
        return true;
    }
    const DeviceTrace& d_;
    bool useRecorded_;
    ReplayClock& clock_;
    bool diverged_ = false;
    size_t next_ = 0;
    size_t nextVmm_ = 0;
    uint64_t fallbackBase_ = baseAbove(d_);
    std::map<uint64_t, std::pair<uint64_t, uint32_t>> live_; // address -> size, recorded segment
};

// Several allocators (the tiers) on one device: the capacity check sees their sum.
class SharedDevice : public DeviceMemory
{
public:
    SharedDevice(DeviceMemory& inner, const std::vector<CachingAllocator*>& all)
        : inner_(inner), all_(all)
    {
    }
    uint64_t malloc(uint64_t size, uint64_t) override { return inner_.malloc(size, total()); }
    void free(uint64_t addr, uint64_t size) override { inner_.free(addr, size); }
    uint64_t reserveAddressSpace(uint64_t size) override
    {
        return inner_.reserveAddressSpace(size);
    }
    bool canMap(uint64_t bytes, uint64_t) override { return inner_.canMap(bytes, total()); }
    uint64_t totalMemory() const override { return inner_.totalMemory(); }

private:
    uint64_t total() const
    {
        uint64_t t = 0;
        for (const CachingAllocator* a : all_)
            t += a->counters().reserved;
        return t;
    }
    DeviceMemory& inner_;
    const std::vector<CachingAllocator*>& all_;
};

// Turns segment changes into session events (when a sink is given) at the times the clock gives
// them, and records segment sizes and events.
class EventOut : public Listener
{
public:
    EventOut(EventSink* sink, uint32_t device, DeviceReplay& out, ReplayClock& clock,
             const RecordedDevice& dev)
        : sink_(sink), device_(device), out_(out), clock_(clock), dev_(dev)
    {
    }
    int64_t now = 0;
    void segmentCreated(const Segment& s) override
    {
        int64_t t = now; // an expandable segment's reservation is address space, no event
        if (!s.expandable) {
            t = clock_.created(dev_.created);
            out_.segmentSizes.push_back(s.size);
            record(SegmentEvent::Create, s.addr, s.size, t);
        }
        region(EventType::RegionCreate, s.addr, s.size, s.stream, s.expandable, t);
    }
    void segmentReleased(const Segment& s) override
    {
        int64_t t = now;
        if (!s.expandable) {
            t = clock_.released(dev_.freed, s.size);
            record(SegmentEvent::Release, s.addr, s.size, t);
        }
        region(EventType::RegionDestroy, s.addr, s.size, s.stream, s.expandable, t);
    }
    void mapped(const Segment& s, uint64_t addr, uint64_t size) override
    {
        const int64_t t = clock_.mapped(size);
        out_.segmentSizes.push_back(size);
        record(SegmentEvent::Map, addr, size, t);
        region(EventType::RegionMap, addr, size, s.stream, true, t);
    }
    void unmapped(const Segment& s, uint64_t addr, uint64_t size) override
    {
        const int64_t t = clock_.unmapped(size);
        record(SegmentEvent::Unmap, addr, size, t);
        region(EventType::RegionUnmap, addr, size, s.stream, true, t);
    }
    // A free that waited on stream events completed (its recorded completion, or a synchronize):
    // the replayed session keeps the wait as a pending_frees row, as the importer does.
    void freeCompleted(const Block& b) override { pendingFree(b, now); }
    void pendingFree(const Block& b, int64_t end)
    {
        if (!sink_ || b.user == 0 || !trace_) return;
        Event e;
        e.type = EventType::PendingFree;
        e.time = trace_->allocs[b.user - 1].freeNs;
        e.endTime = end;
        e.address = b.addr;
        e.size = b.size;
        e.level = Level::Framework;
        e.stream = b.stream;
        e.device = device_;
        sink_->add(e);
    }
    const DeviceTrace* trace_ = nullptr;
    void oom(uint64_t requested, uint32_t stream, uint64_t deviceFree) override
    {
        if (!sink_) return;
        Event e;
        e.type = EventType::Oom;
        e.time = now;
        e.size = requested;
        e.aux = deviceFree;
        e.level = Level::Framework;
        e.stream = stream;
        e.device = device_;
        sink_->add(e);
    }

private:
    void record(SegmentEvent::Kind kind, uint64_t addr, uint64_t size, int64_t t)
    {
        SegmentEvent e;
        e.time = t;
        e.address = addr;
        e.size = size;
        e.kind = kind;
        out_.segmentEvents.push_back(e);
    }
    void region(EventType type, uint64_t addr, uint64_t size, uint32_t stream, bool vmm, int64_t t)
    {
        if (!sink_) return;
        Event e;
        e.type = type;
        e.time = t;
        e.address = addr;
        e.size = size;
        e.level = Level::Framework;
        e.regionKind = vmm ? RegionKind::Vmm : RegionKind::Segment;
        e.flags = vmm ? 1 : 0;
        e.stream = stream;
        e.device = device_;
        sink_->add(e);
    }
    EventSink* sink_;
    uint32_t device_;
    DeviceReplay& out_;
    ReplayClock& clock_;
    const RecordedDevice& dev_;
};

// Experimental lifetime-tiered pools: three allocators whose large segments are rounded to 4 MiB,
// 64 MiB and 512 MiB. A request goes to the tier its (requested size, stream) class earned from
// allocations freed in earlier frames: freed in the frame it was made -> tier 0, within 3 frames
// -> tier 1, later -> tier 2; a class not seen freed yet goes to tier 1. Frames are the
// session's, else one-second windows. What is learned in a frame is used from the next frame on:
// nothing is read from the future, nor from the frame being replayed.
class Tiers
{
public:
    static constexpr std::array<uint64_t, 3> kGranularity = {4ull << 20, 64ull << 20, 512ull << 20};
    Tiers(const Trace& t, const DeviceTrace& d) : trace_(t), d_(d), tierOf_(d.allocs.size(), 1) {}
    uint8_t pick(uint32_t index, int64_t now)
    {
        const int64_t frame = frameOf(now);
        if (frame != frame_) { // a new frame: what the previous ones taught applies now
            for (const auto& [k, tier] : pending_)
                learned_[k] = tier;
            pending_.clear();
            frame_ = frame;
        }
        auto it = learned_.find(key(d_.allocs[index]));
        return it == learned_.end() ? 1 : it->second;
    }
    void remember(uint32_t index, uint8_t tier) { tierOf_[index] = tier; }
    uint8_t tierOf(uint32_t index) const { return tierOf_[index]; }
    void freed(uint32_t index, int64_t now)
    {
        const RecordedAlloc& a = d_.allocs[index];
        const int64_t span = frameOf(now) - frameOf(a.allocNs);
        pending_.emplace_back(key(a), span <= 0 ? 0 : (span <= 3 ? 1 : 2));
    }

private:
    static uint64_t key(const RecordedAlloc& a) { return a.requested * 64 + (a.stream & 63); }
    int64_t frameOf(int64_t t) const
    {
        if (trace_.frames.empty()) return trace_.ordinalTime ? t / 1000 : t / 1'000'000'000;
        auto it = std::upper_bound(trace_.frames.begin(), trace_.frames.end(), t,
                                   [](int64_t v, const Frame& f) { return v < f.start; });
        return it == trace_.frames.begin() ? -1 : std::prev(it)->index;
    }
    const Trace& trace_;
    const DeviceTrace& d_;
    std::vector<uint8_t> tierOf_;
    std::unordered_map<uint64_t, uint8_t> learned_;
    std::vector<std::pair<uint64_t, uint8_t>> pending_; // learned in the current frame
    int64_t frame_ = INT64_MIN;
};

DeviceReplay replayDevice(const Trace& trace, const DeviceTrace& d, const ReplayOptions& o,
                          bool markers)
{
    DeviceReplay out;
    out.device = d.device;
    out.addresses.assign(d.allocs.size(), 0);
    out.blockSizes.assign(d.allocs.size(), 0);
    auto cap = o.deviceCapacity.find(d.device);
    const uint64_t capacity = cap != o.deviceCapacity.end() ? cap->second : o.capacity;
    ReplayClock clock(d);
    RecordedDevice dev(d, capacity, o.recordedAddresses, clock);
    EventOut listener(o.sink, d.device, out, clock, dev);
    listener.trace_ = &d;
    // garbage_collection_threshold is a fraction of the per-process limit: the capacity.
    const uint64_t gcLimit = o.config.gcThreshold > 0 ? capacity : 0;
    std::vector<const Marker*> marks;
    if (markers && o.sink && o.emitMarkers) {
        // Quality metrics ("metric NAME=VALUE" marks) are the recorded run's, not the replay's:
        // a what-if cannot know how its frames would have looked, so they stay out.
        std::vector<std::pair<std::string, double>> metrics;
        int64_t frame = 0;
        for (const Marker& m : trace.markers)
            if (!parseMetricMessage(m.message, metrics, frame)) marks.push_back(&m);
        std::stable_sort(marks.begin(), marks.end(),
                         [](const Marker* a, const Marker* b) { return a->time < b->time; });
    }
    size_t nextMark = 0;
    auto emitMarks = [&](int64_t upTo) {
        for (; nextMark < marks.size() && marks[nextMark]->time <= upTo; ++nextMark) {
            const Marker& m = *marks[nextMark];
            Event e;
            e.type = m.end >= 0 ? EventType::Range : EventType::Mark;
            e.time = m.time;
            e.endTime = m.end >= 0 ? m.end : 0;
            e.name = o.sink->intern(m.message);
            o.sink->add(e);
        }
    };

    std::vector<std::unique_ptr<CachingAllocator>> models;
    std::vector<CachingAllocator*> raw;
    SharedDevice shared(dev, raw);
    std::unique_ptr<Tiers> tiers;
    if (o.policy == Policy::Tiered) {
        tiers = std::make_unique<Tiers>(trace, d);
        for (uint64_t g : Tiers::kGranularity) {
            Config c = o.config;
            c.largeSegmentGranularity = g;
            models.push_back(std::make_unique<CachingAllocator>(c, shared, &listener, gcLimit));
            raw.push_back(models.back().get());
        }
    } else {
        models.push_back(std::make_unique<CachingAllocator>(o.config, dev, &listener, gcLimit));
        raw.push_back(models.back().get());
    }

    std::vector<Block*> live(d.allocs.size(), nullptr);
    std::unordered_map<uint32_t, StringId> tagIds;
    EventSink* sink = o.sink;
    auto tagOf = [&](uint32_t src) -> StringId {
        if (!sink || src == 0 || src >= trace.strings.size()) return kNoString;
        auto [it, inserted] = tagIds.emplace(src, kNoString);
        if (inserted) it->second = sink->intern(trace.strings[src]);
        return it->second;
    };
    std::unordered_map<uint32_t, StackId> stackIds;
    auto stackOf = [&](uint32_t src) -> StackId {
        if (!sink || !o.carryStacks || src == 0) return kNoStack;
        auto [it, inserted] = stackIds.emplace(src, kNoStack);
        if (inserted) {
            auto frames = trace.stacks.find(src);
            if (frames == trace.stacks.end()) return kNoStack;
            std::vector<StringId> ids;
            ids.reserve(frames->second.size());
            for (uint32_t f : frames->second)
                ids.push_back(f < trace.strings.size() ? sink->intern(trace.strings[f])
                                                       : kNoString);
            it->second = sink->internStack(ids);
        }
        return it->second;
    };
    auto stringOf = [&](uint32_t src) -> uint64_t { return o.carryStacks ? tagOf(src).value : 0; };
    uint64_t peak = 0;
    uint32_t sinceCheck = 0;
    // The recorded run's findings on bursts right before a cudaMalloc (or the replay's own).
    const std::vector<uint32_t>* resolved = nullptr;
    if (o.emptyCacheFirst) {
        auto it = o.emptyCacheFirst->find(d.device);
        static const std::vector<uint32_t> none;
        resolved = it != o.emptyCacheFirst->end() ? &it->second : &none;
    }
    size_t nextResolved = 0;
    auto emptyCache = [&](bool beforeMalloc) {
        for (CachingAllocator* m : raw)
            m->emptyCache();
        clock.emptyCache(beforeMalloc);
    };
    bool lateEmptyCache = false; // ReplayOptions::lateEmptyCache: one request to go
    for (size_t i = 0; i < d.requests.size(); ++i) {
        const Request& r = d.requests[i];
        if (o.cancel && ++sinceCheck == 65536) {
            sinceCheck = 0;
            if (o.cancel->load(std::memory_order_relaxed)) throw Cancelled{};
        }
        emitMarks(r.time);
        listener.now = r.time;
        clock.begin(i);
        const int32_t pool =
            o.poolMerge && r.pool >= 0 && static_cast<size_t>(r.pool) < o.poolMerge->size()
                ? (*o.poolMerge)[static_cast<size_t>(r.pool)]
                : r.pool;
        switch (r.kind) {
        case Request::Alloc: {
            uint8_t tier = 0;
            if (tiers && r.index != kFailedRequest) {
                tier = tiers->pick(r.index, r.time);
                tiers->remember(r.index, tier);
            }
            // Segments released right before this cudaMalloc in the recording: an empty_cache()
            // just before it when the model could serve the request from its cache (a
            // free-and-retry would not have happened), else its own free-and-retry or garbage
            // collection, which the clock's refusals reproduce.
            if (r.flags & Request::kReleasedFirst) {
                bool first = false;
                if (resolved) {
                    while (nextResolved < resolved->size() && (*resolved)[nextResolved] < i)
                        ++nextResolved;
                    first = nextResolved < resolved->size() && (*resolved)[nextResolved] == i;
                } else {
                    first = raw[tier]->canReuse(r.size, r.stream, pool);
                }
                if (first) {
                    out.emptyCacheFirst.push_back(static_cast<uint32_t>(i));
                    emptyCache(true);
                }
            }
            if (r.index == kFailedRequest) { // failed when recorded: if it fits now, the
                Block* b = raw[0]->malloc(r.size, r.stream, pool); // program never used it
                if (b) raw[0]->free(b);
                break;
            }
            Block* b = raw[tier]->malloc(r.size, r.stream, pool);
            live[r.index] = b;
            if (!b) break;
            out.addresses[r.index] = b->addr;
            out.blockSizes[r.index] = b->size;
            if (sink) {
                Event e;
                e.type = EventType::Alloc;
                e.time = r.time;
                e.address = b->addr;
                e.size = b->size;
                e.requestedSize = r.size;
                e.level = Level::Framework;
                e.stream = r.stream;
                e.device = d.device;
                const RecordedAlloc& ra = d.allocs[r.index];
                e.name = tagOf(ra.tag);
                e.aux = stackOf(ra.stack).value;
                e.aux2 = stringOf(ra.userMetadata) | stringOf(ra.compileContext) << 32;
                sink->add(e);
            }
            break;
        }
        case Request::Free: {
            Block* b = live[r.index];
            if (!b) break; // its allocation failed in this run
            if (sink) {
                Event e;
                e.type = EventType::Free;
                e.time = r.time;
                e.address = b->addr;
                e.size = b->size;
                e.level = Level::Framework;
                e.stream = b->stream;
                e.device = d.device;
                sink->add(e);
            }
            const uint8_t tier = tiers ? tiers->tierOf(r.index) : 0;
            if (d.allocs[r.index].freeCompletedNs != kNoWait) {
                // Rule 12: back to the pool when the wait completes (FreeCompleted below, or a
                // synchronize when cached blocks are released). The index tells the
                // completion that this block is still the one it waits for.
                b->user = r.index + 1ull;
                raw[tier]->freeRequested(b);
            } else {
                raw[tier]->free(b);
                live[r.index] = nullptr;
            }
            if (tiers) tiers->freed(r.index, r.time);
            break;
        }
        case Request::FreeCompleted: {
            Block* b = live[r.index];
            live[r.index] = nullptr;
            // Already back in its pool when a synchronize (free-and-retry, empty_cache) came first.
            if (!b || !b->pending || b->user != r.index + 1ull) break;
            raw[tiers ? tiers->tierOf(r.index) : 0]->completeFree(b);
            break;
        }
        case Request::EmptyCache:
            if (o.lateEmptyCache)
                lateEmptyCache = true;
            else
                emptyCache(false);
            break;
        }
        if (lateEmptyCache && r.kind != Request::EmptyCache) {
            lateEmptyCache = false;
            emptyCache(false);
        }
        clock.end();
        if (raw.size() == 1) continue;
        uint64_t total = 0;
        for (const CachingAllocator* m : raw)
            total += m->counters().reserved;
        peak = std::max(peak, total);
    }
    emitMarks(INT64_MAX);
    // Waits still pending at the end: open pending_frees rows.
    for (size_t i = 0; i < live.size(); ++i)
        if (live[i] && live[i]->pending && live[i]->user == i + 1)
            listener.pendingFree(*live[i], kNoTime);
    out.requests = static_cast<int64_t>(d.requests.size());
    for (const CachingAllocator* m : raw) {
        const Counters& c = m->counters();
        Counters& s = out.counters;
        s.allocs += c.allocs;
        s.frees += c.frees;
        s.cudaMallocs += c.cudaMallocs;
        s.cudaFrees += c.cudaFrees;
        s.ooms += c.ooms;
        s.retries += c.retries;
        s.cacheFlushes += c.cacheFlushes;
        s.gcReleases += c.gcReleases;
        s.reserved += c.reserved;
        s.allocated += c.allocated;
        s.peakReserved = std::max(s.peakReserved, c.peakReserved);
        s.peakAllocated += c.peakAllocated;
        s.liveBlocks += c.liveBlocks;
        s.liveSegments += c.liveSegments;
        s.pendingBlocks += c.pendingBlocks;
        s.syncedFrees += c.syncedFrees;
        for (const Segment* seg : m->segments()) {
            if (!seg->expandable) out.finalSegments.emplace_back(seg->addr, seg->size);
            for (const Block* b = m->firstBlock(*seg); b; b = b->next)
                if (b->allocated) out.finalBlocks.emplace_back(b->addr, b->size);
        }
    }
    out.peakReserved = raw.size() == 1 ? out.counters.peakReserved : peak;
    out.taken = clock.taken();
    out.followed = clock.following();
    out.usableMark = clock.usableMark();
    std::sort(out.finalSegments.begin(), out.finalSegments.end());
    std::sort(out.finalBlocks.begin(), out.finalBlocks.end());
    out.firstAddressDivergence = dev.divergedAt;
    return out;
}

} // namespace

std::vector<DeviceReplay> replay(const Trace& trace, const ReplayOptions& opts)
{
    std::vector<DeviceReplay> out;
    for (const DeviceTrace& d : trace.devices)
        out.push_back(replayDevice(trace, d, opts, out.empty()));
    return out;
}

} // namespace fs::alloc
