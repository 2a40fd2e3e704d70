// Rules of PyTorch's DeviceCachingAllocator (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.4,
// pytorch/pytorch commit 001074d2). Each "Rule N" comment names the PyTorch function it follows;
// docs/whatif.md lists them with their known-answer tests (tests/alloc/tst_alloc_rules.cpp).
#include "caching_allocator.h"

#include <algorithm>
#include <bit>
#include <fmt/format.h>

namespace fs::alloc {

namespace {

// BlockComparatorSize: stream, then size, then address (best fit, ties to the lowest address).
struct BySize
{
    bool operator()(const Block* a, const Block* b) const
    {
        if (a->stream != b->stream) return a->stream < b->stream;
        if (a->size != b->size) return a->size < b->size;
        return a->addr < b->addr;
    }
};
// BlockComparatorAddress (unmapped parts of expandable segments): stream, then address.
struct ByAddr
{
    bool operator()(const Block* a, const Block* b) const
    {
        if (a->stream != b->stream) return a->stream < b->stream;
        return a->addr < b->addr;
    }
};

uint64_t roundUp(uint64_t v, uint64_t g)
{
    return (v + g - 1) / g * g;
}

} // namespace

struct BlockPool
{
    std::set<Block*, BySize> blocks;
    std::set<Block*, ByAddr> unmapped;
    bool small = false;
    bool noSplit = false; // MemPool(no_split=True): blocks are never split
    int poolId = 0;
    int64_t freeBlockCalls = 0; // get_free_blocks_call_count (garbage collection ages)
};

struct CachingAllocator::PoolPair
{
    BlockPool large;
    BlockPool small;
    bool freeable = false; // releasePool(): its graphs are gone
    bool useOnOom = false; // MemPool(use_on_oom=True): the default pool's last resort
    PoolPair(int id)
    {
        large.poolId = small.poolId = id;
        small.small = true;
    }
};

// ---- devices ---------------------------------------------------------------------------------

SimpleDevice::SimpleDevice(uint64_t capacity, uint64_t base) : capacity_(capacity)
{
    free_.emplace(base, uint64_t(1) << 46);
}

uint64_t SimpleDevice::place(uint64_t size)
{
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < size) continue;
        const uint64_t at = it->first, len = it->second;
        free_.erase(it);
        if (len > size) free_.emplace(at + size, len - size);
        return at;
    }
    return 0;
}

uint64_t SimpleDevice::malloc(uint64_t size, uint64_t reserved)
{
    if (reserved + size > capacity_ || reserved + size < reserved) return 0;
    return place(size);
}

void SimpleDevice::free(uint64_t addr, uint64_t size)
{
    releaseRange(free_, addr, size);
}

void releaseRange(std::map<uint64_t, uint64_t>& free_, uint64_t addr, uint64_t size)
{
    auto next = free_.lower_bound(addr);
    uint64_t start = addr, len = size;
    if (next != free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == addr) {
            start = prev->first;
            len += prev->second;
            free_.erase(prev);
        }
    }
    if (next != free_.end() && next->first == addr + size) {
        len += next->second;
        free_.erase(next);
    }
    free_.emplace(start, len);
}

uint64_t SimpleDevice::reserveAddressSpace(uint64_t size)
{
    return place(size);
}

bool SimpleDevice::canMap(uint64_t bytes, uint64_t reserved)
{
    return reserved + bytes <= capacity_ && reserved + bytes >= reserved;
}

// ---- allocator -------------------------------------------------------------------------------

CachingAllocator::CachingAllocator(Config cfg, DeviceMemory& device, Listener* listener,
                                   uint64_t gcLimit)
    : cfg_(cfg), device_(device), listener_(listener), gcLimit_(gcLimit),
      default_(std::make_unique<PoolPair>(0))
{
    // per_process_memory_fraction: setMemoryFraction at DeviceCachingAllocator's construction,
    // allowed_memory_maximum = fraction x the device's memory (when the device's size is known).
    const uint64_t total = device.totalMemory();
    if (const uint64_t limit = total == kNoLimit ? 0 : cfg.processLimit(total); limit > 0)
        gcLimit_ = gcLimit_ > 0 ? std::min(gcLimit_, limit) : limit;
}

// MemPool(use_on_oom, no_split) (torch/cuda/memory.py; setUseOnOOM, setNoSplit).
void CachingAllocator::setPoolOptions(int poolId, bool noSplit, bool useOnOom)
{
    if (poolId == 0) return;
    PoolPair& p = pools(poolId);
    p.large.noSplit = p.small.noSplit = noSplit;
    p.useOnOom = useOnOom;
}

