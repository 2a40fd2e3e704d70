// The NVTX memory extension (nvtxMemHeapRegister, nvtxMemRegionsRegister, ...) -> wire events.
// A custom sub-allocator that reports through NVTX is seen at the framework level:
//   heap register     -> RegionCreate (level framework; kind pool for a sub-allocator heap,
//                        segment for a layout heap), name = the heap's message
//   regions register  -> Alloc (level framework) per region
//   regions unregister-> Free per region
//   regions resize    -> Free + Alloc of the new size at the same address
//   heap reset        -> Free of every region still live in the heap
//   heap unregister   -> Free of every region still live in it, then RegionDestroy
// Pure bookkeeping (no NVTX state, no I/O), so it is tested directly and from the NVTX handlers.
#pragma once

#include "agent_core.h"

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExtMem.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fs::agent {

class NvtxMemTracker
{
public:
    // Live regions tracked at most (beyond: still reported, but a reset cannot free them).
    static constexpr size_t kMaxRegions = 1u << 22;

    // Returns the heap's handle: its start address for virtual-address heaps (as the NVTX
    // specification asks), a tool-made handle for other types (whose regions are ignored).
    nvtxMemHeapHandle_t heapRegister(const nvtxMemHeapDesc_t* desc, int64_t t,
                                     std::vector<SideEvent>& out);
    void heapUnregister(nvtxMemHeapHandle_t heap, int64_t t, std::vector<SideEvent>& out);
    void heapReset(nvtxMemHeapHandle_t heap, int64_t t, std::vector<SideEvent>& out);
    void regionsRegister(const nvtxMemRegionsRegisterBatch_t* b, int64_t t,
                         std::vector<SideEvent>& out);
    void regionsResize(const nvtxMemRegionsResizeBatch_t* b, int64_t t,
                       std::vector<SideEvent>& out);
    void regionsUnregister(const nvtxMemRegionsUnregisterBatch_t* b, int64_t t,
                           std::vector<SideEvent>& out);

    // Writes each region's handle (its address) into b->regionHandleElementsOut, as
    // regionsRegister does, without tracking anything: what an idle agent still owes the caller.
    static void fillHandles(const nvtxMemRegionsRegisterBatch_t* b);

    size_t heaps() const;
    size_t liveRegions() const;
    uint64_t ignored() const; // malformed descriptors, unknown types

private:
    struct Heap
    {
        uint64_t address = 0;
        uint64_t size = 0;
        bool virtualAddress = false;
        std::map<uint64_t, uint64_t> regions; // address -> size
    };
    void freeAll(Heap& h, int64_t t, std::vector<SideEvent>& out);
    void freeRegion(uint64_t address, int64_t t, std::vector<SideEvent>& out);
    // Registers [address, size) in heap h (handle) and reports its Alloc.
    void track(uint64_t handle, Heap& h, uint64_t address, uint64_t size, int64_t t,
               std::vector<SideEvent>& out);

    mutable std::mutex mu_;
    std::unordered_map<uint64_t, Heap> heaps_;          // by handle; 0 = the process-wide heap
    std::unordered_map<uint64_t, uint64_t> regionHeap_; // region address -> heap handle
    uint64_t nextOpaque_ = 1;
    size_t regionCount_ = 0;
    uint64_t ignored_ = 0;
};

// Text of an NVTX message (ASCII, wide, or a registered string handle; the agent's
// nvtxDomainRegisterString returns a pointer to its own copy of the text).
std::string nvtxMessageText(uint32_t messageType, const nvtxMessageValue_t& m);

} // namespace fs::agent
