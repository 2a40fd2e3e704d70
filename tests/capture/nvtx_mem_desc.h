// Filling the NVTX memory extension's descriptors, shared by the programs and tests that call it
// (nvtx_workload.cpp, tst_capture_nvtx_mem.cpp, tests/gpu/workload.cu). Header-only NVTX only.
#pragma once

#include <nvtx3/nvToolsExtMem.h>

namespace fstest {

// A virtual-address heap over range, with usage NVTX_MEM_HEAP_USAGE_TYPE_* and an ASCII name.
inline nvtxMemHeapDesc_t heapDesc(const nvtxMemVirtualRangeDesc_t& range, uint32_t usage,
                                  const char* name)
{
    nvtxMemHeapDesc_t d = {};
    d.extCompatID = NVTX_EXT_COMPATID_MEM;
    d.structSize = sizeof d;
    d.usage = usage;
    d.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    d.typeSpecificDescSize = sizeof range;
    d.typeSpecificDesc = &range;
    d.messageType = NVTX_MESSAGE_TYPE_ASCII;
    d.message.ascii = name;
    return d;
}

// n virtual-address regions of heap (handles written to handlesOut when not null).
inline nvtxMemRegionsRegisterBatch_t regionsBatch(nvtxMemHeapHandle_t heap,
                                                  const nvtxMemVirtualRangeDesc_t* r, size_t n,
                                                  nvtxMemRegionHandle_t* handlesOut = nullptr)
{
    nvtxMemRegionsRegisterBatch_t b = {};
    b.extCompatID = NVTX_EXT_COMPATID_MEM;
    b.structSize = sizeof b;
    b.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    b.heap = heap;
    b.regionCount = n;
    b.regionDescElementSize = sizeof *r;
    b.regionDescElements = r;
    b.regionHandleElementsOut = handlesOut;
    return b;
}

// n region references of refType NVTX_MEM_REGION_REF_TYPE_POINTER or _HANDLE.
inline nvtxMemRegionsUnregisterBatch_t unregisterBatch(const nvtxMemRegionRef_t* refs, size_t n,
                                                       uint32_t refType)
{
    nvtxMemRegionsUnregisterBatch_t b = {};
    b.extCompatID = NVTX_EXT_COMPATID_MEM;
    b.structSize = sizeof b;
    b.refType = refType;
    b.refCount = n;
    b.refElementSize = sizeof *refs;
    b.refElements = refs;
    return b;
}

} // namespace fstest