CachingAllocator::~CachingAllocator() = default;

CachingAllocator::PoolPair& CachingAllocator::pools(int poolId)
{
    if (poolId == 0) return *default_;
    auto& p = private_[poolId];
    if (!p) p = std::make_unique<PoolPair>(poolId);
    return *p;
}

// Rule 1 (round_size): requests under 512 B take 512 B; with roundup_power2_divisions set for
// the size's interval (and size > 512 B * divisions) they round up to the next of `divisions`
// equal steps between two powers of two; otherwise up to a multiple of 512 B.
uint64_t CachingAllocator::roundSize(uint64_t size, const Config& cfg)
{
    if (size < kMinBlockSize) return kMinBlockSize;
    const uint64_t divisions = cfg.divisionsFor(size);
    if (divisions > 1 && size > kMinBlockSize * divisions)
        return roundupPower2NextDivision(size, divisions);
    return roundUp(size, kMinBlockSize);
}

// roundup_power2_next_division: a power of two stays; else the interval [2^k, 2^(k+1)) is cut
// into `divisions` steps and size goes up to the next step.
uint64_t CachingAllocator::roundupPower2NextDivision(uint64_t size, uint64_t divisions)
{
    if (std::has_single_bit(size)) return size;
    const uint64_t floor2 = std::bit_floor(size);
    const uint64_t step = floor2 >> (63 - std::countl_zero(divisions));
    if (step == 0) return floor2 << 1;
    const uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

// Rule 3 (get_allocation_size): small requests get a 2 MiB segment, requests under 10 MiB a
// 20 MiB one, larger ones their size rounded up to 2 MiB. (The tiered policy's granularity
// replaces the large rule.)
uint64_t CachingAllocator::allocationSize(uint64_t size, const Config& cfg)
{
    if (size <= kSmallSize) return kSmallBuffer;
    if (cfg.largeSegmentGranularity) return roundUp(size, cfg.largeSegmentGranularity);
    if (size < kMinLargeAlloc) return kLargeBuffer;
    return roundUp(size, kRoundLarge);
}

// Rule 2 (get_pool): rounded sizes up to 1 MiB use the small pool, the rest the large pool; a
// private pool (CUDA graphs, MemPool) has its own pair.
BlockPool& CachingAllocator::poolFor(uint64_t rounded, int poolId)
{
    PoolPair& p = pools(poolId);
    return smallPool(rounded) ? p.small : p.large;
}

Block* CachingAllocator::newBlock()
{
    if (!spareBlocks_.empty()) {
        Block* b = spareBlocks_.back();
        spareBlocks_.pop_back();
        *b = Block{};
        return b;
    }
    return &blockStore_.emplace_back();
}

void CachingAllocator::dropBlock(Block* b)
{
    spareBlocks_.push_back(b);
}

void CachingAllocator::touchPeaks()
{
    c_.peakReserved = std::max(c_.peakReserved, c_.reserved);
    c_.peakAllocated = std::max(c_.peakAllocated, c_.allocated);
}

Block* CachingAllocator::addSegment(BlockPool& pool, uint64_t addr, uint64_t size, uint32_t stream,
                                    bool expandable)
{
    Segment* s = spareSegments_.empty() ? &segmentStore_.emplace_back() : spareSegments_.back();
    if (!spareSegments_.empty()) spareSegments_.pop_back();
    *s = Segment{};
    s->addr = addr;
    s->size = size;
    s->mapped = expandable ? 0 : size; // an expandable segment starts with nothing mapped
    s->stream = stream;
    s->poolId = pool.poolId;
    s->small = pool.small;
    s->expandable = expandable;
    s->index = segments_.size();
    segments_.push_back(s);
    ++c_.liveSegments;
    Block* b = newBlock();
    b->addr = addr;
    b->size = size;
    b->segment = s;
    b->pool = &pool;
    b->stream = stream;
    b->mapped = !expandable;
    s->head = b;
    return b;
}

void CachingAllocator::removeSegment(Segment* s)
{
    Segment* last = segments_.back();
    segments_[s->index] = last;
    last->index = s->index;
    segments_.pop_back();
    --c_.liveSegments;
    spareSegments_.push_back(s);
}

void CachingAllocator::insertFree(BlockPool& pool, Block* b)
{
    b->gcBase = pool.freeBlockCalls; // insert_into_blocks
    pool.blocks.insert(b);
}

// Rule 4 (get_free_block): best fit in the request's pool and stream, the smallest cached block
// that fits, ties to the lowest address. Rule 6 (max_split_size_mb): a request below the limit
// never takes an oversize block (>= the limit); a request at or above it takes one only when the
// block is less than kLargeBuffer (20 MiB) larger. Expandable blocks count the unmapped space
// right after them as part of their size.
namespace {

// get_free_block's choice in `blocks` (a BlockPool's free set, const or not): the block, or end().
template <typename Set> auto bestFit(const Config& cfg, Set& blocks, uint64_t size, uint32_t stream)
{
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = blocks.lower_bound(&key);
    if (it == blocks.end() || (*it)->stream != stream) return blocks.end();
    if ((*it)->segment->expandable) {
        if (cfg.expandableSegments) {
            auto expandableSize = [](const Block* b) {
                return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
            };
            auto next = std::next(it);
            while ((*it)->segment->expandable && next != blocks.end() &&
                   (*next)->stream == stream && expandableSize(*next) < expandableSize(*it))
                it = next++;
        } else {
            do {
                ++it;
            } while (it != blocks.end() && (*it)->segment->expandable && (*it)->stream == stream);
            if (it == blocks.end() || (*it)->stream != stream) return blocks.end();
        }
    }
    if (size < cfg.maxSplitSize && (*it)->size >= cfg.maxSplitSize) return blocks.end();
    // max_non_split_rounding_mb (20 MiB unless set): how much larger such a block may be.
    if (size >= cfg.maxSplitSize && (*it)->size >= size + cfg.maxNonSplitRounding)
        return blocks.end();
    return it;
}

} // namespace

bool CachingAllocator::getFreeBlock(BlockPool& pool, uint64_t size, uint32_t stream, Block*& out)
{
    if (gcLimit_ > 0 && cfg_.gcThreshold > 0) ++pool.freeBlockCalls;
    auto it = bestFit(cfg_, pool.blocks, size, stream);
    if (it == pool.blocks.end()) return false;
    out = *it;
    pool.blocks.erase(it);
    return true;
}

bool CachingAllocator::canReuse(uint64_t origSize, uint32_t stream, int poolId) const
{
    const uint64_t size = roundSize(origSize);
    const PoolPair* p = default_.get();
    if (poolId != 0) {
        auto it = private_.find(poolId);
        if (it == private_.end()) return false;
        p = it->second.get();
    }
    const BlockPool& pool = smallPool(size) ? p->small : p->large;
    return bestFit(cfg_, pool.blocks, size, stream) != pool.blocks.end();
}

// Rule 5 (should_split): small-pool blocks (and every block with expandable segments) split when
// at least 512 B would remain; large-pool blocks split only when more than 1 MiB would remain
// and the request is below max_split_size.
bool CachingAllocator::shouldSplit(const Block* b, uint64_t size) const
{
    // A MemPool(no_split=True) never splits its blocks (no_split_pools).
    if (b->pool->noSplit) return false;
    return splits(b->size, size, b->pool->small, cfg_);
}

bool CachingAllocator::splits(uint64_t blockSize, uint64_t size, bool smallPool, const Config& cfg)
{
    const uint64_t remaining = blockSize - size;
    if (smallPool || cfg.expandableSegments) return remaining >= kMinBlockSize;
    return size < cfg.maxSplitSize && remaining > kSmallSize;
}

// Rule 8 (alloc_block): a new segment of the allocation size from cudaMalloc, or with expandable
// segments more memory mapped into the stream's segment. Fails when the device (or the
// per-process limit) has no room.
bool CachingAllocator::allocBlock(BlockPool& pool, uint64_t size, uint64_t allocSize,
                                  uint32_t stream, bool isRetry, Block*& out)
{
    if (isRetry) ++c_.retries;
    if (gcLimit_ > 0 && c_.reserved + allocSize > gcLimit_) return false;
    if (cfg_.expandableSegments) {
        out = tryAllocateExpandable(pool, size, stream);
        return out != nullptr;
    }
    const uint64_t addr = device_.malloc(allocSize, c_.reserved);
    if (addr == 0) return false;
    Block* b = addSegment(pool, addr, allocSize, stream, false);
    Segment* s = b->segment;
    c_.reserved += allocSize;
    ++c_.cudaMallocs;
    touchPeaks();
    if (listener_) listener_->segmentCreated(*s);
    out = b;
    return true;
}

// Rule 10 (find_expandable_block): the stream's expandable segment in this pool whose unmapped
// space (with the free block just before it) holds the request; else a new one reserving 9/8 of
// the device's memory as address space, mapped in 2 MiB (small pool) or 20 MiB (large) pages.
Block* CachingAllocator::findExpandableBlock(BlockPool& pool, uint64_t size, uint32_t stream)
{
    auto allocatable = [](const Block* b) { return b && !b->allocated && !b->pending; };
    auto room = [&](const Block* b) {
        uint64_t bytes = 0;
        while (bytes < size && allocatable(b)) {
            bytes += b->size;
            b = b->next;
        }
        return bytes >= size;
    };
    Block key;
    key.stream = stream;
    for (auto it = pool.unmapped.lower_bound(&key);
         it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
        Block* c = *it;
        if (allocatable(c->prev)) c = c->prev;
        if (room(c)) return c;
    }
    const uint64_t page = pool.small ? kSmallBuffer : kLargeBuffer;
    // An unlimited device (no capacity known) reserves as for a 1 TiB one.
    const uint64_t total = std::min<uint64_t>(device_.totalMemory(), 1ull << 40);
    uint64_t space = roundUp(total + total / 8, page);
    // expandable_segments_reserve (clamp_reserve_bytes): a smaller reservation, capped at the
    // historical 9/8. A request larger than one segment cannot be served: one allocation never
    // spans two expandable segments.
    if (cfg_.reserveSet)
        space = std::min(space, roundUp(std::max<uint64_t>(cfg_.reserve.bytes(total), 1), page));
    if (space < size) return nullptr;
    const uint64_t addr = device_.reserveAddressSpace(space);
    if (addr == 0) return nullptr;
    Block* b = addSegment(pool, addr, space, stream, true);
    pool.unmapped.insert(b);
    if (listener_) listener_->segmentCreated(*b->segment);
    return b;
}

// map_block: back the first `size` bytes of an unmapped block, rounded up to whole pages; the
// rest stays unmapped after it; the mapped part merges with free mapped neighbours.
bool CachingAllocator::mapBlock(Block* b, uint64_t size)
{
    Segment* s = b->segment;
    const uint64_t page = b->pool->small ? kSmallBuffer : kLargeBuffer;
    const uint64_t begin = (b->addr - s->addr) / page * page;
    const uint64_t end = roundUp(b->addr - s->addr + size, page);
    const uint64_t bytes = end - begin;
    if (!device_.canMap(bytes, c_.reserved)) return false;
    BlockPool& pool = *b->pool;
    pool.unmapped.erase(b);
    b->mapped = true;
    if (bytes < b->size) {
        Block* r = newBlock();
        r->addr = b->addr + bytes;
        r->size = b->size - bytes;
        r->segment = s;
        r->pool = &pool;
        r->stream = b->stream;
        r->mapped = false;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        pool.unmapped.insert(r);
        b->size = bytes;
    }
    tryMerge(b, b->prev, pool);
    tryMerge(b, b->next, pool);
    insertFree(pool, b);
    s->mapped += bytes;
    c_.reserved += bytes;
    ++c_.cudaMallocs;
    touchPeaks();
    if (listener_) listener_->mapped(*s, s->addr + begin, bytes);
    return true;
}

// try_allocate_expandable_block: map pages until the candidate holds the request.
Block* CachingAllocator::tryAllocateExpandable(BlockPool& pool, uint64_t size, uint32_t stream)
{
    Block* c = findExpandableBlock(pool, size, stream);
    if (!c) return nullptr;
    if (!c->mapped && !mapBlock(c, std::min(c->size, size))) return nullptr;
    while (c->size < size) {
        Block* n = c->next;
        if (!n || !mapBlock(n, std::min(size - c->size, n->size))) return nullptr;
        c = n;
    }
    pool.blocks.erase(c);
    return c;
}

// unmap_block: give back the whole pages inside a free expandable block; the partial pages at
// either end stay mapped as free blocks.
void CachingAllocator::unmapBlock(Block* b)
{
    Segment* s = b->segment;
    BlockPool& pool = *b->pool;
    const uint64_t page = pool.small ? kSmallBuffer : kLargeBuffer;
    const uint64_t begin = roundUp(b->addr - s->addr, page) + s->addr;
    const uint64_t end = (b->addr + b->size - s->addr) / page * page + s->addr;
    if (begin >= end) return;
    pool.blocks.erase(b);
    if (begin > b->addr) {
        Block* f = newBlock();
        f->addr = b->addr;
        f->size = begin - b->addr;
        f->segment = s;
        f->pool = &pool;
        f->stream = b->stream;
        f->prev = b->prev;
        f->next = b;
        if (b->prev) b->prev->next = f;
        b->prev = f;
        if (s->head == b) s->head = f;
        insertFree(pool, f);
    }
    if (b->addr + b->size > end) {
        Block* f = newBlock();
        f->addr = end;
        f->size = b->addr + b->size - end;
        f->segment = s;
        f->pool = &pool;
        f->stream = b->stream;
        f->prev = b;
        f->next = b->next;
        if (b->next) b->next->prev = f;
        b->next = f;
        insertFree(pool, f);
    }
    b->addr = begin;
    b->size = end - begin;
    b->mapped = false;
    tryMerge(b, b->prev, pool);
    tryMerge(b, b->next, pool);
    pool.unmapped.insert(b);
    s->mapped -= end - begin;
    c_.reserved -= end - begin;
    ++c_.cudaFrees;
    if (listener_) listener_->unmapped(*s, begin, end - begin);
}

// try_merge_blocks: a free neighbour in the same mapped state is absorbed.
size_t CachingAllocator::tryMerge(Block* dst, Block* src, BlockPool& pool)
{
    if (!src || src->allocated || src->pending || dst->mapped != src->mapped) return 0;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev) dst->prev->next = dst;
        if (dst->segment->head == src) dst->segment->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    const uint64_t n = src->size;
    dst->size += n;
    if (src->mapped)
        pool.blocks.erase(src);
    else
        pool.unmapped.erase(src);
    dropBlock(src);
    return n;
}

