// The agent's driver-API callback logic (capture/agent/callbacks.cpp) without a GPU: real
// `cu*_params` structs from the installed CUDA 13 headers, wrapped in a CUpti_CallbackData as
// CUPTI passes it, through apiExitEvent (the exact function the agent's callback calls). CUPTI's
// own lookups (stream, device, graph and exec ids) need a live context, so fakes stand in.
#include "capture/agent/callbacks.h"
#include "decode_test_util.h"

#include <cupti.h>

#include <QTest>
#include <cstring>

using namespace fs;
namespace ev = fs::proto::ev;

namespace {

// Fake CUPTI lookups: ids derived from the handle values so that tests can predict them.
uint32_t fakeStream(CUcontext, CUstream s)
{
    return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(s) >> 4);
}
uint32_t fakeDevice(CUcontext)
{
    return 3;
}
uint64_t fakeGraph(CUgraph g)
{
    return reinterpret_cast<uintptr_t>(g) >> 4;
}
uint64_t fakeExec(CUgraphExec x)
{
    return reinterpret_cast<uintptr_t>(x) >> 4;
}
uint64_t fakeFree(CUcontext)
{
    return 12345;
}

template <class T> T handle(uintptr_t v)
{
    return reinterpret_cast<T>(v);
}

struct Call
{
    CUresult rc = CUDA_SUCCESS;
    CUpti_CallbackData info{};
    Call(const void* params, CUresult result, uint32_t correlation = 1)
    {
        rc = result;
        info.callbackSite = CUPTI_API_EXIT;
        info.functionParams = params;
        info.functionReturnValue = &rc;
        info.correlationId = correlation;
    }
    Call(const Call&) = delete;
};

struct FakeState : agent::ApiState
{
    FakeState() { resolve = {fakeStream, fakeDevice, fakeGraph, fakeExec, fakeFree}; }
};

// One API exit through apiExitEvent; returns whether it became an event.
bool exitEvent(CUpti_CallbackId cbid, const void* params, CUresult rc, agent::ApiState& st,
               proto::WireEvent& e, uint32_t correlation = 1)
{
    Call c(params, rc, correlation);
    return agent::apiExitEvent(cbid, c.info, 1000, st, e);
}

CUpti_ActivityGraphTrace2 graphTrace(uint32_t correlation, uint32_t graphId, uint64_t start)
{
    CUpti_ActivityGraphTrace2 g;
    std::memset(&g, 0, sizeof g);
    g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
    g.correlationId = correlation;
    g.graphId = graphId;
    g.start = start;
    g.end = start + 100;
    return g;
}

} // namespace

class TestCaptureCallbacks : public QObject
{
    Q_OBJECT
private slots:
    void vmmCallsBecomeRegionEvents()
    {
        FakeState st;
        proto::WireEvent e;
        CUdeviceptr reserved = 0x7f0000000000;
        cuMemAddressReserve_params reserve{&reserved, 64u << 20, 0, 0, 0};
        QVERIFY(
            exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &reserve, CUDA_SUCCESS, st, e));
        QCOMPARE(e.type, uint8_t{ev::RegionCreate});
        QCOMPARE(e.address, uint64_t{0x7f0000000000});
        QCOMPARE(e.size, uint64_t{64u << 20});
        QCOMPARE(e.level, uint8_t{ev::LevelFramework});
        QCOMPARE(e.regionKind, uint8_t{ev::KindVmm});
        QCOMPARE(e.time, int64_t{1000});

