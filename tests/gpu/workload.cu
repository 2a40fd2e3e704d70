// GPU workload for scripts/gpu-check.sh: exercises every path the capture agent records and
// prints its own counts, so the recorded session can be checked against them.
//   - cudaMalloc/cudaFree in a fragmenting pattern (driver level)
//   - cudaMallocAsync from a memory pool with a release threshold (pool level), then a trim
//   - a VMM reservation (cuMemAddressReserve / cuMemCreate / cuMemMap / unmap / free)
//   - a CUDA graph captured once and replayed N times
//   - NVTX "frame N" ranges and "metric NAME=VALUE frame=N" marks
//   - a custom sub-allocator reporting through the NVTX memory extension: one heap over a
//     cudaMalloc'd arena, regions registered and unregistered per frame, a reset, an unregister
//   - two deliberately impossible allocations (cudaMalloc and cudaMallocAsync of 1 PiB) that
//     must fail with out-of-memory: the OOMs a user would see
// Output: one line "WORKLOAD key=value ..." on stdout. Exit status 0 when CUDA worked.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "../capture/nvtx_mem_desc.h" // the NVTX memory-extension descriptors

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "workload: %s failed: %s (line %d)\n", #x,                        \
                         cudaGetErrorString(e_), __LINE__);                                        \
            std::exit(2);                                                                          \
        }                                                                                          \
    } while (0)
#define CHECK_CU(x)                                                                                \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            std::fprintf(stderr, "workload: %s failed: %d (line %d)\n", #x, static_cast<int>(r_),  \
                         __LINE__);                                                                \
            std::exit(2);                                                                          \
        }                                                                                          \
    } while (0)

// The NVTX memory extension's calls for a sub-allocator (addresses are device addresses).
nvtxMemHeapHandle_t nvtxHeap(nvtxDomainHandle_t domain, void* base, size_t size)
{
    nvtxMemVirtualRangeDesc_t range = {size, base};
    const nvtxMemHeapDesc_t d =
        fstest::heapDesc(range, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, "workload arena");
    return nvtxMemHeapRegister(domain, &d);
}

void nvtxRegion(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap, void* p, size_t size)
{
    nvtxMemVirtualRangeDesc_t r = {size, p};
    const nvtxMemRegionsRegisterBatch_t b = fstest::regionsBatch(heap, &r, 1);
    nvtxMemRegionsRegister(domain, &b);
}

void nvtxRegionFree(nvtxDomainHandle_t domain, void* p)
{
    nvtxMemRegionRef_t ref;
    ref.pointer = p;
    const nvtxMemRegionsUnregisterBatch_t b =
        fstest::unregisterBatch(&ref, 1, NVTX_MEM_REGION_REF_TYPE_POINTER);
    nvtxMemRegionsUnregister(domain, &b);
}

__global__ void fill(float* p, size_t n, float v)
{
    size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (i < n) p[i] = v;
}