// release_block: cudaFree of a whole cached segment.
void CachingAllocator::releaseBlock(Block* b)
{
    Segment* s = b->segment;
    b->pool->blocks.erase(b);
    device_.free(s->addr, s->size);
    c_.reserved -= s->size;
    ++c_.cudaFrees;
    if (listener_) listener_->segmentReleased(*s);
    dropBlock(b);
    removeSegment(s);
}

// Rule 9a (release_available_cached_blocks; only with max_split_size_mb): free the smallest
// oversize cached block that is large enough, else oversize blocks from the largest down until
// their sizes add up to the request.
bool CachingAllocator::releaseAvailableCachedBlocks(BlockPool& pool, uint64_t size, uint32_t stream)
{
    if (cfg_.maxSplitSize == kNoLimit) return false;
    Block key;
    key.stream = stream;
    key.size = std::max(size, cfg_.maxSplitSize);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream || (*it)->segment->expandable) {
        if (it == pool.blocks.begin()) return false;
        uint64_t released = 0;
        --it;
        while (released < key.size && (*it)->size >= cfg_.maxSplitSize && (*it)->stream == stream) {
            auto cur = it;
            const bool first = cur == pool.blocks.begin();
            if (!first) --it;
            if (!(*cur)->segment->expandable && !(*cur)->isSplit()) {
                released += (*cur)->size;
                releaseBlock(*cur);
            }
            if (first) break;
        }
        return released >= key.size;
    }
    if ((*it)->isSplit()) return false;
    releaseBlock(*it);
    return true;
}

