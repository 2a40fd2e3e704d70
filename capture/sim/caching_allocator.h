// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), as far as
// fragmentation goes:
//  - requests are rounded up to 512 B;
//  - small requests (<= 1 MiB) are served from 2 MiB segments, requests up to 10 MiB from 20 MiB
//    segments, larger ones from a segment of their own size rounded up to 2 MiB;
//  - a request takes the best-fitting cached free block of the same pool (small/large) and the
//    same stream; the block is split when the rest is worth keeping (>= 512 B small, > 1 MiB
//    large); freed blocks coalesce with free neighbours inside their segment;
//  - segments stay cached after their blocks are freed; when a new segment would exceed the
//    device capacity, every fully free cached segment is released and the request retried; when
//    that fails too, the allocation fails (an OOM, or a quiet failure for tryAllocate).
// Segments are emitted as RegionCreate/RegionDestroy, blocks as Alloc/Free, both at level
// Framework; OOMs as Oom events.
#pragma once

#include "event_writer.h"
#include "va_space.h"

#include <cstdint>
#include <deque>
#include <set>
#include <vector>

namespace fs::sim {

struct Segment;

struct Block
{
    uint64_t addr = 0;
    uint64_t size = 0;
    uint64_t requested = 0;
    Segment* segment = nullptr;
    Block* prev = nullptr; // neighbours inside the segment, in address order
    Block* next = nullptr;
    uint32_t stream = 0;
    bool allocated = false;
    bool small = false;
};

struct Segment
{
    uint64_t addr = 0;
    uint64_t size = 0;
    uint32_t stream = 0;
    bool small = false;
    bool live = false;
    Block* first = nullptr;
    size_t index = 0; // position in CachingAllocator::segments_
};

struct AllocatorCounters
{
    int64_t allocs = 0;
    int64_t frees = 0;
    int64_t segmentsCreated = 0;
    int64_t segmentsReleased = 0;
    int64_t ooms = 0;          // failed allocate() calls (an Oom event each)
    int64_t quietFailures = 0; // failed tryAllocate() calls (no event)
    int64_t cacheFlushes = 0;  // times cached segments were released to make room
    uint64_t reserved = 0;     // bytes in live segments
    uint64_t allocated = 0;    // bytes in allocated blocks (rounded sizes)
    uint64_t peakReserved = 0;
    uint64_t peakAllocated = 0;
    int64_t liveBlocks = 0;
    int64_t liveSegments = 0;
};

// Free-space picture for the fragmentation metrics (DESIGN.md "Metric definitions"): with
// coalescing, each free block is a maximal free fragment of its segment.
struct FreeSpace
{
    uint64_t totalFree = 0;
    uint64_t largestFree = 0;
    int64_t fragments = 0;
    double fragmentation() const
    {
        return totalFree == 0
                   ? 0.0
                   : 1.0 - static_cast<double>(largestFree) / static_cast<double>(totalFree);
    }
};

class CachingAllocator
{
public:
    static constexpr uint64_t kMinBlock = 512;
    static constexpr uint64_t kSmallSize = 1ull << 20;      // 1 MiB
    static constexpr uint64_t kSmallBuffer = 2ull << 20;    // 2 MiB
    static constexpr uint64_t kLargeBuffer = 20ull << 20;   // 20 MiB
    static constexpr uint64_t kMinLargeAlloc = 10ull << 20; // 10 MiB
    static constexpr uint64_t kRoundLarge = 2ull << 20;

    CachingAllocator(EventWriter& out, uint64_t capacity, uint32_t device, uint64_t seed);
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    // Allocates `bytes` for `stream` at time `t`; emits an Oom event and returns nullptr when the
    // device is full.
    Block* allocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t);
    // Same, but a failure is silent: the caller has a fallback (a smaller workspace).
    Block* tryAllocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t);
    void free(Block* b, int64_t t);
    // torch.cuda.empty_cache(): releases every fully free segment.
    void emptyCache(int64_t t);

    const AllocatorCounters& counters() const { return c_; }
    uint64_t capacity() const { return capacity_; }
    FreeSpace freeSpace() const;
    // Checks the model's own bookkeeping (blocks tile their segments, free sets match, counters
    // add up); returns an empty string when consistent, else what is wrong. For tests.
    std::string checkConsistency() const;

    static uint64_t roundSize(uint64_t bytes);
    static uint64_t segmentSize(uint64_t rounded);

private:
    struct BlockLess
    {
        bool operator()(const Block* a, const Block* b) const
        {
            if (a->stream != b->stream) return a->stream < b->stream;
            if (a->size != b->size) return a->size < b->size;
            return a->addr < b->addr;
        }
    };
    using FreeSet = std::set<Block*, BlockLess>;

    Block* allocateImpl(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t, bool quiet);
    Block* bestFit(FreeSet& pool, uint64_t size, uint32_t stream);
    Segment* newSegment(uint64_t size, uint32_t stream, bool small, int64_t t);
    void releaseSegment(Segment* s, int64_t t);
    bool releaseCached(int64_t t);
    FreeSet& pool(bool small) { return small ? smallFree_ : largeFree_; }
    Block* newBlock();
    void dropBlock(Block* b);
    Segment* newSegmentRecord();
    void touchPeaks();

    EventWriter& out_;
    uint64_t capacity_;
    uint32_t device_;
    VaSpace va_;
    AllocatorCounters c_;
    FreeSet smallFree_;
    FreeSet largeFree_;
    std::vector<Segment*> segments_; // live segments, unordered (swap-remove)
    std::deque<Block> blockStore_;   // stable storage, recycled through freeBlocks_
    std::vector<Block*> freeBlocks_;
    std::deque<Segment> segmentStore_;
    std::vector<Segment*> freeSegments_;
    Name segmentName_;
};

} // namespace fs::sim
