// Precursor ranking by evidence (docs/analysis.md "Precursors" and "Ranking") on constructed
// sessions with known answers: a kernel-variant shift at a graph node ranks first, per-frame
// churn is folded into one background row below it, an OOM in the collapsed frame ranks first,
// and the score formula gives the hand-worked figures; plus the simulated demo run, checked
// against the simulator's ground truth.
#include "builder.h"
#include "capture/sim/simulator.h"
#include "core/analysis/engine.h"
#include "core/store/debug_query.h"
#include "core/store/ingest.h"
#include "core/store/session.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

// Frames 0..5 of 1000 ns from t = 1000 (frame i starts at S = 1000 (i + 1)); frame 5 collapses
// (coherence 0.01), lookback 2: window = frames 3-5, healthy baseline = frames 0-2 (H = 3).
// - Region R [kBase, +4 MiB) lives throughout.
// - Churn: segment C of 1 MiB at kBase + 64 MiB created at S+100 and released at S+850 in
//   every frame.
// - Frames 1 and 4: a 3 MiB block at kBase from S+200 to S+300 (the largest free fragment
//   4 MiB -> 1 MiB).
// - Graph 1, node 1 runs 4 kernels per frame at S+400+100j, each after a workspace allocated at
//   S+390+100j and freed at S+450+100j: gemm_big with 512 KiB, except in frame 5 where calls
//   j = 1..3 run gemm_small with 128 KiB.
// - withOom: an OOM of 8 MiB at S+480 of frame 5 (between call 0 and call 1).
// - withIdMatch: every frame also reports id_match_rate 0.9, except frame 1 with 0.7: healthy
//   under the default rule (< 0.65), broken under "id_match_rate < 0.8".
void buildSession(const std::string& path, bool withOom, bool withIdMatch = false)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
    for (int i = 0; i < 6; ++i) {
        const int64_t s = 1000 * (i + 1);
        mark(in, s, "frame " + std::to_string(i));
        mark(in, s + 1, i == 5 ? "metric coherence_score=0.01" : "metric coherence_score=0.9");
        if (withIdMatch)
            mark(in, s + 2, i == 1 ? "metric id_match_rate=0.7" : "metric id_match_rate=0.9");
        in.add(ev(EventType::RegionCreate, s + 100, kBase + 64 * MiB, MiB));
        if (i == 1 || i == 4) {
            in.add(ev(EventType::Alloc, s + 200, kBase, 3 * MiB));
            in.add(ev(EventType::Free, s + 300, kBase));
        }
        for (int j = 0; j < 4; ++j) {
            const bool small = i == 5 && j >= 1;
            const int64_t t = s + 400 + 100 * j;
            in.add(ev(EventType::Alloc, t - 10, kBase, small ? 128 * KiB : 512 * KiB));
            graphKernel(in, t, t + 40, small ? "gemm_small" : "gemm_big", 1, 1);
            in.add(ev(EventType::Free, t + 50, kBase));
            if (withOom && i == 5 && j == 0) in.add(ev(EventType::Oom, s + 480, 0, 8 * MiB));
        }
        in.add(ev(EventType::RegionDestroy, s + 850, kBase + 64 * MiB));
    }
    mark(in, 7000, "end");
    in.end();
}

} // namespace

class TstAnalysisPrecursors : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    std::string path(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }

private slots:
    void wilsonAndStem()
    {
        // 95 % Wilson lower bound, z = 1.959964, z^2 = 3.841459:
        // 3 of 4: (0.75 + z^2/8 - z sqrt(0.75 * 0.25 / 4 + z^2 / 64)) / (1 + z^2 / 4) = 0.300642
        QVERIFY(std::fabs(wilsonLower(3, 4) - 0.300642) < 1e-6);
        // n of n: n / (n + z^2): 160 / 163.841459 = 0.976554
        QVERIFY(std::fabs(wilsonLower(160, 160) - 160 / (160 + 1.959964 * 1.959964)) < 1e-12);
        QCOMPARE(wilsonLower(0, 10), 0.0);
        QCOMPARE(wilsonLower(0, 0), 0.0);
        QCOMPARE(kernelNameStem("flash_attn_fwd_splitkv_fallback"), std::string("flash_attn"));
        QCOMPARE(kernelNameStem("void flash::Flash_fwd_kernel<Traits, true>(Params)"),
                 std::string("flash_fwd"));
        QCOMPARE(kernelNameStem("gemm"), std::string("gemm"));
    }

    // A shift at a graph node ranks first; the per-frame churn is folded into one background
    // row ranked below it.
    void shiftAtGraphNodeRanksFirst()
    {
        QVERIFY(dir_.isValid());
        const auto f = path("shift.fragscope");
        buildSession(f, false);
        const auto e = Engine::open(f);
        QCOMPARE(e->collapses().size(), size_t{1});
        QCOMPARE(e->collapses()[0].firstFrame, int64_t{5});
        const auto rep = e->collapseReport(5);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->baselineFrames, (std::vector<int64_t>{0, 1, 2}));
        const auto& p = rep->precursors;
        QVERIFY(!p.empty());
        QCOMPARE(p[0].kind, PrecursorKind::KernelVariantShift);
        QVERIFY(p[0].shift.has_value());
        const KernelShift& s = *p[0].shift;
        QCOMPARE(s.basis, std::string("graph_node"));
        QCOMPARE(s.family, std::string("graph node 1"));
        QCOMPARE(s.variant, std::string("gemm_small"));
        QCOMPARE(s.usual, std::string("gemm_big"));
        // Before: 0 of the 12 baseline calls; after: 3 of frame 5's 4 calls.
        QCOMPARE(s.callsBefore, int64_t{0});
        QCOMPARE(s.totalBefore, int64_t{12});
        QCOMPARE(s.callsAfter, int64_t{3});
        QCOMPARE(s.totalAfter, int64_t{4});
        QCOMPARE(s.shareBefore, 0.0);
        QCOMPARE(s.shareAfter, 0.75);
        QCOMPARE(s.firstFrame, int64_t{5});
        QCOMPARE(p[0].time, int64_t{6500}); // the first gemm_small: S(5) + 400 + 100
        // The request before it (128 KiB at 6490) against the one before gemm_big's last call
        // (512 KiB at 6390): shrank.
        QCOMPARE(s.preceding.change, RequestChange::Shrank);
        QCOMPARE(s.preceding.size, 128 * KiB);
        QCOMPARE(s.preceding.usualSize, 512 * KiB);
        QCOMPARE(s.preceding.time, int64_t{6490});
        QVERIFY(s.preceding.allocationId >= 0);
        QCOMPARE(p[0].allocationId, s.preceding.allocationId);

        // The churning segment: one folded row (3 creations and 3 releases in the window),
        // seen in all 3 healthy frames, so background with score 0, below the shift.
        size_t churnAt = 0;
        const Precursor* churn = nullptr;
        for (size_t i = 0; i < p.size(); ++i)
            if ((p[i].kind == PrecursorKind::RegionCreated ||
                 p[i].kind == PrecursorKind::RegionReleased) &&
                p[i].address == kBase + 64 * MiB) {
                QVERIFY2(!churn, "the churning segment must fold into one row");
                churn = &p[i];
                churnAt = i;
            }
        QVERIFY(churn);
        QVERIFY(churnAt > 0);
        QCOMPARE(churn->count, int64_t{6});
        QVERIFY(churn->background);
        QCOMPARE(churn->score, 0.0);
        QCOMPARE(churn->evidence.seenInHealthy, int64_t{3});
        QVERIFY2(churn->description.find("released and re-created 3x") != std::string::npos,
                 churn->description.c_str());
    }

    // docs/analysis.md "Ranking", worked example: score = closeness x novelty x effect,
    // effect = max(kernel effect, largest effect / 2).
    void scoreFormula()
    {
        const auto f = path("shift.fragscope"); // written by the test above
        if (!QFile::exists(QString::fromStdString(f))) buildSession(f, false);
        const auto rep = Engine::open(f)->collapseReport(5);
        QVERIFY(rep.has_value());
        const auto& p = rep->precursors;
        // Shift: closeness 1 (inside frame 5), novelty 1 (no baseline frame ran gemm_small),
        // kernel effect = Wilson(3 of 4) - 0 = 0.300642 -> score 0.300642.
        QCOMPARE(p[0].evidence.closeness, 1.0);
        QCOMPARE(p[0].evidence.novelty, 1.0);
        QCOMPARE(p[0].evidence.healthyFrames, int64_t{3});
        QVERIFY(std::fabs(p[0].evidence.kernelEffect - 0.300642) < 1e-6);
        QVERIFY(std::fabs(p[0].score - 0.300642) < 1e-6);
        // The 3 MiB block of frame 4 (f-1): closeness 1/2; its role (size class 2^21) split the
        // largest fragment in 1 of the 3 healthy frames (frame 1): novelty 2/3; largest 4 MiB
        // -> 1 MiB: largest effect 0.75, effect 0.375 -> score 1/2 x 2/3 x 0.375 = 0.125.
        QCOMPARE(p[1].kind, PrecursorKind::SplitLargest);
        QCOMPARE(p[1].time, int64_t{5200});
        QCOMPARE(p[1].evidence.closeness, 0.5);
        QCOMPARE(p[1].evidence.seenInHealthy, int64_t{1});
        QVERIFY(std::fabs(p[1].evidence.novelty - 2.0 / 3) < 1e-12);
        QCOMPARE(p[1].evidence.largestEffect, 0.75);
        QCOMPARE(p[1].evidence.effect, 0.375);
        QVERIFY(std::fabs(p[1].score - 0.125) < 1e-12);
        // The three 128 KiB workspaces of frame 5 (new role, inside f): 4 MiB -> 3.875 MiB,
        // largest effect 1/32, score 1 x 1 x 1/64 = 0.015625, folded into one row.
        QCOMPARE(p[2].kind, PrecursorKind::SplitLargest);
        QCOMPARE(p[2].count, int64_t{3});
        QCOMPARE(p[2].score, 1.0 / 64);
        // Everything else happens in every healthy frame: score 0.
        for (size_t i = 3; i < p.size(); ++i) {
            QCOMPARE(p[i].score, 0.0);
            QVERIFY(p[i].background);
        }
    }

    // The ranking follows the collapse rules it is asked with (the GUI's rule editor), and equals
    // that of an engine opened with those rules (the CLI's --rules FILE).
    void rankingFollowsRules()
    {
        const auto f = path("idmatch.fragscope");
        buildSession(f, false, true);
        const std::vector<CollapseRule> strict = {
            {"coherence_score", Compare::Less, 0.05},
            {"id_match_rate", Compare::Less, 0.8},
        };
        const auto e = Engine::open(f); // default rules: frame 1 (id_match_rate 0.7) is healthy
        QCOMPARE(e->collapses().size(), size_t{1});
        const CollapseReport before = e->frameReport(5);
        QCOMPARE(before.baselineFrames, (std::vector<int64_t>{0, 1, 2}));
        // Under the strict rules frame 1 collapses: the baseline of frame 5 (window frames 3-5)
        // is frames 0 and 2. The 3 MiB split of frame 4 happened in frame 1 only, which is no
        // longer healthy: novelty 1 (was 2/3), score 1/2 x 1 x 0.375 = 0.1875 (was 0.125). The
        // churning segment is still in every healthy frame: background, seen in 2 of 2.
        const CollapseReport after = e->frameReport(5, strict);
        QCOMPARE(after.baselineFrames, (std::vector<int64_t>{0, 2}));
        const auto split =
            std::find_if(after.precursors.begin(), after.precursors.end(), [](const Precursor& p) {
                return p.kind == PrecursorKind::SplitLargest && p.time == 5200;
            });
        QVERIFY(split != after.precursors.end());
        QCOMPARE(split->evidence.seenInHealthy, int64_t{0});
        QCOMPARE(split->evidence.healthyFrames, int64_t{2});
        QCOMPARE(split->evidence.novelty, 1.0);
        QVERIFY(std::fabs(split->score - 0.1875) < 1e-12);
        for (const Precursor& p : after.precursors)
            if (p.kind == PrecursorKind::RegionCreated || p.kind == PrecursorKind::RegionReleased)
                QVERIFY(p.background);

        // An engine opened with the strict rules (what `fragscope collapse --rules` runs) gives
        // the same collapses and the same ranking, row by row.
        LoadOptions o;
        o.rules = strict;
        const auto byCli = Engine::open(f, o);
        QCOMPARE(byCli->collapses().size(), size_t{2}); // frame 1, frame 5
        const auto viaRules = e->collapseReport(5, strict);
        const auto opened = byCli->collapseReport(5);
        QVERIFY(viaRules && opened);
        QVERIFY(!e->collapseReport(1).has_value());
        QVERIFY(e->collapseReport(1, strict).has_value());
        QCOMPARE(viaRules->baselineFrames, opened->baselineFrames);
        QCOMPARE(viaRules->collapse.brokenRules, opened->collapse.brokenRules);
        QCOMPARE(viaRules->precursors.size(), opened->precursors.size());
        for (size_t i = 0; i < opened->precursors.size(); ++i) {
            const Precursor& a = viaRules->precursors[i];
            const Precursor& b = opened->precursors[i];
            QCOMPARE(a.kind, b.kind);
            QCOMPARE(a.time, b.time);
            QCOMPARE(a.score, b.score);
            QCOMPARE(a.background, b.background);
            QCOMPARE(a.description, b.description);
        }
        // The open() rules are still answered as before.
        QCOMPARE(e->frameReport(5).baselineFrames, (std::vector<int64_t>{0, 1, 2}));
    }

    // An OOM inside the collapsed frame ranks first: closeness 1, novelty 1 (no healthy frame
    // had one), effect 1; the shift follows, its preceding request marked as failed.
    void oomRanksFirst()
    {
        const auto f = path("oom.fragscope");
        buildSession(f, true);
        const auto rep = Engine::open(f)->collapseReport(5);
        QVERIFY(rep.has_value());
        const auto& p = rep->precursors;
        QVERIFY(p.size() >= 2);
        QCOMPARE(p[0].kind, PrecursorKind::Oom);
        QCOMPARE(p[0].time, int64_t{6480});
        QCOMPARE(p[0].score, 1.0);
        QCOMPARE(p[1].kind, PrecursorKind::KernelVariantShift);
        QCOMPARE(p[1].shift->preceding.change, RequestChange::Failed);
        QCOMPARE(p[1].shift->preceding.oomRequested, 8 * MiB);
    }

    // The demo run (24 frames x 20 steps, seed 17: collapse 22-23): the top row names the cause
    // the simulator recorded in its ground truth (which the analysis never reads).
    void demoRunNamesTheCause()
    {
        const auto f = path("demo.fragscope");
        {
            IngestOptions o;
            o.path = f;
            o.sourceKind = "simulator";
            o.synthetic = true;
            o.reorderWindowNs = 0;
            Ingest in(o);
            in.begin();
            sim::Simulator(sim::Config{}).run(in);
            in.end();
        }
        const auto e = Engine::open(f);
        const auto rep = e->collapseReport(22);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->collapse.firstFrame, int64_t{22});
        QVERIFY(!rep->precursors.empty());
        const Precursor& top = rep->precursors[0];
        QCOMPARE(top.kind, PrecursorKind::KernelVariantShift);
        Session s = Session::open(f);
        Stmt st = fs::store::debugQuery(s).prepare(
            "SELECT calls FROM sim_truth_kernels WHERE frame = 22 AND"
            " lowers_coherence AND kernel = ?1");
        st.bind(1, top.shift->variant);
        QVERIFY2(st.step(), top.description.c_str());
        QCOMPARE(st.i64(0), top.shift->callsAfter);
        // The truth's frame row agrees with the kernels: every attention call fell back.
        QCOMPARE(fs::store::debugQuery(s).scalarText(
                     "SELECT workspace_failures || '/' || attention_calls FROM"
                     " sim_truth_frames WHERE frame = 22"),
                 std::string("160/160"));
    }
};

QTEST_GUILESS_MAIN(TstAnalysisPrecursors)
#include "tst_analysis_precursors.moc"