        cuMemMap_params map{0x7f0000200000, 2u << 20, 0, 0, 0};
        QVERIFY(exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS, st, e));
        QCOMPARE(e.type, uint8_t{ev::RegionMap});
        QCOMPARE(e.address, uint64_t{0x7f0000200000});
        QCOMPARE(e.size, uint64_t{2u << 20});

        cuMemUnmap_params unmap{0x7f0000200000, 2u << 20};
        QVERIFY(exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &unmap, CUDA_SUCCESS, st, e));
        QCOMPARE(e.type, uint8_t{ev::RegionUnmap});
        QCOMPARE(e.size, uint64_t{2u << 20});

        cuMemAddressFree_params release{0x7f0000000000, 64u << 20};
        QVERIFY(exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &release, CUDA_SUCCESS, st, e));
        QCOMPARE(e.type, uint8_t{ev::RegionDestroy});
        QCOMPARE(e.address, uint64_t{0x7f0000000000});

        // A failed VMM call changed nothing; API entry is not an event either.
        QVERIFY(
            !exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_ERROR_INVALID_VALUE, st, e));
        Call enter(&map, CUDA_SUCCESS);
        enter.info.callbackSite = CUPTI_API_ENTER;
        QVERIFY(!agent::apiExitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemMap, enter.info, 1, st, e));
    }

    void vmmMappingsSeenByTheMemoryActivityAreNotCountedTwice()
    {
        // CUPTI 13 also reports a mapped VMM range as a MEMORY2 allocation and release carrying
        // the mapping calls' correlation ids (seen on an H200: a cuMemCreate + cuMemMap of 2 MiB
        // came back as one more driver-level cudaMalloc). The callbacks mark each successful VMM
        // call's correlation id; the decoder drops MEMORY2 records with those ids.
        FakeState st;
        proto::WireEvent e;
        CUmemGenericAllocationHandle h = 0;
        CUmemAllocationProp prop{};
        cuMemCreate_params create{&h, 2u << 20, &prop, 0};
        cuMemMap_params map{0x7f0000200000, 2u << 20, 0, 0, 0};
        CUmemAccessDesc access{};
        cuMemSetAccess_params setAccess{0x7f0000200000, 2u << 20, &access, 1};
        cuMemUnmap_params unmap{0x7f0000200000, 2u << 20};
        cuMemRelease_params release{h};
        QVERIFY(!exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &create, CUDA_SUCCESS, st, e, 40));
        QVERIFY(exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS, st, e, 41));
        QVERIFY(!exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess, &setAccess, CUDA_SUCCESS, st, e,
                           42));
        QVERIFY(exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &unmap, CUDA_SUCCESS, st, e, 43));
        QVERIFY(
            !exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &release, CUDA_SUCCESS, st, e, 44));
        // A failed call did nothing: its id is not marked.
        QVERIFY(!exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_ERROR_INVALID_VALUE, st, e,
                           45));
        QCOMPARE(st.vmm.known(), size_t{5});
        QVERIFY(st.vmm.contains(42) && !st.vmm.contains(45));

        const auto record = [](bool alloc, uint32_t correlation, uint64_t addr) {
            return fstest::memoryRecord(alloc, addr, 2u << 20, 100 + correlation, false,
                                        correlation);
        };
        fstest::BufferBuilder b;
        b.add(record(true, 42, 0x7f0000200000));  // the mapping: dropped
        b.add(record(false, 43, 0x7f0000200000)); // its unmapping: dropped
        b.add(record(true, 45, 0x7f1000000000));  // a cudaMalloc (id 45 was a failed VMM call)
        b.add(record(false, 46, 0x7f1000000000)); // its cudaFree
        agent::DecodeState ds;
        const auto c = fstest::decodeBuffer(b, 0, &ds, nullptr, &st.vmm);
        // Kept: RegionCreate + Alloc, Free + RegionDestroy of the cudaMalloc, nothing else.
        QCOMPARE(c.events.size(), size_t{4});
        const uint8_t types[] = {ev::RegionCreate, ev::Alloc, ev::Free, ev::RegionDestroy};
        for (size_t i = 0; i < 4; ++i) {
            QCOMPARE(c.events[i].type, types[i]);
            QCOMPARE(c.events[i].address, uint64_t{0x7f1000000000});
        }
        QCOMPARE(ds.vmmRecords, uint64_t{2});
        // Without the callbacks' marks (DecodeState::vmm null) all four records count.
        agent::DecodeState plain;
        QCOMPARE(fstest::decodeBuffer(b, 0, &plain).events.size(), size_t{8});
        QCOMPARE(plain.vmmRecords, uint64_t{0});
    }

    void outOfMemoryFromEveryAllocationApi()
    {
        FakeState st;
        proto::WireEvent e;
        CUdeviceptr p = 0;
        const CUstream stream = handle<CUstream>(0x2a0); // fake stream id 0x2a = 42
        struct Case
        {
            const char* what;
            CUpti_CallbackId cbid;
            const void* params;
            uint64_t requested;
            uint8_t level;
            uint32_t stream;
        };
        cuMemAlloc_v2_params alloc{&p, size_t{1} << 50};
        size_t pitch = 0;
        cuMemAllocPitch_v2_params pitched{&p, &pitch, 4096, 1000, 4};
        cuMemAllocManaged_params managed{&p, size_t{3} << 30, 1};
        CUmemGenericAllocationHandle h = 0;
        cuMemCreate_params create{&h, size_t{6} << 30, nullptr, 0};
        cuMemAllocAsync_params async{&p, 5u << 20, stream};
        cuMemAllocAsync_ptsz_params asyncPtsz{&p, 7u << 20, stream};
        cuMemAllocFromPoolAsync_params fromPool{&p, 9u << 20, nullptr, stream};
        unsigned int small = 0;
        CUdeviceptr_v1 p1 = 0;
        cuMemAlloc_params legacy{&p1, 1000};
        cuMemAllocPitch_params legacyPitch{&p1, &small, 100, 10, 4};
        const Case cases[] = {
            {"cuMemAlloc_v2", CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &alloc, uint64_t{1} << 50,
             ev::LevelDriver, 0},
            // width × height: 4096 B × 1000 rows = 4 096 000 B
            {"cuMemAllocPitch_v2", CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pitched, 4096000,
             ev::LevelDriver, 0},
            {"cuMemAllocManaged", CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &managed, 3ull << 30,
             ev::LevelDriver, 0},
            {"cuMemCreate", CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &create, 6ull << 30,
             ev::LevelDriver, 0},
            {"cuMemAllocAsync", CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &async, 5u << 20,
             ev::LevelPool, 42},
            {"cuMemAllocAsync_ptsz", CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &asyncPtsz,
             7u << 20, ev::LevelPool, 42},
            {"cuMemAllocFromPoolAsync", CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, &fromPool,
             9u << 20, ev::LevelPool, 42},
            {"cuMemAlloc", CUPTI_DRIVER_TRACE_CBID_cuMemAlloc, &legacy, 1000, ev::LevelDriver, 0},
            // 100 B × 10 rows = 1000 B
            {"cuMemAllocPitch", CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch, &legacyPitch, 1000,
             ev::LevelDriver, 0},
        };
        for (const Case& c : cases) {
            QVERIFY2(exitEvent(c.cbid, c.params, CUDA_ERROR_OUT_OF_MEMORY, st, e), c.what);
            QCOMPARE(e.type, uint8_t{ev::Oom});
            QVERIFY2(e.size == c.requested, c.what);
            QVERIFY2(e.level == c.level, c.what);
            QVERIFY2(e.stream == c.stream, c.what);
            QCOMPARE(e.device, uint32_t{3});
            QCOMPARE(e.aux, uint64_t{12345}); // device free bytes at the failure
            QCOMPARE(e.time, int64_t{1000});
            // The same call succeeding is the memory activity's business, not an event here.
            QVERIFY2(!exitEvent(c.cbid, c.params, CUDA_SUCCESS, st, e), c.what);
        }
        QCOMPARE(st.ooms, uint64_t{std::size(cases)});
        // Out of memory from a call that allocates nothing we model (cuMemMap) is not an OOM
        // event, and neither is another error from an allocation API.
        cuMemMap_params map{0x1000, 4096, 0, 0, 0};
        QVERIFY(
            !exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_ERROR_OUT_OF_MEMORY, st, e));
        QVERIFY(!exitEvent(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &alloc, CUDA_ERROR_INVALID_VALUE,
                           st, e));
    }

    void graphExecIdsJoinedToGraphTraceRecords()
    {
        FakeState st;
        proto::WireEvent e;
        // Two graphs (ids 7 and 9), instantiated through two API variants; execs 0x123, 0x456.
        CUgraphExec execA = handle<CUgraphExec>(0x1230), execB = handle<CUgraphExec>(0x4560);
        cuGraphInstantiateWithFlags_params instA{&execA, handle<CUgraph>(0x70), 0};
        cuGraphInstantiate_v2_params instB{&execB, handle<CUgraph>(0x90), nullptr, nullptr, 0};
        // Each instantiation is an event too (graph id, exec id, the context's device).
        QVERIFY(exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &instA, CUDA_SUCCESS,
                          st, e));
        QCOMPARE(e.type, uint8_t{ev::GraphInstantiate});
        QCOMPARE(e.aux, uint64_t{7});
        QCOMPARE(e.aux2, uint64_t{0x123});
        QCOMPARE(e.device, uint32_t{3});
        QCOMPARE(e.time, int64_t{1000});
        QVERIFY(
            exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2, &instB, CUDA_SUCCESS, st, e));
        QCOMPARE(e.aux2, uint64_t{0x456});
        // A failed instantiation is none.
        QVERIFY(!exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2, &instB,
                           CUDA_ERROR_INVALID_VALUE, st, e));
        QCOMPARE(st.graphs.execsKnown(), size_t{2});
        QCOMPARE(st.graphs.graphOf(0x123), uint64_t{7});
        QCOMPARE(st.graphs.graphOf(0x456), uint64_t{9});
        // Launches: correlation 500 -> A, 501 -> B (per-thread stream variant), 502 -> A.
        cuGraphLaunch_params launchA{execA, nullptr};
        cuGraphLaunch_ptsz_params launchB{execB, nullptr};
        QVERIFY(
            !exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &launchA, CUDA_SUCCESS, st, e, 500));
        QVERIFY(!exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, &launchB, CUDA_SUCCESS, st,
                           e, 501));
        QVERIFY(
            !exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &launchA, CUDA_SUCCESS, st, e, 502));
        QCOMPARE(st.graphs.launchesPending(), size_t{3});

        // The GRAPH_TRACE records arrive later, by correlation id; 503 was never seen launched,
        // and 502's record lacks its graph id (taken from the instantiation instead).
        fstest::BufferBuilder b;
        b.add(graphTrace(500, 7, 100));
        b.add(graphTrace(501, 9, 200));
        b.add(graphTrace(502, 0, 300));
        b.add(graphTrace(503, 7, 400));
        const auto c = fstest::decodeBuffer(b, 0, nullptr, &st.graphs);
        QCOMPARE(c.events.size(), size_t{4});
        const uint64_t exec[] = {0x123, 0x456, 0x123, 0};
        const uint64_t graph[] = {7, 9, 7, 7};
        for (size_t i = 0; i < 4; ++i) {
            QCOMPARE(c.events[i].type, uint8_t{ev::GraphLaunch});
            QCOMPARE(c.events[i].aux2, exec[i]);
            QCOMPARE(c.events[i].aux, graph[i]);
        }
        // Joined launches are forgotten; a destroyed exec is too.
        QCOMPARE(st.graphs.launchesPending(), size_t{0});
        cuGraphExecDestroy_params destroy{execB};
        QVERIFY(
            exitEvent(CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy, &destroy, CUDA_SUCCESS, st, e));
        QCOMPARE(e.type, uint8_t{ev::GraphExecDestroy});
        QCOMPARE(e.aux2, uint64_t{0x456});
        QCOMPARE(e.device, uint32_t{3});
        QCOMPARE(st.graphs.graphOf(0x456), uint64_t{0});
        QCOMPARE(st.graphs.execsKnown(), size_t{1});
    }

    void graphJoinIsBounded()
    {
        agent::GraphJoin g;
        const uint32_t n = agent::GraphJoin::kMaxEntries + 10;
        // Launches whose records never come: only the newest kMaxEntries are kept.
        for (uint32_t i = 0; i < n; ++i) {
            g.launched(i, 1000 + i);
            g.instantiated(1000 + i, i);
        }
        QCOMPARE(g.launchesPending(), size_t{agent::GraphJoin::kMaxEntries});
        QCOMPARE(g.execsKnown(), size_t{agent::GraphJoin::kMaxEntries});
        QCOMPARE(g.takeExec(9), uint64_t{0}); // among the 10 oldest: gone
        QCOMPARE(g.takeExec(10), uint64_t{1010});
        QCOMPARE(g.takeExec(n - 1), uint64_t{1000 + n - 1});
        QCOMPARE(g.launchesPending(), size_t{agent::GraphJoin::kMaxEntries - 2});
        QCOMPARE(g.graphOf(1009), uint64_t{0});
        QCOMPARE(g.graphOf(1010), uint64_t{10});
        // Many more take/launch rounds never grow it past the bound.
        for (uint32_t i = 0; i < 4 * n; ++i) {
            g.launched(n + i, i);
            g.takeExec(n + i);
        }
        QVERIFY(g.launchesPending() <= agent::GraphJoin::kMaxEntries);
    }

    void everyEnabledCallbackIsADriverApiId()
    {
        // The agent enables exactly these; each must be a real driver-API callback id.
        QVERIFY(agent::kApiCallbackCount >= 20);
        for (size_t i = 0; i < agent::kApiCallbackCount; ++i) {
            QVERIFY(agent::kApiCallbacks[i] > CUPTI_DRIVER_TRACE_CBID_INVALID);
            QVERIFY(agent::kApiCallbacks[i] < CUPTI_DRIVER_TRACE_CBID_SIZE);
        }
    }
};

QTEST_GUILESS_MAIN(TestCaptureCallbacks)
#include "tst_capture_callbacks.moc"
