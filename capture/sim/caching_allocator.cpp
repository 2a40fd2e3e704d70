#include "caching_allocator.h"

#include <algorithm>
#include <fmt/format.h>

namespace fs::sim {

namespace {
constexpr uint64_t kVaBase = 0x7f4a00000000ULL;
constexpr uint64_t kVaSpan = 1ULL << 42; // 4 TiB of address space, far above any capacity
} // namespace

CachingAllocator::CachingAllocator(EventWriter& out, uint64_t capacity, uint32_t device,
                                   uint64_t seed)
    : out_(out), capacity_(capacity), device_(device), va_(kVaBase, kVaSpan, seed)
{
}

uint64_t CachingAllocator::roundSize(uint64_t bytes)
{
    if (bytes < kMinBlock) return kMinBlock;
    return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

uint64_t CachingAllocator::segmentSize(uint64_t rounded)
{
    if (rounded <= kSmallSize) return kSmallBuffer;
    if (rounded < kMinLargeAlloc) return kLargeBuffer;
    return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

Block* CachingAllocator::newBlock()
{
    if (!freeBlocks_.empty()) {
        Block* b = freeBlocks_.back();
        freeBlocks_.pop_back();
        *b = Block{};
        return b;
    }
    return &blockStore_.emplace_back();
}

void CachingAllocator::dropBlock(Block* b)
{
    freeBlocks_.push_back(b);
}

Segment* CachingAllocator::newSegmentRecord()
{
    if (!freeSegments_.empty()) {
        Segment* s = freeSegments_.back();
        freeSegments_.pop_back();
        *s = Segment{};
        return s;
    }
    return &segmentStore_.emplace_back();
}

void CachingAllocator::touchPeaks()
{
    c_.peakReserved = std::max(c_.peakReserved, c_.reserved);
    c_.peakAllocated = std::max(c_.peakAllocated, c_.allocated);
}

Block* CachingAllocator::bestFit(FreeSet& p, uint64_t size, uint32_t stream)
{
    Block key;
    key.stream = stream;
    key.size = size;
    key.addr = 0;
    auto it = p.lower_bound(&key);
    if (it == p.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    p.erase(it);
    return b;
}

Segment* CachingAllocator::newSegment(uint64_t size, uint32_t stream, bool small, int64_t t)
{
    if (c_.reserved + size > capacity_) return nullptr;
    const uint64_t addr = va_.place(size);
    if (addr == 0) return nullptr;
    Segment* s = newSegmentRecord();
    s->addr = addr;
    s->size = size;
    s->stream = stream;
    s->small = small;
    s->live = true;
    s->index = segments_.size();
    segments_.push_back(s);
    Block* b = newBlock();
    b->addr = addr;
    b->size = size;
    b->segment = s;
    b->stream = stream;
    b->small = small;
    s->first = b;
    c_.reserved += size;
    ++c_.segmentsCreated;
    ++c_.liveSegments;
    touchPeaks();
    Event e;
    e.type = EventType::RegionCreate;
    e.time = t;
    e.address = addr;
    e.size = size;
    e.level = Level::Framework;
    e.regionKind = RegionKind::Segment;
    e.stream = stream;
    e.device = device_;
    out_.emit(e, Name{});
    return s;
}

void CachingAllocator::releaseSegment(Segment* s, int64_t t)
{
    Block* b = s->first;
    pool(s->small).erase(b);
    dropBlock(b);
    va_.release(s->addr, s->size);
    c_.reserved -= s->size;
    ++c_.segmentsReleased;
    --c_.liveSegments;
    Segment* last = segments_.back();
    segments_[s->index] = last;
    last->index = s->index;
    segments_.pop_back();
    s->live = false;
    Event e;
    e.type = EventType::RegionDestroy;
    e.time = t;
    e.address = s->addr;
    e.size = s->size;
    e.level = Level::Framework;
    e.regionKind = RegionKind::Segment;
    e.stream = s->stream;
    e.device = device_;
    out_.emit(e, Name{});
    freeSegments_.push_back(s);
}

bool CachingAllocator::releaseCached(int64_t t)
{
    // Release in address order so the event stream does not depend on container layout.
    std::vector<Segment*> idle;
    for (Segment* s : segments_)
        if (!s->first->allocated && s->first->next == nullptr) idle.push_back(s);
    std::sort(idle.begin(), idle.end(),
              [](const Segment* a, const Segment* b) { return a->addr < b->addr; });
    for (Segment* s : idle)
        releaseSegment(s, t);
    if (!idle.empty()) ++c_.cacheFlushes;
    return !idle.empty();
}

void CachingAllocator::emptyCache(int64_t t)
{
    releaseCached(t);
}

Block* CachingAllocator::allocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t)
{
    return allocateImpl(bytes, stream, tag, t, false);
}

Block* CachingAllocator::tryAllocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t)
{
    return allocateImpl(bytes, stream, tag, t, true);
}

Block* CachingAllocator::allocateImpl(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t,
                                      bool quiet)
{
    const uint64_t size = roundSize(bytes);
    const bool small = size <= kSmallSize;
    FreeSet& p = pool(small);
    Block* b = bestFit(p, size, stream);
    if (!b) {
        const uint64_t segSize = segmentSize(size);
        Segment* s = newSegment(segSize, stream, small, t);
        if (!s && releaseCached(t)) s = newSegment(segSize, stream, small, t);
        if (!s) {
            if (quiet) {
                ++c_.quietFailures;
                return nullptr;
            }
            ++c_.ooms;
            Event e;
            e.type = EventType::Oom;
            e.time = t;
            e.size = bytes;
            e.aux = capacity_ - c_.reserved; // what the device still has outside the cache
            e.level = Level::Framework;
            e.stream = stream;
            e.device = device_;
            out_.emit(e, Name{});
            return nullptr;
        }
        b = s->first;
    }
    const uint64_t rest = b->size - size;
    if (small ? rest >= kMinBlock : rest > kSmallSize) {
        Block* r = newBlock();
        r->addr = b->addr + size;
        r->size = rest;
        r->segment = b->segment;
        r->stream = stream;
        r->small = small;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        p.insert(r);
    }
    b->allocated = true;
    b->requested = bytes;
    c_.allocated += b->size;
    ++c_.allocs;
    ++c_.liveBlocks;
    touchPeaks();
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
    return b;
}

void CachingAllocator::free(Block* b, int64_t t)
{
    Event e;
    e.type = EventType::Free;
    e.time = t;
    e.address = b->addr;
    e.size = b->size;
    e.level = Level::Framework;
    e.stream = b->stream;
    e.device = device_;
    out_.emit(e, Name{});
    c_.allocated -= b->size;
    ++c_.frees;
    --c_.liveBlocks;
    b->allocated = false;
    b->requested = 0;
    FreeSet& p = pool(b->small);
    // Coalesce with free neighbours (they are in the free set; take them out first).
    if (Block* n = b->next; n && !n->allocated) {
        p.erase(n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        dropBlock(n);
    }
    if (Block* pr = b->prev; pr && !pr->allocated) {
        p.erase(pr);
        pr->size += b->size;
        pr->next = b->next;
        if (b->next) b->next->prev = pr;
        dropBlock(b);
        b = pr;
    }
    p.insert(b);
}

FreeSpace CachingAllocator::freeSpace() const
{
    FreeSpace f;
    for (const FreeSet* p : {&smallFree_, &largeFree_}) {
        for (const Block* b : *p) {
            f.totalFree += b->size;
            f.largestFree = std::max(f.largestFree, b->size);
            ++f.fragments;
        }
    }
    return f;
}

std::string CachingAllocator::checkConsistency() const
{
    uint64_t reserved = 0;
    uint64_t allocated = 0;
    int64_t liveBlocks = 0;
    size_t freeBlocks = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
        const Segment* s = segments_[i];
        if (!s->live || s->index != i)
            return fmt::format("segment {:#x}: bad index or not live", s->addr);
        reserved += s->size;
        uint64_t at = s->addr;
        const Block* prev = nullptr;
        for (const Block* b = s->first; b; b = b->next) {
            if (b->addr != at || b->segment != s || b->prev != prev || b->stream != s->stream)
                return fmt::format("segment {:#x}: block {:#x} does not tile it", s->addr, b->addr);
            if (!b->allocated && prev && !prev->allocated)
                return fmt::format("segment {:#x}: free blocks {:#x} and {:#x} not coalesced",
                                   s->addr, prev->addr, b->addr);
            if (b->allocated) {
                allocated += b->size;
                ++liveBlocks;
            } else {
                ++freeBlocks;
                const FreeSet& p = s->small ? smallFree_ : largeFree_;
                if (!p.count(const_cast<Block*>(b)))
                    return fmt::format("free block {:#x} missing from its pool", b->addr);
            }
            at += b->size;
            prev = b;
        }
        if (at != s->addr + s->size)
            return fmt::format("segment {:#x}: blocks end at {:#x}, not at its end", s->addr, at);
    }
    if (freeBlocks != smallFree_.size() + largeFree_.size())
        return "free sets hold blocks that are not in any live segment";
    if (reserved != c_.reserved || allocated != c_.allocated || liveBlocks != c_.liveBlocks)
        return "counters disagree with the blocks";
    if (reserved > capacity_) return "reserved exceeds capacity";
    return {};
}

} // namespace fs::sim
