// Precursor ranking and verdict (docs/analysis.md "Precursors", "Ranking", "Verdict") on
// constructed sessions with known answers: a kernel-variant shift at a graph node stands out and
// ranks first, per-frame churn is folded into one background row, an OOM in the collapsed frame
// ranks first, the score formula gives the hand-worked figures, a collapse whose lookback looks
// like the healthy frames gets "no allocator precursor stands out", and the ranking follows the
// rules, a shift is found whatever order its variants' names were met in; plus the simulated demo
// run, checked against the simulator's ground truth.
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
#include <cstdio>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

// Frames 0..7 of 1000 ns from t = 1000 (frame i starts at S = 1000 (i + 1)); frame 7 collapses
// (coherence 0.01), lookback 2: window = frames 5-7, healthy baseline = frames 0-4 (H = 5).
// - Region R [kBase, +4 MiB) lives throughout.
// - Churn: segment C of 1 MiB at kBase + 64 MiB created at S+100 and released at S+850 in
//   every frame.
// - Frames 1 and 6: a 3 MiB block at kBase from S+200 to S+300 (the largest free fragment
//   4 MiB -> 1 MiB).
// - Graph 1, node 1 runs 4 kernels per frame at S+400+100j, each after a workspace allocated at
//   S+390+100j and freed at S+450+100j: gemm_big with 512 KiB, except in frame 7 where calls
//   j = 1..3 run gemm_small with 128 KiB (unless shift is false).
// - withOom: an OOM of 8 MiB at S+480 of frame 7 (between call 0 and call 1).
// - withIdMatch: every frame also reports id_match_rate 0.9, except frame 1 with 0.7: healthy
//   under the default rule (< 0.65), broken under "id_match_rate < 0.8".
// - boundaryRegion: a segment D of 1 MiB at kBase + 128 MiB created at 6000, the instant that
//   ends frame 4 (the last healthy one) and starts frame 5 (the window), released at 6500.
// - fallbackNamedFirst: one eager gemm_small at 10, before every frame, so that its name has a
//   lower string id than gemm_big's.
void buildSession(const std::string& path, bool withOom, bool withIdMatch = false,
                  bool shift = true, bool boundaryRegion = false, bool fallbackNamedFirst = false)
{
    Ingest in(options(path));
    in.begin();
    if (fallbackNamedFirst) kernel(in, 10, 20, "gemm_small");
    in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
    if (boundaryRegion) {
        in.add(ev(EventType::RegionCreate, 6000, kBase + 128 * MiB, MiB));
        in.add(ev(EventType::RegionDestroy, 6500, kBase + 128 * MiB));
    }
    for (int i = 0; i < 8; ++i) {
        const int64_t s = 1000 * (i + 1);
        mark(in, s, "frame " + std::to_string(i));
        mark(in, s + 1, i == 7 ? "metric coherence_score=0.01" : "metric coherence_score=0.9");
        if (withIdMatch)
            mark(in, s + 2, i == 1 ? "metric id_match_rate=0.7" : "metric id_match_rate=0.9");
        in.add(ev(EventType::RegionCreate, s + 100, kBase + 64 * MiB, MiB));
        if (i == 1 || i == 6) {
            in.add(ev(EventType::Alloc, s + 200, kBase, 3 * MiB));
            in.add(ev(EventType::Free, s + 300, kBase));
        }
        for (int j = 0; j < 4; ++j) {
            const bool small = shift && i == 7 && j >= 1;
            const int64_t t = s + 400 + 100 * j;
            in.add(ev(EventType::Alloc, t - 10, kBase, small ? 128 * KiB : 512 * KiB));
            graphKernel(in, t, t + 40, small ? "gemm_small" : "gemm_big", 1, 1);
            in.add(ev(EventType::Free, t + 50, kBase));
            if (withOom && i == 7 && j == 0) in.add(ev(EventType::Oom, s + 480, 0, 8 * MiB));
        }
        in.add(ev(EventType::RegionDestroy, s + 850, kBase + 64 * MiB));
    }
    mark(in, 9000, "end");
    in.end();
}