// release_blocks: every unsplit cached block goes back to the device; expandable segments give
// back their free whole pages.
void CachingAllocator::releaseBlocks(BlockPool& pool)
{
    std::vector<Block*> toUnmap;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
        Block* b = *it++;
        if (b->segment->expandable)
            toUnmap.push_back(b);
        else if (!b->isSplit())
            releaseBlock(b);
    }
    for (Block* b : toUnmap)
        unmapBlock(b);
}

// Rule 9b (release_cached_blocks): free-cached-and-retry and empty_cache(): release the default
// pools (large first, then small), then private pools whose graphs are gone.
bool CachingAllocator::releaseCachedBlocks()
{
    ++c_.cacheFlushes;
    synchronizeAndFreeEvents();
    releaseBlocks(default_->large);
    releaseBlocks(default_->small);
    for (auto& [id, p] : private_) {
        if (!p->freeable) continue;
        releaseBlocks(p->small);
        releaseBlocks(p->large);
    }
    return true;
}

// Rule 7 (garbage_collect_cached_blocks): when reserved memory passes threshold * the limit,
// release unsplit large-pool blocks whose age (free-block searches since they were cached) is at
// least the average, repeating until the excess is reclaimed or nothing is freed.
void CachingAllocator::garbageCollect()
{
    const auto threshold = static_cast<uint64_t>(cfg_.gcThreshold * static_cast<double>(gcLimit_));
    if (c_.reserved <= threshold) return;
    const uint64_t target = c_.reserved - threshold;
    BlockPool& pool = default_->large;
    uint64_t totalAge = 0;
    int64_t freeable = 0;
    for (const Block* b : pool.blocks)
        if (!b->isSplit()) {
            totalAge += static_cast<uint64_t>(pool.freeBlockCalls - b->gcBase);
            ++freeable;
        }
    if (freeable == 0) return;
    uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
        const double ageThreshold = static_cast<double>(totalAge) / static_cast<double>(freeable);
        freed = false;
        for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
            Block* b = *it++;
            const auto age = static_cast<uint64_t>(pool.freeBlockCalls - b->gcBase);
            if (!b->isSplit() && !b->segment->expandable &&
                static_cast<double>(age) >= ageThreshold) {
                freed = true;
                reclaimed += b->size;
                totalAge -= age;
                --freeable;
                ++c_.gcReleases;
                releaseBlock(b);
            }
        }
    }
}

