// The agent's buffer-completed path over real CUPTI 13 records built from the installed headers:
// every record kind the agent models, decoded into wire events and read back by a client.
#include "capture/agent/decode.h"
#include "capture/protocol/control_server.h"
#include "capture/protocol/target_stream.h"
#include "decode_test_util.h"

#include <cupti.h>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <vector>

using namespace fs;
namespace ev = fs::proto::ev;

namespace {

} // namespace

class TestCaptureDecode : public QObject
{
    Q_OBJECT

private slots:
    void recordSizesMatchCuda13()
    {
        // CUDA 13.0 headers: the record layouts the agent was written against.
        QCOMPARE(sizeof(CUpti_ActivityMemory4), size_t{128});
        QCOMPARE(sizeof(CUpti_ActivityKernel10), size_t{216});
        QCOMPARE(sizeof(CUpti_ActivityGraphTrace2), size_t{56});
        QCOMPARE(sizeof(CUpti_ActivityMemoryPool3), size_t{80});
    }

    void cudaMallocBecomesRegionAndDriverAllocation()
    {
        fstest::BufferBuilder b;
        b.add(fstest::memoryRecord(true, 0x7f1000000000, 2u << 20, 5000, false));
        b.add(fstest::memoryRecord(false, 0x7f1000000000, 2u << 20, 9000, false));
        const auto c = fstest::decodeBuffer(b, 1000);
        QVERIFY(c.ended);
        // alloc -> RegionCreate + Alloc; release -> Free + RegionDestroy: 4 events, times +1000.
        QCOMPARE(c.events.size(), size_t{4});
        QCOMPARE(c.events[0].type, uint8_t{ev::RegionCreate});
        QCOMPARE(c.events[0].regionKind, uint8_t{ev::KindDriver});
        QCOMPARE(c.events[0].size, uint64_t{2u << 20});
        QCOMPARE(c.events[1].type, uint8_t{ev::Alloc});
        QCOMPARE(c.events[1].level, uint8_t{ev::LevelDriver});
        QCOMPARE(c.events[1].address, uint64_t{0x7f1000000000});
        QCOMPARE(c.events[1].time, int64_t{6000});
        QCOMPARE(c.events[1].device, uint32_t{1});
        QCOMPARE(c.events[1].stream, uint32_t{7});
        QCOMPARE(c.events[2].type, uint8_t{ev::Free});
        QCOMPARE(c.events[2].time, int64_t{10000});
        QCOMPARE(c.events[3].type, uint8_t{ev::RegionDestroy});
    }

    void poolAllocationIsPoolLevel()
    {
        fstest::BufferBuilder b;
        b.add(fstest::memoryRecord(true, 0x7f0000200000, 4096, 100, true));
        b.add(fstest::memoryRecord(false, 0x7f0000200000, 4096, 200, true));
        const auto c = fstest::decodeBuffer(b, 0);
        QCOMPARE(c.events.size(), size_t{2}); // no region of its own: it lives in the pool's
        QCOMPARE(c.events[0].type, uint8_t{ev::Alloc});
        QCOMPARE(c.events[0].level, uint8_t{ev::LevelPool});
        QCOMPARE(c.events[0].size, uint64_t{4096});
        QCOMPARE(c.events[1].type, uint8_t{ev::Free});
        QCOMPARE(c.events[1].level, uint8_t{ev::LevelPool});
    }

    void hostMemoryIsSkipped()
    {
        fstest::BufferBuilder b;
        auto m = fstest::memoryRecord(true, 0x1000, 64, 1, false);
        m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        b.add(m);
        agent::DecodeState st;
        const auto c = fstest::decodeBuffer(b, 0, &st);
        QCOMPARE(c.events.size(), size_t{0});
        QCOMPARE(st.records, uint64_t{1});
        QCOMPARE(st.skipped, uint64_t{1});
    }

    void memoryPoolLifecycle()
    {
        fstest::BufferBuilder b;
        CUpti_ActivityMemoryPool3 p;
        std::memset(&p, 0, sizeof p);
        p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
        p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
        p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        p.address = 0x7f0000000000;
        p.size = 32u << 20;
        p.releaseThreshold = 1u << 20;
        p.timestamp = 50;
        p.deviceId = 0;
        b.add(p);
        p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
        p.minBytesToKeep = 4096;
        p.timestamp = 60;
        b.add(p);
        p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
        p.timestamp = 70;
        b.add(p);
        const auto c = fstest::decodeBuffer(b, 0);
        QCOMPARE(c.events.size(), size_t{3});
        QCOMPARE(c.events[0].type, uint8_t{ev::RegionCreate});
        QCOMPARE(c.events[0].regionKind, uint8_t{ev::KindPool});
        QCOMPARE(c.events[0].level, uint8_t{ev::LevelPool});
        QCOMPARE(c.events[0].size, uint64_t{32u << 20});
        QCOMPARE(c.events[0].aux, uint64_t{0x7f0000000000});
        QCOMPARE(c.events[0].aux2, uint64_t{1u << 20}); // release threshold
        QCOMPARE(c.events[1].type, uint8_t{ev::Mark});
        QCOMPARE(QString::fromStdString(c.name(c.events[1].name)),
                 QStringLiteral("cuda pool trim pool=0x7f0000000000 size=33554432 keep=4096"));
        QCOMPARE(c.events[2].type, uint8_t{ev::RegionDestroy});
        QCOMPARE(c.events[2].time, int64_t{70});
    }

