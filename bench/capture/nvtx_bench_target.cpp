// Target of bench_capture_nvtx: a sub-allocator's NVTX traffic in a tight loop (per iteration 4
// regions registered and 2 unregistered in two batch calls; every 64 iterations a frame range, a
// metric mark and a heap reset), timed by itself. Prints "NVTXBENCH calls=N seconds=S" and the
// events it caused ("events=E": Alloc/Free/Range/Mark/RegionCreate). Header-only NVTX.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "../../tests/capture/nvtx_mem_desc.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv)
{
    const long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
    static char arena[64 * 4 * 4096];
    nvtxDomainHandle_t domain = nvtxDomainCreateA("bench");
    nvtxMemVirtualRangeDesc_t range{sizeof arena, arena};
    const nvtxMemHeapDesc_t hd =
        fstest::heapDesc(range, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, "bench arena");
    nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(domain, &hd);
    long calls = 2; // nvtxDomainCreateA, nvtxMemHeapRegister
    char text[64];
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) {
        // A frame every 64 iterations (frames are rare next to a sub-allocator's traffic).
        if (i % 64 == 0) {
            std::snprintf(text, sizeof text, "frame %ld", i / 64);
            nvtxRangePushA(text);
            ++calls;
        }
        nvtxMemVirtualRangeDesc_t r[4];
        for (int k = 0; k < 4; ++k) {
            r[k].ptr = arena + ((i % 64) * 4 + k) * 4096;
            r[k].size = 1024u * static_cast<unsigned>(k + 1);
        }
        const auto reg = fstest::regionsBatch(heap, r, 4);
        nvtxMemRegionsRegister(domain, &reg);
        nvtxMemRegionRef_t refs[2];
        refs[0].pointer = r[0].ptr;
        refs[1].pointer = r[2].ptr;
        const auto un = fstest::unregisterBatch(refs, 2, NVTX_MEM_REGION_REF_TYPE_POINTER);
        nvtxMemRegionsUnregister(domain, &un);
        calls += 2;
        if (i % 64 == 63) {
            nvtxMemHeapReset(domain, heap);
            std::snprintf(text, sizeof text, "metric coherence_score=0.5 frame=%ld", i / 64);
            nvtxMarkA(text);
            nvtxRangePop();
            calls += 3;
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nvtxMemHeapUnregister(domain, heap);
    std::printf("NVTXBENCH calls=%ld seconds=%.6f\n", calls, s);
    return 0;
}