Block* CachingAllocator::malloc(uint64_t origSize, uint32_t stream, int poolId)
{
    const uint64_t size = roundSize(origSize);
    BlockPool* poolp = &poolFor(size, poolId);
    const uint64_t allocSize = allocationSize(size);
    Block* b = nullptr;
    BlockPool& pool = *poolp;
    bool found = getFreeBlock(pool, size, stream, b);
    if (!found) {
        if (gcLimit_ > 0 && cfg_.gcThreshold > 0) garbageCollect();
        // Rule 9: cudaMalloc; on failure release what max_split_size allows and retry; then
        // release every cached block and retry once more.
        found = allocBlock(pool, size, allocSize, stream, false, b) ||
                (releaseAvailableCachedBlocks(pool, size, stream) &&
                 allocBlock(pool, size, allocSize, stream, false, b)) ||
                (releaseCachedBlocks() && allocBlock(pool, size, allocSize, stream, true, b));
    }
    // About to OOM: a default-pool request may take a cached block of a MemPool made with
    // use_on_oom=True (malloc: use_on_oom_pools), best fit in that pool and the same stream.
    if (!found && poolId == 0)
        for (auto& [id, p] : private_) {
            if (!p->useOnOom) continue;
            BlockPool& other = smallPool(size) ? p->small : p->large;
            if (getFreeBlock(other, size, stream, b)) {
                poolp = &other;
                found = true;
                break;
            }
        }
    if (!found) {
        ++c_.ooms;
        const uint64_t total = device_.totalMemory();
        if (listener_) listener_->oom(size, stream, total > c_.reserved ? total - c_.reserved : 0);
        return nullptr;
    }
    // alloc_found_block: the request takes the front of the block; the remainder stays cached.
    if (shouldSplit(b, size)) {
        Block* r = newBlock();
        r->addr = b->addr + size;
        r->size = b->size - size;
        r->segment = b->segment;
        r->pool = poolp;
        r->stream = stream;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        insertFree(*poolp, r);
    }
    b->allocated = true;
    b->requested = origSize;
    c_.allocated += b->size;
    ++c_.allocs;
    ++c_.liveBlocks;
    touchPeaks();
    return b;
}

