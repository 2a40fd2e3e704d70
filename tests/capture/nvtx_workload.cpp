// A CPU-only target for the NVTX path of the agent: a custom sub-allocator that reports its heap
// and regions through the NVTX memory extension, frames as NVTX ranges and per-frame quality as
// `metric` marks. Header-only NVTX (no CUDA runtime, no driver): run under `fragscope record`, the
// agent is loaded through NVTX_INJECTION64_PATH. tst_capture_nvtx checks the session against the
// sequence below; the "heap" addresses are host memory, which is all NVTX needs.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "nvtx_mem_desc.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace {

nvtxDomainHandle_t g_domain = nullptr;

nvtxMemHeapHandle_t heap(void* base, size_t size, uint32_t usage, const char* name)
{
    nvtxMemVirtualRangeDesc_t range{size, base};
    const nvtxMemHeapDesc_t d = fstest::heapDesc(range, usage, name);
    return nvtxMemHeapRegister(g_domain, &d);
}

void regions(nvtxMemHeapHandle_t h, const nvtxMemVirtualRangeDesc_t* r, size_t n,
             nvtxMemRegionHandle_t* handles = nullptr)
{
    const auto b = fstest::regionsBatch(h, r, n, handles);
    nvtxMemRegionsRegister(g_domain, &b);
}

void unregister(const nvtxMemRegionRef_t* refs, size_t n, uint32_t refType)
{
    const auto b = fstest::unregisterBatch(refs, n, refType);
    nvtxMemRegionsUnregister(g_domain, &b);
}

void metric(const char* text)
{
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text;
    nvtxDomainMarkEx(g_domain, &a);
}

// What the CUDA driver does at cuInit under CUDA_INJECTION64_PATH: call the agent's
// InitializeInjection (here the agent NVTX loaded; without a driver its CUPTI part must fail
// quietly and leave the NVTX part running). Returns false when the agent is not loaded.
bool initializeInjectionLikeTheDriver()
{
    const char* path = std::getenv("NVTX_INJECTION64_PATH");
    void* h = path ? ::dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    auto* init = h ? reinterpret_cast<int (*)()>(::dlsym(h, "InitializeInjection")) : nullptr;
    return init && init() == 1;
}

} // namespace

int main(int argc, char** argv)
{
    g_domain = nvtxDomainCreateA("fragscope-test");
    if (argc > 1 && std::strcmp(argv[1], "--cuda-init-after-nvtx") == 0 &&
        !initializeInjectionLikeTheDriver())
        return 4;
    char* a = static_cast<char*>(std::aligned_alloc(1 << 20, 1 << 20));
    char* bmem = static_cast<char*>(std::aligned_alloc(1 << 16, 1 << 16));
    // Heap A: a sub-allocator over 1 MiB.
    nvtxMemHeapHandle_t ha = heap(a, 1 << 20, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, "pool A");
    char text[96];
    for (int f = 0; f < 4; ++f) {
        std::snprintf(text, sizeof text, "frame %d", f);
        nvtxRangePushA(text);
        // Four regions per frame: 4, 8, 12, 16 KiB at 16 KiB strides.
        nvtxMemVirtualRangeDesc_t r[4];
        for (int k = 0; k < 4; ++k) {
            r[k].ptr = a + (f * 4 + k) * 16384;
            r[k].size = 4096u * static_cast<unsigned>(k + 1);
        }
        regions(ha, r, 4);
        // The 4 KiB and 12 KiB regions are given back inside the frame (by pointer).
        nvtxMemRegionRef_t refs[2];
        refs[0].pointer = r[0].ptr;
        refs[1].pointer = r[2].ptr;
        unregister(refs, 2, NVTX_MEM_REGION_REF_TYPE_POINTER);
        std::snprintf(text, sizeof text, "metric coherence_score=0.%d", 9 - f); // current frame
        nvtxMarkA(text);
        nvtxRangePop();
        std::snprintf(text, sizeof text, "metric flow_l2_px=1.5 frame=%d", f);
        metric(text);
    }
    // Reset: the 8 regions still live (8 and 16 KiB of each frame) all end here.
    nvtxMemHeapReset(g_domain, ha);
    nvtxMemVirtualRangeDesc_t again[3];
    for (int k = 0; k < 3; ++k) {
        again[k].ptr = a + k * 16384;
        again[k].size = 8192;
    }
    regions(ha, again, 3);
    // Unregistering the heap ends its 3 live regions, then the heap itself.
    nvtxMemHeapUnregister(g_domain, ha);

    // Heap B: a layout heap, regions addressed by handle, left registered at exit.
    nvtxMemHeapHandle_t hb = heap(bmem, 1 << 16, NVTX_MEM_HEAP_USAGE_TYPE_LAYOUT, "layout B");
    const nvtxRangeId_t id = nvtxRangeStartA("frame 4");
    nvtxMemVirtualRangeDesc_t rb[2] = {{1000, bmem}, {2000, bmem + 4096}};
    nvtxMemRegionHandle_t handles[2] = {nullptr, nullptr};
    regions(hb, rb, 2, handles);
    nvtxMemRegionRef_t ref;
    ref.handle = handles[0];
    unregister(&ref, 1, NVTX_MEM_REGION_REF_TYPE_HANDLE);
    metric("metric coherence_score=0.01 frame=4");
    nvtxRangeEnd(id);
    std::printf("nvtx workload done\n");
    // The heaps' memory is the program's own: freed, so that an ASan build reports no leak.
    std::free(a);
    std::free(bmem);
    return handles[0] != nullptr && handles[1] != nullptr ? 0 : 3; // the tool gave handles
}