    void kernelWithGraphNode()
    {
        fstest::BufferBuilder b;
        CUpti_ActivityKernel10 k;
        std::memset(&k, 0, sizeof k);
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 1000;
        k.end = 1750;
        k.deviceId = 0;
        k.streamId = 13;
        k.gridX = 128;
        k.gridY = 2;
        k.gridZ = 1;
        k.blockX = 256;
        k.blockY = 1;
        k.blockZ = 1;
        k.correlationId = 4242;
        k.graphId = 3;
        k.graphNodeId = 9;
        static const char name[] = "ampere_sgemm_128x64_nn";
        k.name = name;
        b.add(k);
        b.add(k); // the same name twice: one String definition
        const auto c = fstest::decodeBuffer(b, 0);
        QCOMPARE(c.events.size(), size_t{2});
        const auto& e = c.events[0];
        QCOMPARE(e.type, uint8_t{ev::Kernel});
        QCOMPARE(e.time, int64_t{1000});
        QCOMPARE(e.endTime, int64_t{1750});
        QCOMPARE(e.stream, uint32_t{13});
        QCOMPARE(e.grid[0], uint32_t{128});
        QCOMPARE(e.grid[1], uint32_t{2});
        QCOMPARE(e.block[0], uint32_t{256});
        QCOMPARE(e.aux, uint64_t{4242});
        QCOMPARE(e.aux2, (uint64_t{3} << 32) | 9u); // graph id : node id
        QCOMPARE(QString::fromStdString(c.name(e.name)), QStringLiteral("ampere_sgemm_128x64_nn"));
        QCOMPARE(c.events[1].name, e.name);
        QCOMPARE(c.strings.size(), size_t{1});
    }

    void graphLaunch()
    {
        fstest::BufferBuilder b;
        CUpti_ActivityGraphTrace2 g;
        std::memset(&g, 0, sizeof g);
        g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
        g.start = 500;
        g.end = 900;
        g.graphId = 3;
        g.streamId = 2;
        g.deviceId = 1;
        b.add(g);
        const auto c = fstest::decodeBuffer(b, 10);
        QCOMPARE(c.events.size(), size_t{1});
        QCOMPARE(c.events[0].type, uint8_t{ev::GraphLaunch});
        QCOMPARE(c.events[0].time, int64_t{510});
        QCOMPARE(c.events[0].endTime, int64_t{910});
        QCOMPARE(c.events[0].aux, uint64_t{3});
        QCOMPARE(c.events[0].stream, uint32_t{2});
        QCOMPARE(c.events[0].device, uint32_t{1});
    }

    void nvtxMarkersAndRanges()
    {
        fstest::BufferBuilder b;
        CUpti_ActivityMarker2 m;
        std::memset(&m, 0, sizeof m);
        m.kind = CUPTI_ACTIVITY_KIND_MARKER;
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
        m.id = 5;
        m.timestamp = 100;
        m.name = "frame 17";
        b.add(m);
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
        m.id = 6;
        m.timestamp = 150;
        m.name = "metric coherence_score=0.009";
        b.add(m);
        m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
        m.id = 5;
        m.timestamp = 300;
        m.name = nullptr;
        b.add(m);
        m.id = 99; // an end without a start is skipped, not invented
        b.add(m);
        agent::DecodeState st;
        const auto c = fstest::decodeBuffer(b, 0, &st);
        QCOMPARE(c.events.size(), size_t{2});
        QCOMPARE(c.events[0].type, uint8_t{ev::Mark});
        QCOMPARE(QString::fromStdString(c.name(c.events[0].name)),
                 QStringLiteral("metric coherence_score=0.009"));
        QCOMPARE(c.events[1].type, uint8_t{ev::Range});
        QCOMPARE(c.events[1].time, int64_t{100});
        QCOMPARE(c.events[1].endTime, int64_t{300});
        QCOMPARE(QString::fromStdString(c.name(c.events[1].name)), QStringLiteral("frame 17"));
        QCOMPARE(st.skipped, uint64_t{1});
    }

    void mixedBufferKeepsRecordOrder()
    {
        fstest::BufferBuilder b;
        b.add(fstest::memoryRecord(true, 0x7f1000000000, 1u << 20, 10, false));
        CUpti_ActivityKernel10 k;
        std::memset(&k, 0, sizeof k);
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 20;
        k.end = 30;
        k.name = "k";
        b.add(k);
        b.add(fstest::memoryRecord(true, 0x7f0000000000, 256, 40, true));
        agent::DecodeState st;
        const auto c = fstest::decodeBuffer(b, 0, &st);
        // 3 records: cudaMalloc (2 events), kernel (1), pool alloc (1).
        QCOMPARE(st.records, uint64_t{3});
        QCOMPARE(c.events.size(), size_t{4});
        QCOMPARE(c.events[2].type, uint8_t{ev::Kernel});
        QCOMPARE(c.events[3].level, uint8_t{ev::LevelPool});
    }
};

QTEST_GUILESS_MAIN(TestCaptureDecode)
#include "tst_capture_decode.moc"