// free(): the caller is done with the block; free_block: merge with free neighbours, back into
// the pool.
void CachingAllocator::free(Block* b)
{
    leaveCaller(b);
    freeBlock(b);
}

// What free() counts at once, whether or not the block waits on stream events.
void CachingAllocator::leaveCaller(Block* b)
{
    b->allocated = false;
    b->requested = 0;
    c_.allocated -= b->size;
    ++c_.frees;
    --c_.liveBlocks;
}

void CachingAllocator::freeBlock(Block* b)
{
    BlockPool& pool = *b->pool;
    tryMerge(b, b->prev, pool);
    tryMerge(b, b->next, pool);
    insertFree(pool, b);
}

// Rule 12 (free with stream_uses: insert_events; process_events; synchronize_and_free_events).
void CachingAllocator::freeRequested(Block* b)
{
    leaveCaller(b);
    b->pending = true;
    b->pendingSlot = static_cast<uint32_t>(pending_.size());
    pending_.push_back(b);
    ++c_.pendingBlocks;
}

void CachingAllocator::completeFree(Block* b)
{
    Block* last = pending_.back();
    pending_[b->pendingSlot] = last;
    last->pendingSlot = b->pendingSlot;
    pending_.pop_back();
    b->pending = false;
    --c_.pendingBlocks;
    if (listener_) listener_->freeCompleted(*b);
    freeBlock(b);
}

