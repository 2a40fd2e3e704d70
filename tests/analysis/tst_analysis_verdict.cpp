// The verdict's explanations and graph rows (docs/analysis.md "Verdict") on hand-built sessions
// with known answers: pending frees that explain an OOM rank before it, memory outside the
// allocator explains a failed request by departure or by the counterfactual, kernels that left
// their graph are allocator evidence only after a moved input.
#include "builder.h"
#include "core/analysis/engine.h"
#include "core/store/ingest.h"

#include <QTemporaryDir>
#include <QTest>
#include <fmt/format.h>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

struct Scenario
{
    bool pendingBig = false;      // frame 7: a 3 MiB free pending from S+200 to S+900
    bool oom = false;             // frame 7: an OOM of 8 MiB at S+480
    uint64_t outside7 = 0;        // frame 7: a driver-level region created at S+100
    uint64_t outside2 = 0;        // frame 2: the same, released at S+900
    bool eager = false;           // frame 7: the graph's kernels launched outside it
    bool inputMoves = false;      // frame 7: the graph's input freed at S+50, re-made at S+60
    uint64_t capacity = 64 * MiB; // device 0
};

// Frames 0..7 of 1000 ns from t = 1000 (S = 1000 (i + 1)); frame 7 collapses (coherence 0.01):
// window frames 5-7, healthy frames 0-4 (H = 5). Framework region R [kBase, +4 MiB) throughout;
// a tagged 1 MiB input (graph.input) at kBase + 2 MiB from t = 500; every frame a 512 KiB block at
// kBase from S+390 to S+450, graph 1 kernels "step_a" (node 1) at S+400 and "step_b" (node 2) at
// S+500, and a routine 64 KiB pending free from S+950 to S+990.
void build(const std::string& path, const Scenario& c)
{
    Ingest in(options(path));
    in.begin();
    DeviceInfo d;
    d.id = 0;
    d.name = "test device";
    d.capacityBytes = c.capacity;
    in.addDevice(d);
    in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
    Event input = ev(EventType::Alloc, 500, kBase + 2 * MiB, MiB);
    input.name = in.intern("graph.input");
    in.add(input);
    for (int i = 0; i < 8; ++i) {
        const int64_t s = 1000 * (i + 1);
        mark(in, s, "frame " + std::to_string(i));
        mark(in, s + 1, i == 7 ? "metric coherence_score=0.01" : "metric coherence_score=0.9");
        if (i == 7 && c.inputMoves) {
            in.add(ev(EventType::Free, s + 50, kBase + 2 * MiB));
            Event moved = ev(EventType::Alloc, s + 60, kBase + 3 * MiB, MiB);
            moved.name = in.intern("graph.input");
            in.add(moved);
        }
        const uint64_t outside = i == 7 ? c.outside7 : i == 2 ? c.outside2 : 0;
        if (outside) {
            Event r =
                ev(EventType::RegionCreate, s + 100, kBase + 1024 * MiB, outside, Level::Driver);
            r.regionKind = RegionKind::Driver;
            in.add(r);
        }
        if (i == 7 && c.pendingBig) {
            Event p = ev(EventType::PendingFree, s + 200, kBase + 8 * MiB, 3 * MiB);
            p.endTime = s + 900;
            in.add(p);
        }
        in.add(ev(EventType::Alloc, s + 390, kBase, 512 * KiB));
        const bool eager = i == 7 && c.eager;
        if (eager) {
            kernel(in, s + 400, s + 440, "step_a");
        } else {
            graphKernel(in, s + 400, s + 440, "step_a", 1, 1);
        }
        in.add(ev(EventType::Free, s + 450, kBase));
        if (i == 7 && c.oom) in.add(ev(EventType::Oom, s + 480, 0, 8 * MiB));
        if (eager)
            kernel(in, s + 500, s + 540, "step_b");
        else
            graphKernel(in, s + 500, s + 540, "step_b", 1, 2);
        if (outside && i == 2)
            in.add(ev(EventType::RegionDestroy, s + 900, kBase + 1024 * MiB, 0, Level::Driver));
        Event routine = ev(EventType::PendingFree, s + 950, kBase + 3 * MiB + 512 * KiB, 64 * KiB);
        routine.endTime = s + 990;
        in.add(routine);
    }
    mark(in, 9000, "end");
    in.end();
}

