// fs::alloc::CachingAllocator: the project's one model of PyTorch's CUDA caching allocator,
// written from the rules of c10/cuda/CUDACachingAllocator.cpp in PyTorch 2.4 (pytorch/pytorch
// commit 001074d2). The simulator and `fragscope whatif` both drive it. Each rule is documented
// where it is implemented (caching_allocator.cpp) and listed in docs/whatif.md "Rules".
//
// What it leaves out, because a recorded request stream cannot exercise it: which streams use a
// block (record_stream: the caller says, through freeRequested/completeFree, when a block's
// events complete), free-memory callbacks, IPC, CUDA-graph capture's own rules beyond private
// pools. Newer PyTorch's settings (max_non_split_rounding_mb, per_process_memory_fraction,
// expandable_segments_reserve, MemPool's use_on_oom and no_split) follow today's
// CUDACachingAllocator.cpp; the settings it does not replay are named by Config::unmodelled().
#pragma once

#include "config.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace fs::alloc {

struct Segment;
struct BlockPool;

struct Block
{
    uint64_t addr = 0;
    uint64_t size = 0;
    uint64_t requested = 0; // the caller's size (orig_size) while allocated
    Block* prev = nullptr;  // neighbours inside the segment, in address order
    Block* next = nullptr;
    Segment* segment = nullptr;
    BlockPool* pool = nullptr;
    int64_t gcBase = 0; // pool's free-block-search count when the block was cached
    uint64_t user = 0;  // caller's tag (the replay keeps the allocation's index here)
    uint32_t stream = 0;
    bool allocated = false;
    bool mapped = true;       // false: an unbacked part of an expandable segment
    bool pending = false;     // freed, waiting on stream events (neither allocated nor cached)
    uint32_t pendingSlot = 0; // position in CachingAllocator's pending list while pending
    bool isSplit() const { return prev || next; }
};

struct Segment
{
    uint64_t addr = 0;
    uint64_t size = 0;   // cudaMalloc size; for an expandable segment its address-space size
    uint64_t mapped = 0; // bytes backed by memory (== size unless expandable)
    uint32_t stream = 0;
    int poolId = 0; // 0: the default pools; else a private pool
    bool small = false;
    bool expandable = false;
    Block* head = nullptr; // lowest-addressed block
    size_t index = 0;      // position in CachingAllocator's live list
};

// What cudaMalloc and cuMemAddressReserve do: where a new segment lands, and whether the device
// has room. Implementations: the simulator's VA model, the replay's recorded addresses.
class DeviceMemory
{
public:
    virtual ~DeviceMemory() = default;
    // Address for `size` bytes of new device memory; 0 when the device is full. `reserved` is
    // what the allocator holds now (for a capacity check).
    virtual uint64_t malloc(uint64_t size, uint64_t reserved) = 0;
    virtual void free(uint64_t addr, uint64_t size) = 0;
    // Address space for an expandable segment (no memory behind it yet).
    virtual uint64_t reserveAddressSpace(uint64_t size) = 0;
    // Whether `bytes` more can be mapped into an expandable segment.
    virtual bool canMap(uint64_t bytes, uint64_t reserved) = 0;
    // Device memory in bytes (an expandable segment reserves 9/8 of it as address space).
    virtual uint64_t totalMemory() const = 0;
};

// Returns [addr, addr + size) to a map of free ranges (start -> size), merging neighbours.
void releaseRange(std::map<uint64_t, uint64_t>& free, uint64_t addr, uint64_t size);

// A device with a fixed capacity (bytes the allocator may hold) and first-fit placement in a
// plain address space from `base`. Tests and what-if runs with settings other than recorded.
class SimpleDevice : public DeviceMemory
{
public:
    explicit SimpleDevice(uint64_t capacity, uint64_t base = 0x7f0000000000ULL);
    uint64_t malloc(uint64_t size, uint64_t reserved) override;
    void free(uint64_t addr, uint64_t size) override;
    uint64_t reserveAddressSpace(uint64_t size) override;
    bool canMap(uint64_t bytes, uint64_t reserved) override;
    uint64_t totalMemory() const override { return capacity_; }

protected:
    uint64_t place(uint64_t size);
    uint64_t capacity_;
    std::map<uint64_t, uint64_t> free_; // start -> size
};

