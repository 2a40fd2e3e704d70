#include "caching_allocator.h"

#include <algorithm>
#include <vector>

namespace fs::sim {

namespace {
constexpr uint64_t kVaBase = 0x7f4a00000000ULL;
constexpr uint64_t kVaSpan = 1ULL << 42; // 4 TiB of address space, far above any capacity
} // namespace

CachingAllocator::CachingAllocator(EventWriter& out, uint64_t capacity, uint32_t device,
                                   uint64_t seed, fs::alloc::Config cfg)
    : out_(out), capacity_(capacity), device_(device), va_(kVaBase, kVaSpan, seed),
      model_(cfg, *this, this)
{
}

uint64_t CachingAllocator::roundSize(uint64_t bytes)
{
    return fs::alloc::CachingAllocator::roundSize(bytes, fs::alloc::Config{});
}

uint64_t CachingAllocator::segmentSize(uint64_t rounded)
{
    return fs::alloc::CachingAllocator::allocationSize(rounded, fs::alloc::Config{});
}

uint64_t CachingAllocator::malloc(uint64_t size, uint64_t reserved)
{
    if (reserved + external_ + size > capacity_) return 0;
    return va_.place(size);
}

void CachingAllocator::free(uint64_t addr, uint64_t size)
{
    va_.release(addr, size);
}

uint64_t CachingAllocator::reserveAddressSpace(uint64_t size)
{
    return va_.place((size + VaSpace::kGranule - 1) / VaSpace::kGranule * VaSpace::kGranule);
}

bool CachingAllocator::canMap(uint64_t bytes, uint64_t reserved)
{
    return reserved + external_ + bytes <= capacity_;
}

void CachingAllocator::segmentEvent(EventType type, const fs::alloc::Segment& s)
{
    Event e;
    e.type = type;
    e.time = now_;
    e.address = s.addr;
    e.size = s.size;
    e.level = Level::Framework;
    e.regionKind = RegionKind::Segment;
    e.stream = s.stream;
    e.device = device_;
    e.aux = sessionPools_[static_cast<size_t>(s.poolId)]; // regions.pool_id; 0: default pool
    out_.emit(e, Name{});
}

int CachingAllocator::modelPool(uint64_t pool)
{
    if (pool == 0) return 0;
    auto [it, added] = modelPools_.try_emplace(pool, static_cast<int>(sessionPools_.size()));
    if (added) sessionPools_.push_back(pool);
    return it->second;
}

PoolCounters& CachingAllocator::poolOf(const fs::alloc::Segment& s)
{
    return pools_[sessionPools_[static_cast<size_t>(s.poolId)]];
}

void CachingAllocator::segmentCreated(const fs::alloc::Segment& s)
{
    PoolCounters& p = poolOf(s);
    p.reserved += s.size;
    p.peakReserved = std::max(p.peakReserved, p.reserved);
    ++p.liveSegments;
    ++p.segmentsCreated;
    segmentEvent(EventType::RegionCreate, s);
}

void CachingAllocator::segmentReleased(const fs::alloc::Segment& s)
{
    PoolCounters& p = poolOf(s);
    p.reserved -= s.size;
    --p.liveSegments;
    segmentEvent(EventType::RegionDestroy, s);
}

void CachingAllocator::oom(uint64_t, uint32_t, uint64_t)
{
    oomPending_ = true; // the event is emitted by allocateImpl, which knows the caller's size
}

const AllocatorCounters& CachingAllocator::counters() const
{
    const auto& m = model_.counters();
    c_.allocs = m.allocs;
    c_.frees = m.frees;
    c_.segmentsCreated = m.cudaMallocs;
    c_.segmentsReleased = m.cudaFrees;
    c_.cacheFlushes = m.retries;
    c_.reserved = m.reserved;
    c_.allocated = m.allocated;
    c_.peakReserved = m.peakReserved;
    c_.peakAllocated = m.peakAllocated;
    c_.liveBlocks = m.liveBlocks;
    c_.liveSegments = m.liveSegments;
    return c_;
}

Block* CachingAllocator::allocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t,
                                  uint64_t pool)
{
    return allocateImpl(bytes, stream, tag, t, false, pool);
}

Block* CachingAllocator::tryAllocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t)
{
    return allocateImpl(bytes, stream, tag, t, true);
}