const Precursor* find(const std::vector<Precursor>& p, PrecursorKind k, int64_t time = -1)
{
    for (const Precursor& x : p)
        if (x.kind == k && (time < 0 || x.time == time)) return &x;
    return nullptr;
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

    // A shift at a graph node stands out and ranks first; the verdict names the kernel fallback;
    // the per-frame churn is folded into one background row ranked below it.
    void shiftAtGraphNodeRanksFirst()
    {
        QVERIFY(dir_.isValid());
        const auto f = path("shift.fragscope");
        buildSession(f, false);
        const auto e = Engine::open(f);
        QCOMPARE(e->collapses().size(), size_t{1});
        QCOMPARE(e->collapses()[0].firstFrame, int64_t{7});
        const auto rep = e->collapseReport(7);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->baselineFrames, (std::vector<int64_t>{0, 1, 2, 3, 4}));
        const auto& p = rep->precursors;
        QVERIFY(!p.empty());
        QCOMPARE(p[0].kind, PrecursorKind::KernelVariantShift);
        QVERIFY(p[0].shift.has_value());
        const KernelShift& s = *p[0].shift;
        QCOMPARE(s.basis, std::string("graph_node"));
        QCOMPARE(s.family, std::string("graph node 1"));
        QCOMPARE(s.variant, std::string("gemm_small"));
        QCOMPARE(s.usual, std::string("gemm_big"));
        // Before: 0 of the 20 baseline calls; after: 3 of frame 7's 4 calls.
        QCOMPARE(s.callsBefore, int64_t{0});
        QCOMPARE(s.totalBefore, int64_t{20});
        QCOMPARE(s.callsAfter, int64_t{3});
        QCOMPARE(s.totalAfter, int64_t{4});
        QCOMPARE(s.shareBefore, 0.0);
        QCOMPARE(s.shareAfter, 0.75);
        QCOMPARE(s.firstFrame, int64_t{7});
        QCOMPARE(p[0].time, int64_t{8500}); // the first gemm_small: S(7) + 400 + 100
        // The request before it (128 KiB at 8490) against the one before gemm_big's last call
        // (512 KiB at 8390): shrank.
        QCOMPARE(s.preceding.change, RequestChange::Shrank);
        QCOMPARE(s.preceding.size, 128 * KiB);
        QCOMPARE(s.preceding.usualSize, 512 * KiB);
        QCOMPARE(s.preceding.time, int64_t{8490});
        QVERIFY(s.preceding.allocationId >= 0);
        QCOMPARE(p[0].allocationId, s.preceding.allocationId);
        QCOMPARE(p[0].role, PrecursorRole::Effect);
        QCOMPARE(p[0].mechanism, std::string("kernel_fallback"));
        QVERIFY(p[0].evidence.standsOut);
        QVERIFY(p[0].evidence.allocatorLinked);

        const Verdict& v = rep->verdict;
        QVERIFY(v.allocatorRelated);
        QCOMPARE(v.mechanism, std::string("kernel_fallback"));
        QCOMPARE(v.headline,
                 std::string("allocator-related: kernel fallback after failed workspace "
                             "allocation"));
        QCOMPARE(v.evidence, (std::vector<size_t>{0}));
        QCOMPARE(v.healthyFrames, int64_t{5});

        // The churning segment: one folded row (3 creations and 3 releases in the window),
        // seen in all 5 healthy frames, so background with score 0, below the shift.
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
        QVERIFY(!churn->evidence.standsOut);
        QCOMPARE(churn->evidence.seenInHealthy, int64_t{5});
        QVERIFY2(churn->description.find("released and re-created 3x") != std::string::npos,
                 churn->description.c_str());
    }

    // Kernel launches are read on more connections than the engine's own, opened when first
    // needed: a file replaced after the open (an import writing the same name) must not be read
    // by them. The session with the shift is replaced by one without it before the first query.
    void launchesComeFromTheFileOpened()
    {
        const auto f = path("replaced.fragscope"), other = path("replacement.fragscope");
        buildSession(f, false);
        buildSession(other, false, false, false); // no shift: frame 7 runs gemm_big only
        const auto e = Engine::open(f);
        QVERIFY(std::rename(other.c_str(), f.c_str()) == 0);
        const auto rep = e->collapseReport(7);
        QVERIFY(rep.has_value());
        const Precursor* p = find(rep->precursors, PrecursorKind::KernelVariantShift);
        QVERIFY2(p && p->shift.has_value(), "the launches came from the replacement");
        QCOMPARE(p->shift->variant, std::string("gemm_small"));
        QCOMPARE(p->shift->callsAfter, int64_t{3});
    }

    // The same shift when the fallback's name was met first (a lower string id than the usual
    // variant's): the healthy frames' calls of a variant they never ran are still 0, not those
    // of a neighbouring variant.
    void shiftOfAVariantNamedFirst()
    {
        const auto f = path("shift-named-first.fragscope");
        buildSession(f, false, false, true, false, true);
        const auto e = Engine::open(f);
        const auto rep = e->collapseReport(7);
        QVERIFY(rep.has_value());
        const Precursor* p = find(rep->precursors, PrecursorKind::KernelVariantShift);
        QVERIFY(p && p->shift.has_value());
        QCOMPARE(p->shift->variant, std::string("gemm_small"));
        QCOMPARE(p->shift->usual, std::string("gemm_big"));
        // 0 of the 20 baseline calls at graph node 1 ran gemm_small; 3 of frame 7's 4 did.
        QCOMPARE(p->shift->callsBefore, int64_t{0});
        QCOMPARE(p->shift->totalBefore, int64_t{20});
        QCOMPARE(p->shift->callsAfter, int64_t{3});
        QCOMPARE(p->shift->shareBefore, 0.0);
    }

    void shiftOfAVariantTheBaselineRan()
    {
        // Eight calls at graph node 1 per frame: gemm_small runs the first two of them in every
        // frame but frame 7, where it runs six. The baseline (frames 0-4) sums each frame's
        // calls: gemm_small 2 x 5 = 10 of 40 (share 0.25); frame 7: 6 of 8 (0.75, Wilson lower
        // bound 0.409 > 0.25: a shift).
        const auto f = path("shift-known-variant.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
            for (int i = 0; i < 8; ++i) {
                const int64_t s = 1000 * (i + 1);
                mark(in, s, "frame " + std::to_string(i));
                mark(in, s + 1,
                     i == 7 ? "metric coherence_score=0.01" : "metric coherence_score=0.9");
                for (int j = 0; j < 8; ++j) {
                    const bool small = i == 7 ? j >= 2 : j < 2;
                    const int64_t t = s + 100 + 100 * j;
                    in.add(ev(EventType::Alloc, t - 10, kBase, 64 * KiB));
                    graphKernel(in, t, t + 40, small ? "gemm_small" : "gemm_big", 1, 1);
                    in.add(ev(EventType::Free, t + 50, kBase));
                }
            }
            mark(in, 9000, "end");
            in.end();
        }
        const auto rep = Engine::open(f)->collapseReport(7);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->baselineFrames, (std::vector<int64_t>{0, 1, 2, 3, 4}));
        const Precursor* p = find(rep->precursors, PrecursorKind::KernelVariantShift);
        QVERIFY(p && p->shift.has_value());
        QCOMPARE(p->shift->variant, std::string("gemm_small"));
        QCOMPARE(p->shift->usual, std::string("gemm_big"));
        QCOMPARE(p->shift->callsBefore, int64_t{10});
        QCOMPARE(p->shift->totalBefore, int64_t{40});
        QCOMPARE(p->shift->shareBefore, 0.25);
        QCOMPARE(p->shift->callsAfter, int64_t{6});
        QCOMPARE(p->shift->totalAfter, int64_t{8});
    }

    // docs/analysis.md "Ranking", worked example: score = closeness x m / (1 + m),
    // m = z / threshold.
    void scoreFormula()
    {
        const auto f = path("shift.fragscope"); // written by the test above
        if (!QFile::exists(QString::fromStdString(f))) buildSession(f, false);
        const auto rep = Engine::open(f)->collapseReport(7);
        QVERIFY(rep.has_value());
        const auto& p = rep->precursors;
        // Shift: gemm_small's share at graph node 1 is 0 in each of the 5 healthy frames, 0.75
        // in frame 7: median 0, spread 0, z = inf, threshold 3.5 (every healthy frame departs
        // by 0 from the others). The request before it is 2 log2 units smaller than before
        // gemm_big (log2(1 + 512 KiB) - log2(1 + 128 KiB) = 2.0000), against frame-to-frame
        // drops of 0, 0, 0, 0 in the healthy frames: z = inf, linked. Inside frame 7:
        // closeness 1, score 1 x 1 = 1.
        QCOMPARE(p[0].evidence.feature, std::string("variant_share"));
        QCOMPARE(p[0].evidence.closeness, 1.0);
        QCOMPARE(p[0].evidence.healthyFrames, int64_t{5});
        QCOMPARE(p[0].evidence.value, 0.75);
        QCOMPARE(p[0].evidence.healthyMedian, 0.0);
        QCOMPARE(p[0].evidence.healthyScale, 0.0);
        QVERIFY(std::isinf(p[0].evidence.z));
        QCOMPARE(p[0].evidence.threshold, 3.5);
        QVERIFY(std::isinf(p[0].shift->requestZ));
        QCOMPARE(p[0].score, 1.0);
        // The 3 MiB block of frame 6 (f-1), measured by the frame's smallest largest free block:
        // 3.5 MiB in the healthy frames 0, 2, 3, 4 (a 512 KiB workspace in the 4 MiB region),
        // 1 MiB in frame 1 (the same 3 MiB block) and in frame 6. On the negated figure (lower
        // is worse): healthy -3.5, -1, -3.5, -3.5, -3.5 MiB, median -3.5 MiB, MAD 0, mean
        // absolute deviation 2.5 / 5 = 0.5 MiB, spread 1.2533 x 0.5 = 0.62665 MiB; frame 6:
        // z = 2.5 / 0.62665 = 3.98947. Frame 1 departs infinitely from the other four (which never
        // varied): floor 1 MiB, and frame 6's 1 MiB does not go below it, so the row does not
        // stand out although z > 3.5. Score = 1/2 x m / (1 + m), m = 3.98947 / 3.5 = 1.13985:
        // 0.26633.
        const Precursor* split = find(p, PrecursorKind::SplitLargest, 7200);
        QVERIFY(split);
        QCOMPARE(split->evidence.feature, std::string("largest_free_min_bytes"));
        QCOMPARE(split->evidence.frame, int64_t{6});
        QCOMPARE(split->evidence.value, double(MiB));
        QCOMPARE(split->evidence.healthyMedian, 3.5 * MiB);
        QVERIFY(std::fabs(split->evidence.healthyScale - 1.2533 * 0.5 * MiB) < 1e-6);
        QVERIFY(std::fabs(split->evidence.z - 2.5 / (1.2533 * 0.5)) < 1e-9);
        QCOMPARE(split->evidence.floor, double(MiB));
        QVERIFY(!split->evidence.standsOut);
        QCOMPARE(split->evidence.closeness, 0.5);
        const double m = split->evidence.z / 3.5;
        QVERIFY(std::fabs(split->score - 0.5 * m / (1 + m)) < 1e-12);
        QVERIFY(std::fabs(split->score - 0.26633) < 1e-5);
        // Ranked below the shift (which stands out) however large its score.
        QVERIFY(split > &p[0]);
        // Every row but the shift is within the healthy spread.
        for (size_t i = 1; i < p.size(); ++i)
            QVERIFY2(!p[i].evidence.standsOut, p[i].description.c_str());
    }

    // The lookback looks like the healthy frames: no shift, no OOM, the same churn, a split the
    // healthy frames had too. The quality dropped, but nothing departs from the healthy frames
    // more than they vary among themselves.
    void lookbackLikeHealthyFrames()
    {
        const auto f = path("content.fragscope");
        buildSession(f, false, false, false);
        const auto rep = Engine::open(f)->collapseReport(7);
        QVERIFY(rep.has_value());
        QVERIFY(!rep->verdict.allocatorRelated);
        QVERIFY(rep->verdict.mechanism.empty());
        QVERIFY(rep->verdict.evidence.empty());
        QCOMPARE(rep->verdict.headline,
                 std::string("no allocator precursor stands out: quality dropped without a memory "
                             "event beyond what the 5 healthy frames show"));
        QVERIFY(!rep->precursors.empty());
        for (const Precursor& x : rep->precursors)
            QVERIFY2(!x.evidence.standsOut, x.description.c_str());
        QVERIFY(!find(rep->precursors, PrecursorKind::KernelVariantShift));
    }

    // An event at the instant one frame ends and the next begins belongs to both. The baseline
    // pass has already replayed it (frame 4 ends at 6000) when the window (from 6000) begins:
    // the window must still list it. D's creation and release fold into one row of 2 events;
    // a replay that went on from frame 4's end would see only the release (count 1).
    void eventAtAFrameBoundary()
    {
        const auto f = path("boundary.fragscope");
        buildSession(f, false, false, true, true);
        const auto rep = Engine::open(f)->collapseReport(7);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->windowBegin, int64_t(6000));
        const Precursor* d = nullptr;
        for (const Precursor& x : rep->precursors)
            if (x.address == kBase + 128 * MiB) d = &x;
        QVERIFY(d);
        QCOMPARE(d->count, int64_t(2));
        QVERIFY2(d->description.find("released and re-created") != std::string::npos,
                 d->description.c_str());
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
        const CollapseReport before = e->frameReport(7);
        QCOMPARE(before.baselineFrames, (std::vector<int64_t>{0, 1, 2, 3, 4}));
        const Precursor* was = find(before.precursors, PrecursorKind::SplitLargest, 7200);
        QVERIFY(was && !was->evidence.standsOut);
        // Under the strict rules frame 1 collapses: the baseline of frame 7 (window frames 5-7)
        // is frames 0, 2, 3, 4, whose smallest largest free block is 3.5 MiB in every one: spread
        // 0, so frame 6's 1 MiB departs infinitely and stands out (an allocator condition: the
        // verdict still rests on the shift). Score = closeness 1/2. Novelty 1 (was 4/5). The
        // churning segment is still in every healthy frame: background, seen in 4 of 4.
        const CollapseReport after = e->frameReport(7, strict);
        QCOMPARE(after.baselineFrames, (std::vector<int64_t>{0, 2, 3, 4}));
        const Precursor* split = find(after.precursors, PrecursorKind::SplitLargest, 7200);
        QVERIFY(split);
        QCOMPARE(split->evidence.seenInHealthy, int64_t{0});
        QCOMPARE(split->evidence.healthyFrames, int64_t{4});
        QCOMPARE(split->evidence.novelty, 1.0);
        QVERIFY(std::isinf(split->evidence.z));
        QVERIFY(split->evidence.standsOut);
        QCOMPARE(split->score, 0.5);
        QCOMPARE(split->role, PrecursorRole::Condition);
        QCOMPARE(after.verdict.mechanism, std::string("kernel_fallback"));
        QCOMPARE(after.precursors[0].kind, PrecursorKind::KernelVariantShift);
        QCOMPARE(after.precursors[1].kind, PrecursorKind::SplitLargest); // the next that stands out
        for (const Precursor& p : after.precursors)
            if (p.kind == PrecursorKind::RegionCreated || p.kind == PrecursorKind::RegionReleased)
                QVERIFY(p.background);

        // An engine opened with the strict rules (what `fragscope collapse --rules` runs) gives
        // the same collapses and the same ranking, row by row.
        LoadOptions o;
        o.rules = strict;
        const auto byCli = Engine::open(f, o);
        QCOMPARE(byCli->collapses().size(), size_t{2}); // frame 1, frame 7
        const auto viaRules = e->collapseReport(7, strict);
        const auto opened = byCli->collapseReport(7);
        QVERIFY(viaRules && opened);
        QVERIFY(!e->collapseReport(1).has_value());
        QVERIFY(e->collapseReport(1, strict).has_value());
        QCOMPARE(viaRules->baselineFrames, opened->baselineFrames);
        QCOMPARE(viaRules->collapse.brokenRules, opened->collapse.brokenRules);
        QCOMPARE(viaRules->verdict.headline, opened->verdict.headline);
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
        QCOMPARE(e->frameReport(7).baselineFrames, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    }

    // An OOM inside the collapsed frame: 8 MiB of failed requests where the healthy frames had
    // none (z = inf); an outright failure ranks before the fallback that stands out as much,
    // whose preceding request is marked as failed.
    void oomRanksFirst()
    {
        const auto f = path("oom.fragscope");
        buildSession(f, true);
        const auto rep = Engine::open(f)->collapseReport(7);
        QVERIFY(rep.has_value());
        const auto& p = rep->precursors;
        QVERIFY(p.size() >= 2);
        QCOMPARE(p[0].kind, PrecursorKind::Oom);
        QCOMPARE(p[0].time, int64_t{8480});
        QCOMPARE(p[0].evidence.feature, std::string("failed_request_bytes"));
        QCOMPARE(p[0].evidence.value, double(8 * MiB));
        QCOMPARE(p[0].score, 1.0);
        QCOMPARE(p[1].kind, PrecursorKind::KernelVariantShift);
        QCOMPARE(p[1].shift->preceding.change, RequestChange::Failed);
        QCOMPARE(p[1].shift->preceding.oomRequested, 8 * MiB);
        QCOMPARE(rep->verdict.mechanism, std::string("out_of_memory"));
        QCOMPARE(rep->verdict.evidence, (std::vector<size_t>{0, 1}));
    }

    // Novelty compares the window's rows with the healthy frames' events by signature, and the
    // two are taken apart (the healthy frames' from numbers, the window's from its rows): each
    // kind of row must be recognised in a healthy frame that had the same event.
    // Frames 0..7 (S = 1000 (i + 1)), frame 7 collapses; lookback 2: baseline frames 0-4. Every
    // frame, in the 4 MiB region R at kBase:
    // - segment C at kBase + 64 MiB created at S+100, released at S+850 (region rows);
    // - at S+200 "kv", 1 MiB, at +0 in even frames and +2 MiB in odd ones: it cuts the largest
    //   free fragment (4 -> 3 MiB even, 4 -> 2 MiB odd), a tagged split; it moved 2 MiB from the
    //   frame before, a tagged jump;
    // - at S+300 an untagged 512 KiB block at +1 MiB (even: 3 -> 2.5 MiB) or +0 (odd: the
    //   largest [0, 2 MiB) -> [0.5, 2 MiB), 1.5 MiB), an untagged split (class 2^19), moved 1 MiB;
    // - an OOM at S+500; both blocks freed at S+800.
    // Seen in all 5 healthy frames: the region, both splits and the OOM; the jumps in 4 (frame 0
    // has no frame before it).
    void healthyFramesSignaturesMatchTheWindows()
    {
        const auto f = path("signatures.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            const StringId kv = in.intern("kv");
            in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
            for (int i = 0; i < 8; ++i) {
                const int64_t s = 1000 * (i + 1);
                const bool odd = i % 2 == 1;
                mark(in, s, "frame " + std::to_string(i));
                mark(in, s + 1,
                     i == 7 ? "metric coherence_score=0.01" : "metric coherence_score=0.9");
                in.add(ev(EventType::RegionCreate, s + 100, kBase + 64 * MiB, MiB));
                Event tagged = ev(EventType::Alloc, s + 200, kBase + (odd ? 2 * MiB : 0), MiB);
                tagged.name = kv;
                in.add(tagged);
                const uint64_t plain = kBase + (odd ? 0 : MiB);
                in.add(ev(EventType::Alloc, s + 300, plain, 512 * KiB));
                in.add(ev(EventType::Oom, s + 500, 0, 8 * MiB));
                in.add(ev(EventType::Free, s + 800, tagged.address));
                in.add(ev(EventType::Free, s + 801, plain));
                in.add(ev(EventType::RegionDestroy, s + 850, kBase + 64 * MiB));
            }
            mark(in, 9000, "end");
            in.end();
        }
        const auto rep = Engine::open(f)->collapseReport(7);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->baselineFrames, (std::vector<int64_t>{0, 1, 2, 3, 4}));
        int regions = 0, splits = 0, jumps = 0, ooms = 0;
        for (const Precursor& p : rep->precursors) {
            int64_t expected = 5;
            switch (p.kind) {
            case PrecursorKind::RegionCreated:
            case PrecursorKind::RegionReleased:
                ++regions;
                break;
            case PrecursorKind::SplitLargest:
                ++splits;
                break;
            case PrecursorKind::AddressJump:
                ++jumps;
                expected = 4;
                break;
            case PrecursorKind::Oom:
                ++ooms;
                break;
            default:
                continue;
            }
            QVERIFY2(p.evidence.seenInHealthy == expected,
                     (p.description + ": seen in " + std::to_string(p.evidence.seenInHealthy) +
                      " healthy frames")
                         .c_str());
        }
        QCOMPARE(regions, 1); // created and released, folded into one row
        QCOMPARE(splits, 2);  // "kv" and the 2^19 class
        QCOMPARE(jumps, 2);   // "kv" and 512 KiB
        QCOMPARE(ooms, 1);
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
        QCOMPARE(rep->verdict.mechanism, std::string("kernel_fallback"));
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
        QCOMPARE(fs::store::debugQuery(s).scalarText(
                     "SELECT mechanism FROM sim_truth_causes WHERE frame = 22"),
                 std::string("workspace_fallback"));
    }
};

QTEST_GUILESS_MAIN(TstAnalysisPrecursors)
#include "tst_analysis_precursors.moc"