// Told about segment-level changes (the simulator turns them into session events).
class Listener
{
public:
    virtual ~Listener() = default;
    virtual void segmentCreated(const Segment&) {}
    virtual void segmentReleased(const Segment&) {}
    virtual void mapped(const Segment&, uint64_t /*addr*/, uint64_t /*size*/) {}
    virtual void unmapped(const Segment&, uint64_t /*addr*/, uint64_t /*size*/) {}
    // A request no rule could serve: size asked, its stream, free device memory left.
    virtual void oom(uint64_t /*requested*/, uint32_t /*stream*/, uint64_t /*deviceFree*/) {}
    // A block freed with freeRequested() returns to its pool (completeFree, or the synchronize
    // that releasing cached blocks starts with); called before it merges with its neighbours.
    virtual void freeCompleted(const Block&) {}
};

struct Counters
{
    int64_t allocs = 0;
    int64_t frees = 0;
    int64_t cudaMallocs = 0;  // segments created (or expandable mappings made)
    int64_t cudaFrees = 0;    // segments released (or unmappings)
    int64_t ooms = 0;         // failed malloc() calls
    int64_t retries = 0;      // num_alloc_retries: malloc retried after freeing every cached block
    int64_t cacheFlushes = 0; // release of cached blocks to make room (retry or empty_cache)
    int64_t gcReleases = 0;   // blocks released by garbage_collection_threshold
    uint64_t reserved = 0;    // bytes backed by device memory
    uint64_t allocated = 0;   // bytes in allocated blocks (rounded sizes)
    uint64_t peakReserved = 0;
    uint64_t peakAllocated = 0;
    int64_t liveBlocks = 0;
    int64_t liveSegments = 0;
    int64_t pendingBlocks = 0; // freed, waiting on stream events
    int64_t syncedFrees = 0;   // pending frees completed by a synchronize (retry, empty_cache)
};

// Free cached space (mapped, not allocated), for the simulator's per-frame figures.
struct FreeSpace
{
    uint64_t totalFree = 0;
    uint64_t largestFree = 0;
    int64_t fragments = 0;
    // 1 - largest / total (the fragmentation ratio's definition, docs/analysis.md), 0 when
    // nothing is free: the simulator's per-frame figure before a session exists.
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
    static constexpr uint64_t kMinBlockSize = 512;
    static constexpr uint64_t kSmallSize = 1ull << 20;      // 1 MiB
    static constexpr uint64_t kSmallBuffer = 2ull << 20;    // 2 MiB
    static constexpr uint64_t kLargeBuffer = 20ull << 20;   // 20 MiB
    static constexpr uint64_t kMinLargeAlloc = 10ull << 20; // 10 MiB
    static constexpr uint64_t kRoundLarge = 2ull << 20;     // 2 MiB

    // `gcLimit`: the per-process limit garbage_collection_threshold is a fraction of (PyTorch's
    // allowed_memory_maximum, set by set_per_process_memory_fraction); 0 disables GC as PyTorch
    // does when no fraction is set.
    CachingAllocator(Config cfg, DeviceMemory& device, Listener* listener = nullptr,
                     uint64_t gcLimit = 0);
    ~CachingAllocator();
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    // DeviceCachingAllocator::malloc. nullptr on OOM (Listener::oom told).
    Block* malloc(uint64_t size, uint32_t stream, int poolId = 0);
    void free(Block* b);
    // Rule 12: a free while other streams still use the block (record_stream). The caller stops
    // using it (allocated bytes drop at once, as PyTorch's free() counts them), but it stays out
    // of the pool, unmerged, until completeFree() (process_events: its events completed) or
    // until cached blocks are released (synchronize_and_free_events).
    void freeRequested(Block* b);
    // Returns a pending block to its pool. Only for a block still pending.
    void completeFree(Block* b);
    // Whether malloc() would serve the request from a cached block (no cudaMalloc). Changes
    // nothing, not even garbage collection's ages.
    bool canReuse(uint64_t size, uint32_t stream, int poolId = 0) const;
    // torch.cuda.empty_cache(): release_cached_blocks.
    void emptyCache();
    // Releases a private pool's cached segments (its graphs are gone: use_count 0).
    void releasePool(int poolId);
    // torch.cuda.MemPool(use_on_oom=, no_split=) for private pool `poolId` (not 0): no_split:
    // its blocks are never split (a request takes a whole cached block); use_on_oom: a request
    // of the default pool that would OOM takes a fitting cached block of this pool first.
    void setPoolOptions(int poolId, bool noSplit, bool useOnOom);
    // The per-process limit on reserved bytes (allowed_memory_maximum), 0 when none.
    uint64_t processLimit() const { return gcLimit_; }