Block* CachingAllocator::allocateImpl(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t,
                                      bool quiet, uint64_t pool)
{
    now_ = std::max(now_, t);
    processEvents(now_);
    oomPending_ = false;
    Block* b = model_.malloc(bytes, stream, modelPool(pool));
    t = now_; // later than asked when the allocator waited on a pending free
    if (!b) {
        if (quiet) {
            ++c_.quietFailures;
            return nullptr;
        }
        ++c_.ooms;
        Event e;
        e.type = EventType::Oom;
        e.time = t;
        e.size = bytes;
        // What the device has outside the cache (and outside other users of the device).
        e.aux = capacity_ - model_.counters().reserved - external_;
        e.level = Level::Framework;
        e.stream = stream;
        e.device = device_;
        out_.emit(e, Name{});
        return nullptr;
    }
    Event e;
    e.type = EventType::Alloc;
    e.time = t;
    e.address = b->addr;
    e.size = b->size;
    e.requestedSize = bytes;
    e.level = Level::Framework;
    e.stream = stream;
    e.device = device_;
    e.name = tag.id;
    out_.emit(e, tag);
    PoolCounters& p = poolOf(*b->segment);
    p.allocated += b->size;
    p.peakAllocated = std::max(p.peakAllocated, p.allocated);
    return b;
}

Event CachingAllocator::emitFree(const Block* b, int64_t t)
{
    now_ = std::max(now_, t);
    processEvents(now_);
    Event e;
    e.type = EventType::Free;
    e.time = now_;
    e.address = b->addr;
    e.size = b->size;
    e.level = Level::Framework;
    e.stream = b->stream;
    e.device = device_;
    out_.emit(e, Name{});
    // The caller is done with the block (a pending free too): its pool's allocated bytes drop
    // with the Free event, as the analysis counts them.
    poolOf(*b->segment).allocated -= b->size;
    return e;
}

void CachingAllocator::free(Block* b, int64_t t)
{
    emitFree(b, t);
    model_.free(b);
}

void CachingAllocator::emptyCache(int64_t t)
{
    now_ = std::max(now_, t);
    processEvents(now_);
    model_.emptyCache();
}

void CachingAllocator::freePending(Block* b, int64_t t, int64_t until)
{
    Event p = emitFree(b, t);
    p.type = EventType::PendingFree;
    p.endTime = std::max(until, now_);
    out_.emit(p, Name{});
    pendingUntil_[b] = p.endTime;
    model_.freeRequested(b);
}

void CachingAllocator::processEvents(int64_t t)
{
    if (pendingUntil_.empty()) return;
    std::vector<Block*> done;
    for (const auto& [b, until] : pendingUntil_)
        if (until <= t) done.push_back(const_cast<Block*>(b));
    // Address order: the same completions in the same order whatever the hash map's layout.
    std::sort(done.begin(), done.end(),
              [](const Block* a, const Block* b) { return a->addr < b->addr; });
    for (Block* b : done)
        model_.completeFree(b); // freeCompleted() drops it from pendingUntil_
}

void CachingAllocator::freeCompleted(const Block& b)
{
    auto it = pendingUntil_.find(&b);
    if (it == pendingUntil_.end()) return;
    // A synchronize (free-cached-and-retry, empty_cache) waits for the other stream.
    now_ = std::max(now_, it->second);
    pendingUntil_.erase(it);
}

uint64_t CachingAllocator::externalAlloc(uint64_t bytes, int64_t t)
{
    now_ = std::max(now_, t);
    const uint64_t size = (bytes + VaSpace::kGranule - 1) / VaSpace::kGranule * VaSpace::kGranule;
    if (model_.counters().reserved + external_ + size > capacity_) return 0;
    const uint64_t addr = va_.place(size);
    if (!addr) return 0;
    external_ += size;
    externalRegions_[addr] = size;
    Event e;
    e.type = EventType::RegionCreate;
    e.time = now_;
    e.address = addr;
    e.size = size;
    e.level = Level::Driver;
    e.regionKind = RegionKind::Driver;
    e.device = device_;
    out_.emit(e, Name{});
    return addr;
}

void CachingAllocator::externalFree(uint64_t address, int64_t t)
{
    auto it = externalRegions_.find(address);
    if (it == externalRegions_.end()) return;
    now_ = std::max(now_, t);
    Event e;
    e.type = EventType::RegionDestroy;
    e.time = now_;
    e.address = address;
    e.size = it->second;
    e.level = Level::Driver;
    e.regionKind = RegionKind::Driver;
    e.device = device_;
    out_.emit(e, Name{});
    va_.release(address, it->second);
    external_ -= it->second;
    externalRegions_.erase(it);
}

uint64_t CachingAllocator::largestFree(uint32_t stream) const
{
    uint64_t best = 0;
    for (const fs::alloc::Segment* s : model_.segments()) {
        if (s->small || s->stream != stream || s->poolId != 0) continue;
        for (const Block* b = model_.firstBlock(*s); b; b = b->next)
            if (!b->allocated && !b->pending && b->mapped) best = std::max(best, b->size);
    }
    return best;
}

std::string CachingAllocator::checkConsistency() const
{
    std::string s = model_.checkConsistency();
    if (s.empty() && model_.counters().reserved > capacity_) return "reserved exceeds capacity";
    return s;
}

} // namespace fs::sim