// synchronize_and_free_events: wait for every outstanding event; each pending block returns to
// its pool. The order does not matter: free neighbours merge into the same blocks either way.
void CachingAllocator::synchronizeAndFreeEvents()
{
    while (!pending_.empty()) {
        ++c_.syncedFrees;
        completeFree(pending_.back());
    }
}

void CachingAllocator::emptyCache()
{
    releaseCachedBlocks();
}

void CachingAllocator::releasePool(int poolId)
{
    if (poolId == 0) return;
    pools(poolId).freeable = true;
}

FreeSpace CachingAllocator::freeSpace() const
{
    FreeSpace f;
    auto add = [&](const BlockPool& p) {
        for (const Block* b : p.blocks) {
            f.totalFree += b->size;
            f.largestFree = std::max(f.largestFree, b->size);
            ++f.fragments;
        }
    };
    add(default_->large);
    add(default_->small);
    for (const auto& [id, p] : private_) {
        add(p->large);
        add(p->small);
    }
    return f;
}

std::vector<const Segment*> CachingAllocator::segments() const
{
    std::vector<const Segment*> out(segments_.begin(), segments_.end());
    std::sort(out.begin(), out.end(),
              [](const Segment* a, const Segment* b) { return a->addr < b->addr; });
    return out;
}

const Block* CachingAllocator::firstBlock(const Segment& s) const
{
    return s.head;
}

std::string CachingAllocator::checkConsistency() const
{
    uint64_t reserved = 0, allocated = 0;
    int64_t live = 0, pending = 0;
    size_t cached = 0, unmapped = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
        const Segment* s = segments_[i];
        if (s->index != i) return fmt::format("segment {:#x}: bad index", s->addr);
        reserved += s->mapped;
        uint64_t at = s->addr, mapped = 0;
        const Block* prev = nullptr;
        for (const Block* b = s->head; b; b = b->next) {
            if (b->addr != at || b->segment != s || b->prev != prev || b->stream != s->stream)
                return fmt::format("segment {:#x}: block {:#x} does not tile it", s->addr, b->addr);
            if (!b->allocated && !b->pending && prev && !prev->allocated && !prev->pending &&
                prev->mapped == b->mapped)
                return fmt::format("segment {:#x}: free blocks {:#x} and {:#x} not merged", s->addr,
                                   prev->addr, b->addr);
            if (b->mapped) mapped += b->size;
            if (b->allocated) {
                allocated += b->size;
                ++live;
            } else if (b->pending) {
                ++pending;
            } else if (b->mapped) {
                ++cached;
                if (!b->pool->blocks.count(const_cast<Block*>(b)))
                    return fmt::format("free block {:#x} missing from its pool", b->addr);
            } else {
                ++unmapped;
            }
            at += b->size;
            prev = b;
        }
        if (at != s->addr + s->size)
            return fmt::format("segment {:#x}: blocks end at {:#x}, not at its end", s->addr, at);
        if (mapped != s->mapped)
            return fmt::format("segment {:#x}: mapped bytes disagree", s->addr);
    }
    size_t inPools = 0, unmappedInPools = 0;
    auto count = [&](const PoolPair& p) {
        inPools += p.large.blocks.size() + p.small.blocks.size();
        unmappedInPools += p.large.unmapped.size() + p.small.unmapped.size();
    };
    count(*default_);
    for (const auto& [id, p] : private_)
        count(*p);
    if (cached != inPools || unmapped != unmappedInPools)
        return "pools hold blocks that are not in any live segment";
    if (pending != c_.pendingBlocks || pending != static_cast<int64_t>(pending_.size()))
        return "pending blocks disagree with the pending list";
    if (reserved != c_.reserved || allocated != c_.allocated || live != c_.liveBlocks)
        return "counters disagree with the blocks";
    return {};
}

} // namespace fs::alloc
