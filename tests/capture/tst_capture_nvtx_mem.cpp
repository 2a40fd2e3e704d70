// NvtxMemTracker (capture/agent/nvtx_mem.cpp), the NVTX memory extension -> events mapping the
// agent's handlers use, driven directly with the NVTX structs from the installed headers: the
// corner cases the end-to-end test (tst_capture_nvtx) does not reach.
#include "capture/agent/nvtx_mem.h"
#include "nvtx_mem_desc.h"

#include <QTest>
#include <cwchar>

using namespace fs;
namespace ev = fs::proto::ev;

namespace {

void* at(uintptr_t v)
{
    return reinterpret_cast<void*>(v);
}

using fstest::heapDesc;

template <size_t N>
nvtxMemRegionsRegisterBatch_t batch(nvtxMemHeapHandle_t heap, nvtxMemVirtualRangeDesc_t (&r)[N])
{
    return fstest::regionsBatch(heap, r, N);
}

} // namespace

class TestCaptureNvtxMem : public QObject
{
    Q_OBJECT
private slots:
    void heapKindsAndNames()
    {
        agent::NvtxMemTracker t;
        std::vector<agent::SideEvent> out;
        nvtxMemVirtualRangeDesc_t ra{4096, at(0x100000)}, rb{8192, at(0x200000)};
        const auto da = heapDesc(ra, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, "arena");
        const auto db = heapDesc(rb, NVTX_MEM_HEAP_USAGE_TYPE_LAYOUT, "layout");
        // The handle of a virtual-address heap is its address (NVTX's rule).
        QCOMPARE(reinterpret_cast<uintptr_t>(t.heapRegister(&da, 10, out)), uintptr_t{0x100000});
        QCOMPARE(reinterpret_cast<uintptr_t>(t.heapRegister(&db, 11, out)), uintptr_t{0x200000});
        QCOMPARE(out.size(), size_t{2});
        QCOMPARE(out[0].e.type, uint8_t{ev::RegionCreate});
        QCOMPARE(out[0].e.regionKind, uint8_t{ev::KindPool});
        QCOMPARE(out[0].e.level, uint8_t{ev::LevelFramework});
        QCOMPARE(out[0].e.size, uint64_t{4096});
        QCOMPARE(out[0].e.time, int64_t{10});
        QCOMPARE(out[0].text, std::string("arena"));
        QCOMPARE(out[1].e.regionKind, uint8_t{ev::KindSegment});
        QCOMPARE(out[1].text, std::string("layout"));
        QCOMPARE(t.heaps(), size_t{2});
    }

    void otherMemoryTypesGetAHandleAndNoEvents()
    {
        agent::NvtxMemTracker t;
        std::vector<agent::SideEvent> out;
        nvtxMemVirtualRangeDesc_t r{4096, at(0x100000)};
        auto d = heapDesc(r, NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR, "x");
        d.type = NVTX_MEM_TYPE_UNKNOWN;
        const auto h1 = t.heapRegister(&d, 1, out);
        const auto h2 = t.heapRegister(nullptr, 1, out); // malformed: never crashes
        QVERIFY(h1 != nullptr && h2 != nullptr && h1 != h2);
        QVERIFY(out.empty());
        // Its regions are ignored; unregistering it emits nothing.
        nvtxMemVirtualRangeDesc_t reg[1] = {{64, at(0x100000)}};
        const auto b = batch(h1, reg);
        t.regionsRegister(&b, 2, out);
        t.heapUnregister(h1, 3, out);
        QVERIFY(out.empty());
        QCOMPARE(t.ignored(), uint64_t{3}); // two odd heaps, one ignored batch
    }

