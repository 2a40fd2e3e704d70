// The verdict's explanations and graph rows (docs/analysis.md "Verdict") on hand-built sessions
// with known answers: pending frees that explain an OOM rank before it, memory outside the
// allocator explains a failed request by departure or by the counterfactual, kernels that left
// their graph are allocator evidence only after a moved input.
#include "builder.h"
#include "core/analysis/engine.h"
#include "core/store/ingest.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

struct Scenario
{
    bool pendingBig = false; // frame 7: a 3 MiB free pending from S+200 to S+900
    bool oom = false;        // frame oomFrame (7): an OOM of 8 MiB at S+480
    int oomFrame = 7;
    uint64_t outside7 = 0;        // frame 7: a driver-level region created at S+100
    uint64_t outside2 = 0;        // frame 2: the same, released at S+900
    bool eager = false;           // frame 7: the graph's kernels launched outside it
    bool inputMoves = false;      // frame 7: the graph's input freed at S+50, re-made at S+60
    uint64_t capacity = 64 * MiB; // device 0
    int frames = 8;               // frames 0..frames-1; those after 7 are healthy
    // Healthy frames after the collapse with a pending free of pendingElsewhereBytes from S+200
    // to S+900 (the run's healthy frames, outside the 16 before the window).
    std::vector<int> pendingElsewhere;
    uint64_t pendingElsewhereBytes = 3 * MiB;
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
    for (int i = 0; i < c.frames; ++i) {
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
        const bool elsewhere = std::find(c.pendingElsewhere.begin(), c.pendingElsewhere.end(), i) !=
                               c.pendingElsewhere.end();
        if ((i == 7 && c.pendingBig) || elsewhere) {
            Event p = ev(EventType::PendingFree, s + 200, kBase + 8 * MiB,
                         elsewhere ? c.pendingElsewhereBytes : 3 * MiB);
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
        if (i == c.oomFrame && c.oom) in.add(ev(EventType::Oom, s + 480, 0, 8 * MiB));
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
    mark(in, 1000 * (c.frames + 1), "end");
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

    // The same 56 MiB outside the allocator with no OOM: it stands out and no healthy frame of
    // the run had any (rare), but no request failed or changed for want of it: shown, not
    // allocator-related.
    void outsideMemoryAlone()
    {
        Scenario c;
        c.outside7 = 56 * MiB;
        const CollapseReport r = report("outside_alone.fragscope", c);
        const Precursor* x = find(r.precursors, PrecursorKind::ExternalMemory);
        QVERIFY(x);
        QVERIFY(x->evidence.standsOut);
        QVERIFY(!x->evidence.common);
        const auto at = static_cast<size_t>(x - r.precursors.data());
        QVERIFY(!r.verdict.allocatorRelated);
        QCOMPARE(r.verdict.headline,
                 std::string("no allocator precursor stands out by itself: memory outside the "
                             "allocator grew and left too little headroom (external_peak_bytes), "
                             "but no request failed or changed for want of it"));
        QCOMPARE(r.verdict.evidence, (std::vector<size_t>{at}));
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

    // Base rates: 28 frames, frame 7 collapses, so the run has 27 healthy frames; its 16-frame
    // baseline (0-4) holds 64 KiB of pending frees at most, so frame 7's 3 MiB stands out (z =
    // inf) whatever the frames after the collapse hold.
    //  - 3 MiB also pending in frame 20: 1 of 27 healthy frames (3.7 %) reached it, within the
    //    5 % limit: rare, allocator-related, and the row says so ("also in 4 %").
    //  - also in frames 20 and 24: 2 of 27 (7.4 % > 5 %): common; not enough alone.
    //  - 2 MiB in frames 20 and 24: they do not reach 3 MiB: 0 of 27, allocator-related.
    void pendingFreesRareInTheRun()
    {
        Scenario c;
        c.frames = 28;
        c.pendingBig = true;
        c.pendingElsewhere = {20};
        const CollapseReport r = report("rare.fragscope", c);
        const Precursor& p = r.precursors[0];
        QCOMPARE(p.kind, PrecursorKind::PendingFree);
        QVERIFY(p.evidence.standsOut);
        QCOMPARE(p.evidence.runHealthyFrames, int64_t{27});
        QCOMPARE(p.evidence.runDeparted, int64_t{1});
        QVERIFY(std::fabs(p.evidence.baseRate - 1.0 / 27) < 1e-12);
        QVERIFY(!p.evidence.common);
        QVERIFY2(p.description.find("; also in 4 % of the run's healthy frames (1 of 27)") !=
                     std::string::npos,
                 p.description.c_str());
        QVERIFY(r.verdict.allocatorRelated);
        QCOMPARE(r.verdict.mechanism, std::string("pending_free"));
    }

    void pendingFreesCommonInTheRun()
    {
        Scenario c;
        c.frames = 28;
        c.pendingBig = true;
        c.pendingElsewhere = {20, 24};
        const CollapseReport r = report("common.fragscope", c);
        const Precursor& p = r.precursors[0];
        QCOMPARE(p.kind, PrecursorKind::PendingFree);
        QVERIFY(p.evidence.standsOut);
        QCOMPARE(p.evidence.runDeparted, int64_t{2});
        QVERIFY(p.evidence.common);
        QVERIFY(!r.verdict.allocatorRelated);
        QVERIFY(r.verdict.mechanism.empty());
        QCOMPARE(r.verdict.headline,
                 std::string("no allocator precursor stands out by itself: pending frees "
                             "(record_stream) held memory until another stream caught up "
                             "(pending_free_peak_bytes) departed as far in 7 % of the run's "
                             "healthy frames (2 of 27), where nothing collapsed: too common to "
                             "explain the collapse alone"));
        // Shown under the verdict, as common.
        QCOMPARE(r.verdict.evidence, (std::vector<size_t>{0}));

        // Smaller pending frees elsewhere do not reach frame 7's: rare again.
        c.pendingElsewhereBytes = 2 * MiB;
        const CollapseReport smaller = report("smaller.fragscope", c);
        QCOMPARE(smaller.precursors[0].evidence.runDeparted, int64_t{0});
        QVERIFY(smaller.verdict.allocatorRelated);
    }

    // The same common pending frees beside an OOM that no healthy frame of the run had: the OOM
    // decides (out of memory); the pending frees, common, no longer explain it and rank after.
    void commonConditionBesideARareChange()
    {
        Scenario c;
        c.frames = 28;
        c.pendingBig = true;
        c.oom = true;
        c.pendingElsewhere = {20, 24};
        const CollapseReport r = report("common_oom.fragscope", c);
        QCOMPARE(r.precursors[0].kind, PrecursorKind::Oom);
        QCOMPARE(r.precursors[0].evidence.runDeparted, int64_t{0});
        QVERIFY(r.verdict.allocatorRelated);
        QCOMPARE(r.verdict.mechanism, std::string("out_of_memory"));
        const Precursor* p = find(r.precursors, PrecursorKind::PendingFree);
        QVERIFY(p && p->evidence.common);
        QCOMPARE(r.precursors[1].kind, PrecursorKind::PendingFree);
    }

    // An OOM in frame 6, a window frame that broke no rule, and nothing in frame 7 (28 frames):
    // it stands out (no baseline frame failed a request) and is rare in the run (only frame 6
    // itself, 1 of 27), but it changed frame 6's work, which stayed healthy, not frame 7's:
    // shown, never decisive.
    void changeInAHealthyWindowFrame()
    {
        Scenario c;
        c.frames = 28;
        c.oom = true;
        c.oomFrame = 6;
        const CollapseReport r = report("oom_before.fragscope", c);
        const Precursor& p = r.precursors[0];
        QCOMPARE(p.kind, PrecursorKind::Oom);
        QVERIFY(p.evidence.standsOut);
        QVERIFY(!p.evidence.common);
        QCOMPARE(p.evidence.frame, int64_t{6});
        QCOMPARE(p.evidence.runDeparted, int64_t{1});
        QVERIFY(!r.verdict.allocatorRelated);
        QCOMPARE(r.verdict.headline,
                 std::string("no allocator precursor stands out by itself: out of memory: a "
                             "request failed after the allocator freed its cache "
                             "(failed_request_bytes) happened in frame 6, which broke no rule: it "
                             "did not change the collapsed frame's work"));
        QCOMPARE(r.verdict.evidence, (std::vector<size_t>{0}));
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
