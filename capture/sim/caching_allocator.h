// The simulator's allocator: the project's one allocator model (core/alloc, PyTorch's caching
// allocator rule by rule, docs/whatif.md) with default settings, placed in the simulator's
// sparse VA model and turned into session events: segments as RegionCreate/RegionDestroy, blocks
// as Alloc/Free, both at level Framework; OOMs as Oom events.
#pragma once

#include "core/alloc/caching_allocator.h"
#include "event_writer.h"
#include "va_space.h"

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace fs::sim {

using Block = fs::alloc::Block;
using FreeSpace = fs::alloc::FreeSpace;

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

// One memory pool's figures as the model holds them (the graph workloads' ground truth).
struct PoolCounters
{
    uint64_t reserved = 0;
    uint64_t allocated = 0;
    uint64_t peakReserved = 0;
    uint64_t peakAllocated = 0;
    int64_t liveSegments = 0;
    int64_t segmentsCreated = 0;
};

class CachingAllocator : private fs::alloc::DeviceMemory, private fs::alloc::Listener
{
public:
    static constexpr uint64_t kMinBlock = fs::alloc::CachingAllocator::kMinBlockSize;

    CachingAllocator(EventWriter& out, uint64_t capacity, uint32_t device, uint64_t seed,
                     fs::alloc::Config cfg = {});
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    // Allocates `bytes` for `stream` at time `t`; emits an Oom event and returns nullptr when the
    // device is full. `pool`: a private memory pool (the session's pool id, PyTorch's (a, b) as
    // a << 32 | b, as a CUDA graph capture allocates); 0 is the default pool.
    Block* allocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t, uint64_t pool = 0);
    // Same, but a failure is silent: the caller has a fallback (a smaller workspace).
    Block* tryAllocate(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t);
    void free(Block* b, int64_t t);
    // torch.cuda.empty_cache(): releases every fully free segment.
    void emptyCache(int64_t t);
    // free() of a block another stream still uses (record_stream): the caller is done with it at
    // t (a Free event), but its memory returns to the pool only when that stream's work ends at
    // `until` (a PendingFree event spanning [t, until]): at the first allocator call from then
    // on, or earlier when the allocator synchronizes to release its cache, which then waits
    // until `until` (time() moves on: the host stalls).
    void freePending(Block* b, int64_t t, int64_t until);
    // Memory outside the allocator (another process, communication buffers): a driver-level
    // region of `bytes` (rounded up to 2 MiB) that counts against the capacity. Returns its
    // address, 0 when the device has no room.
    uint64_t externalAlloc(uint64_t bytes, int64_t t);
    void externalFree(uint64_t address, int64_t t);
    uint64_t externalBytes() const { return external_; }
    // Largest cached free block of the large pool that a request on `stream` could take.
    uint64_t largestFree(uint32_t stream) const;
    // The allocator's clock: the time of its last call, later when it waited on another stream.
    int64_t time() const { return now_; }

    const AllocatorCounters& counters() const;
    // Per pool (session pool id), every pool that ever held a segment or was allocated from.
    const std::map<uint64_t, PoolCounters>& poolCounters() const { return pools_; }
    uint64_t capacity() const { return capacity_; }
    FreeSpace freeSpace() const { return model_.freeSpace(); }
    // The model's own bookkeeping check; empty when consistent. For tests.
    std::string checkConsistency() const;

    // PyTorch's rules with default settings (core/alloc).
    static uint64_t roundSize(uint64_t bytes);
    static uint64_t segmentSize(uint64_t rounded);

private:
    Block* allocateImpl(uint64_t bytes, uint32_t stream, const Name& tag, int64_t t, bool quiet,
                        uint64_t pool = 0);
    int modelPool(uint64_t pool); // the model's int id of a session pool id
    PoolCounters& poolOf(const fs::alloc::Segment& s);
    // DeviceMemory: segments land in the sparse VA model, within the capacity.
    uint64_t malloc(uint64_t size, uint64_t reserved) override;
    void free(uint64_t addr, uint64_t size) override;
    uint64_t reserveAddressSpace(uint64_t size) override;
    bool canMap(uint64_t bytes, uint64_t reserved) override;
    uint64_t totalMemory() const override { return capacity_; }
    // Listener: segment changes and OOMs become events.
    void segmentCreated(const fs::alloc::Segment& s) override;
    void segmentReleased(const fs::alloc::Segment& s) override;
    void oom(uint64_t requested, uint32_t stream, uint64_t deviceFree) override;
    void freeCompleted(const Block& b) override;
    void segmentEvent(EventType type, const fs::alloc::Segment& s);
    // process_events: pending frees whose other stream finished by t return to the pool.
    void processEvents(int64_t t);
    // The Free event of a block the caller is done with at t (after process_events); returns it.
    Event emitFree(const Block* b, int64_t t);

    EventWriter& out_;
    uint64_t capacity_;
    uint32_t device_;
    VaSpace va_;
    fs::alloc::CachingAllocator model_;
    mutable AllocatorCounters c_;
    int64_t now_ = 0;
    bool quiet_ = false;
    uint64_t pendingOomBytes_ = 0;
    bool oomPending_ = false;
    std::unordered_map<const Block*, int64_t> pendingUntil_; // pending block -> its stream's end
    std::unordered_map<uint64_t, uint64_t> externalRegions_; // address -> bytes
    uint64_t external_ = 0;
    std::map<uint64_t, int> modelPools_; // session pool id -> model pool id
    std::vector<uint64_t> sessionPools_{0};
    std::map<uint64_t, PoolCounters> pools_;
};

} // namespace fs::sim