    void processWideRegionsResizeAndReRegister()
    {
        agent::NvtxMemTracker t;
        std::vector<agent::SideEvent> out;
        // NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE (0) needs no registration.
        nvtxMemVirtualRangeDesc_t r[2] = {{100, at(0x5000)}, {200, at(0x6000)}};
        nvtxMemRegionHandle_t handles[2] = {};
        auto b = batch(nullptr, r);
        b.regionHandleElementsOut = handles;
        t.regionsRegister(&b, 1, out);
        QCOMPARE(out.size(), size_t{2});
        QCOMPARE(out[1].e.type, uint8_t{ev::Alloc});
        QCOMPARE(out[1].e.address, uint64_t{0x6000});
        QCOMPARE(out[1].e.size, uint64_t{200});
        QCOMPARE(reinterpret_cast<uintptr_t>(handles[1]), uintptr_t{0x6000});
        out.clear();
        // Resize 0x5000 to 150 B: Free of the 100 B, Alloc of 150 B at the same instant.
        nvtxMemVirtualRangeDesc_t grow{150, at(0x5000)};
        nvtxMemRegionsResizeBatch_t rb{};
        rb.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
        rb.regionDescCount = 1;
        rb.regionDescElementSize = sizeof grow;
        rb.regionDescElements = &grow;
        t.regionsResize(&rb, 2, out);
        QCOMPARE(out.size(), size_t{2});
        QCOMPARE(out[0].e.type, uint8_t{ev::Free});
        QCOMPARE(out[0].e.size, uint64_t{100});
        QCOMPARE(out[1].e.type, uint8_t{ev::Alloc});
        QCOMPARE(out[1].e.size, uint64_t{150});
        out.clear();
        // Registering 0x6000 again without an unregister ends the old region first.
        nvtxMemVirtualRangeDesc_t again[1] = {{300, at(0x6000)}};
        const auto b2 = batch(nullptr, again);
        t.regionsRegister(&b2, 3, out);
        QCOMPARE(out.size(), size_t{2});
        QCOMPARE(out[0].e.type, uint8_t{ev::Free});
        QCOMPARE(out[0].e.size, uint64_t{200});
        QCOMPARE(out[1].e.size, uint64_t{300});
        QCOMPARE(t.liveRegions(), size_t{2});
        out.clear();
        // Resetting the process-wide heap frees both live regions (150 + 300 B).
        t.heapReset(nullptr, 4, out);
        QCOMPARE(out.size(), size_t{2});
        QCOMPARE(out[0].e.size + out[1].e.size, uint64_t{450});
        QCOMPARE(t.liveRegions(), size_t{0});
        // The process-wide heap cannot be unregistered.
        out.clear();
        t.heapUnregister(nullptr, 5, out);
        QVERIFY(out.empty());
    }

    void unknownUnregisterIsStillReportedAndStridesAreHonoured()
    {
        agent::NvtxMemTracker t;
        std::vector<agent::SideEvent> out;
        // A caller's newer, larger struct: elements 24 bytes apart; the tracker reads the
        // reference (the first 8 bytes) of each.
        struct Wide
        {
            nvtxMemRegionRef_t ref;
            uint64_t extra[2];
        } refs[2] = {{{at(0x9000)}, {1, 2}}, {{at(0xa000)}, {3, 4}}};
        nvtxMemRegionsUnregisterBatch_t u{};
        u.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
        u.refCount = 2;
        u.refElementSize = sizeof(Wide);
        u.refElements = &refs[0].ref;
        t.regionsUnregister(&u, 7, out);
        // Unknown regions: Free events with size 0 (ingest records unknown_free).
        QCOMPARE(out.size(), size_t{2});
        QCOMPARE(out[1].e.address, uint64_t{0xa000});
        QCOMPARE(out[1].e.size, uint64_t{0});
        // An element size smaller than the struct is malformed: nothing is read.
        out.clear();
        u.refElementSize = 4;
        t.regionsUnregister(&u, 8, out);
        QVERIFY(out.empty());
    }

    void messageTexts()
    {
        nvtxMessageValue_t m{};
        m.ascii = "frame 3";
        QCOMPARE(agent::nvtxMessageText(NVTX_MESSAGE_TYPE_ASCII, m), std::string("frame 3"));
        // Wide text becomes UTF-8: "fr\u00e9me" = 66 72 c3 a9 6d 65.
        m.unicode = L"fr\u00e9me";
        QCOMPARE(agent::nvtxMessageText(NVTX_MESSAGE_TYPE_UNICODE, m), std::string("fr\xc3\xa9me"));
        // A registered string handle is a pointer to the agent's own copy.
        static const std::string kept = "metric x=1";
        m.registered = reinterpret_cast<nvtxStringHandle_t>(const_cast<std::string*>(&kept));
        QCOMPARE(agent::nvtxMessageText(NVTX_MESSAGE_TYPE_REGISTERED, m), kept);
        m.ascii = nullptr;
        QCOMPARE(agent::nvtxMessageText(NVTX_MESSAGE_TYPE_ASCII, m), std::string());
        QCOMPARE(agent::nvtxMessageText(99, m), std::string());
    }
};

QTEST_GUILESS_MAIN(TestCaptureNvtxMem)
#include "tst_capture_nvtx_mem.moc"