    const Config& config() const { return cfg_; }
    const Counters& counters() const { return c_; }
    FreeSpace freeSpace() const;
    // Live segments in address order.
    std::vector<const Segment*> segments() const;
    // First block of a segment (address order through ->next).
    const Block* firstBlock(const Segment& s) const;
    // Bookkeeping check for tests: empty when consistent, else what is wrong.
    std::string checkConsistency() const;

    uint64_t roundSize(uint64_t size) const { return roundSize(size, cfg_); }
    uint64_t allocationSize(uint64_t rounded) const { return allocationSize(rounded, cfg_); }
    static uint64_t roundSize(uint64_t size, const Config& cfg);
    static uint64_t allocationSize(uint64_t rounded, const Config& cfg);
    static uint64_t roundupPower2NextDivision(uint64_t size, uint64_t divisions);
    // Rule 5 (should_split): whether a free block of `blockSize` bytes that serves a request of
    // `size` (rounded) bytes is split, the rest staying free; else the caller gets all of it.
    static bool splits(uint64_t blockSize, uint64_t size, bool smallPool, const Config& cfg);
    // Rule 2 (get_pool): whether a request of `rounded` bytes is served from the small pool.
    static bool smallPool(uint64_t rounded) { return rounded <= kSmallSize; }

private:
    struct PoolPair;
    PoolPair& pools(int poolId);
    BlockPool& poolFor(uint64_t rounded, int poolId);
    bool getFreeBlock(BlockPool& pool, uint64_t size, uint32_t stream, Block*& out);
    bool allocBlock(BlockPool& pool, uint64_t size, uint64_t allocSize, uint32_t stream,
                    bool isRetry, Block*& out);
    Block* tryAllocateExpandable(BlockPool& pool, uint64_t size, uint32_t stream);
    Block* findExpandableBlock(BlockPool& pool, uint64_t size, uint32_t stream);
    bool mapBlock(Block* b, uint64_t size);
    void unmapBlock(Block* b);
    bool releaseAvailableCachedBlocks(BlockPool& pool, uint64_t size, uint32_t stream);
    bool releaseCachedBlocks();
    void releaseBlocks(BlockPool& pool);
    void releaseBlock(Block* b);
    void synchronizeAndFreeEvents();
    void leaveCaller(Block* b);
    void freeBlock(Block* b);
    void garbageCollect();
    bool shouldSplit(const Block* b, uint64_t size) const;
    size_t tryMerge(Block* dst, Block* src, BlockPool& pool);
    void insertFree(BlockPool& pool, Block* b);
    Block* newBlock();
    void dropBlock(Block* b);
    void touchPeaks();
    Block* addSegment(BlockPool& pool, uint64_t addr, uint64_t size, uint32_t stream,
                      bool expandable);
    void removeSegment(Segment* s);

    Config cfg_;
    DeviceMemory& device_;
    Listener* listener_;
    uint64_t gcLimit_;
    Counters c_;
    std::unique_ptr<PoolPair> default_;
    std::map<int, std::unique_ptr<PoolPair>> private_;
    std::vector<Segment*> segments_; // live, unordered (swap-remove)
    std::vector<Block*> pending_;    // freeRequested, not completed (swap-remove)
    std::deque<Block> blockStore_;
    std::vector<Block*> spareBlocks_;
    std::deque<Segment> segmentStore_;
    std::vector<Segment*> spareSegments_;
};

} // namespace fs::alloc