const Precursor* find(const std::vector<Precursor>& p, PrecursorKind k)
{
    for (const Precursor& x : p)
        if (x.kind == k) return &x;
    return nullptr;
}

} // namespace

class TstAnalysisVerdict : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    CollapseReport report(const char* name, const Scenario& c)
    {
        const std::string f = (dir_.path() + "/" + name).toStdString();
        build(f, c);
        const auto e = Engine::open(f);
        const auto rep = e->collapseReport(7);
        if (!rep) qFatal("frame 7 is no collapse");
        return *rep;
    }

private slots:
    // Pending frees held 3 MiB in frame 7, where the healthy frames held 64 KiB at most (spread
    // 0: z = inf); the OOM of the same frame stands out too (no healthy frame failed a request).
    // The pending frees explain the OOM: they rank first, the OOM second, and the verdict names
    // both.
    void pendingFreesExplainTheOom()
    {
        Scenario c;
        c.pendingBig = true;
        c.oom = true;
        const CollapseReport r = report("pending.fragscope", c);
        const auto& p = r.precursors;
        QVERIFY(p.size() >= 2);
        QCOMPARE(p[0].kind, PrecursorKind::PendingFree);
        QCOMPARE(p[0].role, PrecursorRole::Explanation);
        QCOMPARE(p[0].time, int64_t{8200});
        QCOMPARE(p[0].size, 3 * MiB);
        QCOMPARE(p[0].count, int64_t{1});
        QCOMPARE(p[0].evidence.feature, std::string("pending_free_peak_bytes"));
        QCOMPARE(p[0].evidence.healthyMedian, double(64 * KiB));
        QVERIFY(p[0].evidence.standsOut);
        QCOMPARE(p[1].kind, PrecursorKind::Oom);
        QVERIFY(r.verdict.allocatorRelated);
        QCOMPARE(r.verdict.mechanism, std::string("pending_free"));
        QCOMPARE(r.verdict.headline,
                 std::string("allocator-related: pending frees (record_stream) held memory until "
                             "another stream caught up, then out of memory: a request failed "
                             "after the allocator freed its cache"));
        QCOMPARE(r.verdict.evidence, (std::vector<size_t>{0, 1}));
    }

    // Pending frees alone (no change stands out): still a memory condition that holds requests
    // back, so the collapse is allocator-related.
    void pendingFreesAlone()
    {
        Scenario c;
        c.pendingBig = true;
        const CollapseReport r = report("pending_alone.fragscope", c);
        QCOMPARE(r.precursors[0].kind, PrecursorKind::PendingFree);
        QCOMPARE(r.verdict.mechanism, std::string("pending_free"));
        QCOMPARE(r.verdict.headline,
                 std::string("allocator-related: pending frees (record_stream) held memory until "
                             "another stream caught up"));
    }

    // 56 MiB outside the allocator in frame 7 (none in the healthy frames: z = inf) and an OOM
    // of 8 MiB: the outside memory explains it and ranks first.
    void outsideMemoryStandsOut()
    {
        Scenario c;
        c.outside7 = 56 * MiB;
        c.oom = true;
        const CollapseReport r = report("outside.fragscope", c);
        const auto& p = r.precursors;
        QCOMPARE(p[0].kind, PrecursorKind::ExternalMemory);
        QCOMPARE(p[0].time, int64_t{8100});
        QCOMPARE(p[0].size, 56 * MiB);
        QVERIFY(p[0].evidence.standsOut);
        QCOMPARE(p[1].kind, PrecursorKind::Oom);
        QCOMPARE(r.verdict.mechanism, std::string("external_memory"));
        QCOMPARE(r.verdict.headline,
                 std::string("allocator-related: memory outside the allocator grew and left too "
                             "little headroom, then out of memory: a request failed after the "
                             "allocator freed its cache"));
    }

    // The healthy frame 2 also had 56 MiB outside the allocator, so frame 7's 56 MiB does not
    // depart (it does not exceed that floor). But the counterfactual holds: capacity 64 MiB,
    // reserved 4 MiB, outside 56 MiB leave 4 MiB free, short of the 8 MiB request, which would
    // have fit without the outside memory (4 + 56 >= 8). The row explains the OOM and ranks
    // first.
    void outsideMemoryCounterfactual()
    {
        Scenario c;
        c.outside7 = 56 * MiB;
        c.outside2 = 56 * MiB;
        c.oom = true;
        const CollapseReport r = report("counterfactual.fragscope", c);
        const auto& p = r.precursors;
        QCOMPARE(p[0].kind, PrecursorKind::ExternalMemory);
        QVERIFY(!p[0].evidence.standsOut);
        QCOMPARE(p[0].evidence.floor, double(56 * MiB));
        QVERIFY(p[0].evidence.explainsFailure);
        QVERIFY2(p[0].description.find("without it the 8.00 MiB request at oom would have fit") !=
                     std::string::npos,
                 p[0].description.c_str());
        QCOMPARE(r.verdict.mechanism, std::string("external_memory"));
        // A device large enough for the request anyway (capacity 128 MiB: 68 MiB free): no.
        c.capacity = 128 * MiB;
        const CollapseReport big = report("roomy.fragscope", c);
        const Precursor* x = find(big.precursors, PrecursorKind::ExternalMemory);
        QVERIFY(x);
        QVERIFY(!x->evidence.explainsFailure);
        QCOMPARE(big.precursors[0].kind, PrecursorKind::Oom);
        QCOMPARE(big.verdict.mechanism, std::string("out_of_memory"));
    }

    // Frame 7 launches both graph kernels outside graph 1 (share 2 / 2 = 1 against 0 in every
    // healthy frame: z = inf) right after the tagged input moved from kBase + 2 MiB to
    // kBase + 3 MiB: a graph change linked to the allocator.
    void graphChangeAfterMovedInput()
    {
        Scenario c;
        c.eager = true;
        c.inputMoves = true;
        const CollapseReport r = report("graph.fragscope", c);
        const auto& p = r.precursors;
        QCOMPARE(p[0].kind, PrecursorKind::GraphChange);
        QCOMPARE(p[0].time, int64_t{8400});
        QCOMPARE(p[0].count, int64_t{2});
        QCOMPARE(p[0].evidence.value, 1.0);
        QVERIFY(p[0].evidence.allocatorLinked);
        QVERIFY(p[0].evidence.standsOut);
        QCOMPARE(p[0].address, kBase + 3 * MiB);
        QVERIFY2(p[0].description.find(fmt::format("graph.input moved from {:#x} to {:#x}",
                                                   kBase + 2 * MiB, kBase + 3 * MiB)) !=
                     std::string::npos,
                 p[0].description.c_str());
        QCOMPARE(r.verdict.mechanism, std::string("graph_replay"));
        // No kernel-variant shift: the same kernels ran, only outside the graph.
        QVERIFY(!find(p, PrecursorKind::KernelVariantShift));
    }

    // The same kernels outside the graph with no input moved: not allocator evidence, and
    // nothing else stands out.
    void graphChangeWithoutMovedInput()
    {
        Scenario c;
        c.eager = true;
        const CollapseReport r = report("graph_unlinked.fragscope", c);
        const Precursor* g = find(r.precursors, PrecursorKind::GraphChange);
        QVERIFY(g);
        QVERIFY(!g->evidence.allocatorLinked);
        QVERIFY(!g->evidence.standsOut);
        QVERIFY(g->mechanism.empty());
        QVERIFY(!r.verdict.allocatorRelated);
        QVERIFY(r.verdict.headline.rfind("no allocator precursor stands out", 0) == 0);
    }
};

QTEST_GUILESS_MAIN(TstAnalysisVerdict)
#include "tst_analysis_verdict.moc"
