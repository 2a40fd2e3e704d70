#include "caching_allocator.h"

#include <algorithm>

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
    if (reserved + size > capacity_) return 0;
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
    return reserved + bytes <= capacity_;
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
    now_ = t;
    oomPending_ = false;
    Block* b = model_.malloc(bytes, stream, modelPool(pool));
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
        e.aux = capacity_ - model_.counters().reserved; // what the device has outside the cache
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

void CachingAllocator::free(Block* b, int64_t t)
{
    now_ = t;
    Event e;
    e.type = EventType::Free;
    e.time = t;
    e.address = b->addr;
    e.size = b->size;
    e.level = Level::Framework;
    e.stream = b->stream;
    e.device = device_;
    out_.emit(e, Name{});
    poolOf(*b->segment).allocated -= b->size;
    model_.free(b);
}

void CachingAllocator::emptyCache(int64_t t)
{
    now_ = t;
    model_.emptyCache();
}

std::string CachingAllocator::checkConsistency() const
{
    std::string s = model_.checkConsistency();
    if (s.empty() && model_.counters().reserved > capacity_) return "reserved exceeds capacity";
    return s;
}

} // namespace fs::sim