__global__ void axpy(float* y, const float* x, size_t n, float a)
{
    size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

int main(int argc, char** argv)
{
    const int frames = argc > 1 ? std::atoi(argv[1]) : 24;
    const int graphReplays = argc > 2 ? std::atoi(argv[2]) : 50;
    long mallocs = 0, frees = 0, asyncAllocs = 0, asyncFrees = 0, kernels = 0, graphLaunches = 0,
         metrics = 0;
    long vmmReserves = 0, vmmMaps = 0, ooms = 0, graphExecs = 0;
    long nvtxHeaps = 0, nvtxRegions = 0, nvtxRegionFrees = 0;
    unsigned long long nvtxRegionBytes = 0;

    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(nullptr)); // context created (and the agent loaded) before the clock starts
    const auto t0 = std::chrono::steady_clock::now();
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));

    // Memory pool with a release threshold: freed memory stays reserved up to 64 MiB.
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t threshold = 64ull << 20;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

    // VMM: reserve 64 MiB of address space, back 2 MiB of it, unmap, release.
    {
        CUdevice dev;
        CHECK_CU(cuDeviceGet(&dev, 0));
        CUmemAllocationProp prop = {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        size_t gran = 0;
        CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        const size_t reserve = 64ull << 20;
        CUdeviceptr va = 0;
        CHECK_CU(cuMemAddressReserve(&va, reserve, 0, 0, 0));
        ++vmmReserves;
        CUmemGenericAllocationHandle h;
        CHECK_CU(cuMemCreate(&h, gran, &prop, 0));
        CHECK_CU(cuMemMap(va, gran, 0, h, 0));
        ++vmmMaps;
        CUmemAccessDesc access = {};
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CHECK_CU(cuMemSetAccess(va, gran, &access, 1));
        CHECK_CU(cuMemUnmap(va, gran));
        CHECK_CU(cuMemRelease(h));
        CHECK_CU(cuMemAddressFree(va, reserve));
    }

    // A graph: fill + axpy on fixed buffers, captured once, replayed below.
    const size_t n = 1 << 20;
    float *gx = nullptr, *gy = nullptr;
    CHECK(cudaMalloc(&gx, n * sizeof(float)));
    CHECK(cudaMalloc(&gy, n * sizeof(float)));
    mallocs += 2;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    fill<<<(n + 255) / 256, 256, 0, stream>>>(gx, n, 1.0f);
    axpy<<<(n + 255) / 256, 256, 0, stream>>>(gy, gx, n, 2.0f);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    ++graphExecs;

    // A custom sub-allocator over a 16 MiB arena, seen through the NVTX memory extension.
    nvtxDomainHandle_t domain = nvtxDomainCreateA("workload");
    char* arena = nullptr;
    const size_t arenaBytes = 16u << 20;
    CHECK(cudaMalloc(&arena, arenaBytes));
    ++mallocs;
    nvtxMemHeapHandle_t heap = nvtxHeap(domain, arena, arenaBytes);
    ++nvtxHeaps;

    std::vector<float*> keep;
    for (int f = 0; f < frames; ++f) {
        char msg[64];
        std::snprintf(msg, sizeof msg, "frame %d", f);
        nvtxRangePushA(msg);
        // Driver level: allocate a spread of sizes, free every other one (fragmenting).
        std::vector<float*> bufs;
        for (int i = 0; i < 8; ++i) {
            float* p = nullptr;
            const size_t bytes = (size_t(1) << (16 + (i + f) % 8));
            CHECK(cudaMalloc(&p, bytes));
            ++mallocs;
            fill<<<(bytes / 4 + 255) / 256, 256, 0, stream>>>(p, bytes / 4, float(f));
            ++kernels;
            bufs.push_back(p);
        }
        for (size_t i = 0; i < bufs.size(); ++i) {
            if (i % 2 == 0) {
                CHECK(cudaFree(bufs[i]));
                ++frees;
            } else {
                keep.push_back(bufs[i]);
            }
        }
        // Pool level.
        for (int i = 0; i < 16; ++i) {
            void* p = nullptr;
            CHECK(cudaMallocAsync(&p, size_t(1) << (12 + i % 10), stream));
            ++asyncAllocs;
            CHECK(cudaFreeAsync(p, stream));
            ++asyncFrees;
        }
        // Sub-allocator: 4 blocks of 64..256 KiB per frame at fixed slots; two go back at once.
        for (int i = 0; i < 4; ++i) {
            char* p = arena + (size_t(f % 8) * 4 + i) * (512u << 10);
            const size_t bytes = size_t(64u << 10) * (i + 1);
            nvtxRegion(domain, heap, p, bytes);
            ++nvtxRegions;
            nvtxRegionBytes += bytes;
            if (i % 2 == 0) {
                nvtxRegionFree(domain, p);
                ++nvtxRegionFrees;
            }
        }
        // Every 8 frames the sub-allocator starts afresh: the reset frees its live blocks.
        if (f % 8 == 7) {
            nvtxMemHeapReset(domain, heap);
            nvtxRegionFrees += 2 * 8;
        }
        // Graph replays spread over the frames.
        const int per = graphReplays / frames + (f < graphReplays % frames ? 1 : 0);
        for (int r = 0; r < per; ++r) {
            CHECK(cudaGraphLaunch(exec, stream));
            ++graphLaunches;
        }
        CHECK(cudaStreamSynchronize(stream));
        nvtxRangePop();
        std::snprintf(msg, sizeof msg, "metric coherence_score=%.3f frame=%d",
                      f == frames / 2 ? 0.009 : 0.9, f);
        nvtxMarkA(msg);
        ++metrics;
    }
    CHECK(cudaMemPoolTrimTo(pool, 0));
    for (float* p : keep) {
        CHECK(cudaFree(p));
        ++frees;
    }
    // Blocks still live (frames since the last reset: 2 each) end with the heap.
    nvtxRegionFrees += 2 * (frames % 8);
    nvtxMemHeapUnregister(domain, heap);
    CHECK(cudaFree(arena));
    ++frees;
    // Two deliberate, impossible allocations of 1 PiB: each must fail with out-of-memory (and
    // the agent must report the driver's CUDA_ERROR_OUT_OF_MEMORY with the requested size).
    long oomErrors = 0;
    {
        void* p = nullptr;
        cudaError_t e = cudaMalloc(&p, size_t(1) << 50);
        if (e == cudaErrorMemoryAllocation)
            ++ooms;
        else if (e == cudaSuccess)
            cudaFree(p);
        else
            ++oomErrors,
                std::fprintf(stderr, "workload: 1 PiB cudaMalloc: %s\n", cudaGetErrorString(e));
        cudaGetLastError(); // clear the error state
        e = cudaMallocAsync(&p, size_t(1) << 50, stream);
        if (e == cudaErrorMemoryAllocation)
            ++ooms;
        else if (e == cudaSuccess)
            cudaFreeAsync(p, stream);
        else
            ++oomErrors, std::fprintf(stderr, "workload: 1 PiB cudaMallocAsync: %s\n",
                                      cudaGetErrorString(e));
        cudaGetLastError();
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(gx));
    CHECK(cudaFree(gy));
    frees += 2;
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaDeviceSynchronize());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "WORKLOAD frames=%d cuda_malloc=%ld cuda_free=%ld malloc_async=%ld free_async=%ld "
        "kernels=%ld "
        "graph_launches=%ld graph_execs=%ld metrics=%ld vmm_reserves=%ld vmm_maps=%ld ooms=%ld "
        "nvtx_heaps=%ld nvtx_regions=%ld nvtx_region_frees=%ld nvtx_region_bytes=%llu "
        "seconds=%.3f\n",
        frames, mallocs, frees, asyncAllocs, asyncFrees, kernels, graphLaunches, graphExecs,
        metrics, vmmReserves, vmmMaps, ooms, nvtxHeaps, nvtxRegions, nvtxRegionFrees,
        nvtxRegionBytes, secs);
    // Both impossible allocations must have failed with out-of-memory, nothing else.
    return ooms == 2 && oomErrors == 0 ? 0 : 3;
}
