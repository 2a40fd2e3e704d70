// The engine over hand-built sessions with known answers (fragments, ratio, entropy, histogram,
// timeline, heatmap and memory-map pixels, precursor ranking) and a property test over a long
// random first-fit workload (index == full replay, allocated + free == reserved per region).
#include "builder.h"
#include "capture/sim/simulator.h"
#include "core/analysis/engine.h"
#include "core/analysis/metrics.h"
#include "core/analysis/report.h"
#include "core/analysis/report_format.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include <fmt/format.h>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

bool sameState(const State& a, const State& b, QString& why)
{
    auto diff = [&](const char* what, double x, double y) {
        why = QString("%1: %2 vs %3 at t=%4")
                  .arg(what)
                  .arg(x, 0, 'g', 17)
                  .arg(y, 0, 'g', 17)
                  .arg(a.time);
        return false;
    };
    if (a.reservedBytes != b.reservedBytes)
        return diff("reserved", double(a.reservedBytes), double(b.reservedBytes));
    if (a.allocatedBytes != b.allocatedBytes)
        return diff("allocated", double(a.allocatedBytes), double(b.allocatedBytes));
    if (a.allocatedOutsideBytes != b.allocatedOutsideBytes)
        return diff("outside", double(a.allocatedOutsideBytes), double(b.allocatedOutsideBytes));
    if (a.freeBytes != b.freeBytes) return diff("free", double(a.freeBytes), double(b.freeBytes));
    if (a.fragmentCount != b.fragmentCount)
        return diff("fragments", double(a.fragmentCount), double(b.fragmentCount));
    if (a.largestFreeFragmentBytes != b.largestFreeFragmentBytes)
        return diff("largest", double(a.largestFreeFragmentBytes),
                    double(b.largestFreeFragmentBytes));
    if (a.liveAllocations != b.liveAllocations)
        return diff("live", double(a.liveAllocations), double(b.liveAllocations));
    if (a.regionCount != b.regionCount) return diff("regions", a.regionCount, b.regionCount);
    if (std::fabs(a.fragmentationRatio - b.fragmentationRatio) > 1e-12)
        return diff("F", a.fragmentationRatio, b.fragmentationRatio);
    if (std::fabs(a.fragmentEntropyBits - b.fragmentEntropyBits) > 1e-9)
        return diff("entropy", a.fragmentEntropyBits, b.fragmentEntropyBits);
    if (a.histogram.log2.size() != b.histogram.log2.size())
        return diff("histogram bins", double(a.histogram.log2.size()),
                    double(b.histogram.log2.size()));
    for (size_t i = 0; i < a.histogram.log2.size(); ++i)
        if (a.histogram.log2[i].count != b.histogram.log2[i].count ||
            a.histogram.log2[i].bytes != b.histogram.log2[i].bytes)
            return diff("histogram bin", double(a.histogram.log2[i].lo),
                        double(b.histogram.log2[i].lo));
    return true;
}

} // namespace

class TstAnalysisEngine : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    std::string path(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }

    // builder.h's known session.
    std::string knownSession()
    {
        const auto f = path("known.fragscope");
        writeKnownSession(f);
        return f;
    }

    // A simulated video-diffusion run (capture/sim) written to f, then whatever more adds.
    // more: events after the simulated run's; before: events ahead of it.
    sim::Stats simulate(const std::string& f, int frames, int steps,
                        const std::function<void(Ingest&)>& more = {},
                        const std::function<void(Ingest&)>& before = {}) const
    {
        IngestOptions o = options(f);
        o.sourceKind = "simulator";
        o.synthetic = true;
        Ingest in(o);
        in.begin();
        if (before) before(in);
        sim::Config cfg;
        cfg.frames = frames;
        cfg.steps = steps;
        sim::Simulator s(cfg);
        const sim::Stats st = s.run(in);
        if (more) more(in);
        in.end();
        return st;
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void fragmentsAndRatio()
    {
        const auto e = Engine::open(knownSession());
        QCOMPARE(e->tracks().size(), size_t{1});
        QVERIFY(e->defaultTrack(0).has_value());
        QCOMPARE(e->defaultTrack(0)->level, Level::Framework);

        // t = 5: the whole segment is one 1 MiB fragment.
        State s = e->stateAt(0, Level::Framework, 5);
        QCOMPARE(s.reservedBytes, 1 * MiB);
        QCOMPARE(s.fragmentCount, int64_t{1});
        QCOMPARE(s.largestFreeFragmentBytes, 1 * MiB);
        QCOMPARE(s.fragmentationRatio, 0.0);

        // t = 35: A, B, C live; one fragment [896K, 1M) = 128 KiB; F = 1 - 128/128 = 0.
        s = e->stateAt(0, Level::Framework, 35);
        QCOMPARE(s.allocatedBytes, 896 * KiB);
        QCOMPARE(s.freeBytes, 128 * KiB);
        QCOMPARE(s.fragmentCount, int64_t{1});
        QCOMPARE(s.fragmentationRatio, 0.0);
        QCOMPARE(s.fragmentEntropyBits, 0.0);

        // t = 40 (B's free included): fragments 256 KiB [256K, 512K) and 128 KiB; free 384 KiB;
        // F = 1 - 256/384 = 1/3; classes (128, 256] and (64, 128] KiB equally -> exactly 1 bit.
        s = e->stateAt(0, Level::Framework, 40);
        QCOMPARE(s.allocatedBytes, 640 * KiB);
        QCOMPARE(s.freeBytes, 384 * KiB);
        QCOMPARE(s.allocatedBytes + s.freeBytes, s.reservedBytes);
        QCOMPARE(s.fragmentCount, int64_t{2});
        QCOMPARE(s.largestFreeFragmentBytes, 256 * KiB);
        QVERIFY(std::fabs(s.fragmentationRatio - 1.0 / 3.0) < 1e-15);
        QCOMPARE(s.fragmentEntropyBits, 1.0);
        // Histogram: 128 KiB in [128K, 256K), 256 KiB in [256K, 512K); seed clusters: 128 KiB in
        // 64-128 KiB, 256 KiB in >= 256 KiB.
        QCOMPARE(s.histogram.log2.size(), size_t{2});
        QCOMPARE(s.histogram.log2[0].lo, 128 * KiB);
        QCOMPARE(s.histogram.log2[0].count, int64_t{1});
        QCOMPARE(s.histogram.log2[1].lo, 256 * KiB);
        QCOMPARE(s.histogram.clusters[0].count, int64_t{0});
        QCOMPARE(s.histogram.clusters[1].count, int64_t{1});
        QCOMPARE(s.histogram.clusters[2].count, int64_t{1});
        QCOMPARE(s.histogram.clusters[2].bytes, 256 * KiB);

        // t = 39: B still live (the free at 40 is not included).
        QCOMPARE(e->stateAt(0, Level::Framework, 39).fragmentCount, int64_t{1});

        // D sits outside any region: counted apart, never as a fragment's neighbour.
        s = e->stateAt(0, Level::Framework, e->timeEnd());
        QCOMPARE(s.allocatedOutsideBytes, 4 * KiB);
        QCOMPARE(s.liveAllocations, int64_t{3});
        QCOMPARE(s.fragmentCount, int64_t{2});
        QVERIFY(e->caveats().anomalies > 0); // outside_region was recorded by ingest

        // Fragments and lookups.
        const auto frags = e->fragmentsAt(0, Level::Framework, 45);
        QCOMPARE(frags.size(), size_t{2});
        QCOMPARE(frags[0].address, kBase + 256 * KiB);
        QCOMPARE(frags[1].size, 128 * KiB);
        const auto hit = e->allocationAt(0, Level::Framework, 45, kBase + 600 * KiB);
        QVERIFY(hit.has_value());
        QCOMPARE(hit->address, kBase + 512 * KiB);
        QCOMPARE(hit->allocNs, int64_t{30});
        QVERIFY(!e->allocationAt(0, Level::Framework, 45, kBase + 300 * KiB).has_value());
        QVERIFY(e->allocation(hit->id).has_value());

        for (int64_t t : {0, 5, 10, 25, 35, 40, 45, 50, 100}) {
            QString why;
            QVERIFY2(sameState(e->stateAt(0, Level::Framework, t),
                               e->stateAtFullReplay(0, Level::Framework, t), why),
                     qPrintable(why));
        }
    }

    void timelineKnownAnswers()
    {
        const auto e = Engine::open(knownSession());
        TimelineOptions o;
        o.from = 0;
        o.to = 45;
        o.step = 5;
        o.entropyWindowNs = 1000;
        const Timeline tl = e->timeline(o);
        QCOMPARE(tl.time.size(), size_t{10}); // 0, 5, ..., 45
        QCOMPARE(tl.time.back(), int64_t{45});
        QCOMPARE(tl.fragmentCount.back(), 2.0);
        QVERIFY(std::fabs(tl.fragmentationRatio.back() - 1.0 / 3.0) < 1e-12);
        QCOMPARE(tl.fragmentEntropy.back(), 1.0);
        // Events up to 45: allocs 256K, 256K, 384K and the free of a 256K block: classes
        // (128, 256] KiB x3 and (256, 512] KiB x1 -> H(3/4, 1/4) = 0.811278 bits.
        QVERIFY(std::fabs(tl.eventEntropy.back() - 0.8112781244591328) < 1e-12);
        // At t = 25 two allocs of one class: 0 bits; a window of 10 at t = 45 holds only the
        // free at 40 -> 0 bits.
        QCOMPARE(tl.eventEntropy[5], 0.0);
        o.entropyWindowNs = 10;
        QCOMPARE(e->timeline(o).eventEntropy.back(), 0.0);
        // Reserved = allocated + free at every sample.
        for (size_t i = 0; i < tl.time.size(); ++i)
            QCOMPARE(tl.allocated[i] + tl.freeInRegions[i], tl.reserved[i]);
        // Trend of F over the samples: a fit exists with n = 10.
        QCOMPARE(e->trend(tl, "fragmentation_ratio", kNoTime, kNoTime).n, int64_t{10});
        // Bursts with a 15 ns gap: allocations at 10, 20, 30 (gaps 10) then 50 (gap 20).
        const auto b = e->bursts(0, Level::Framework, kNoTime, kNoTime, 15);
        QCOMPARE(b.size(), size_t{2});
        QCOMPARE(b[0].allocations, int64_t{3});
        // A window keeps the allocations with from <= time <= to: [20, 30] holds 20 and 30
        // (one burst of 2); [21, 50] holds 30 and 50 (two bursts of 1).
        const auto w = e->bursts(0, Level::Framework, 20, 30, 15);
        QCOMPARE(w.size(), size_t{1});
        QCOMPARE(w[0].allocations, int64_t{2});
        QCOMPARE(w[0].begin, int64_t{20});
        const auto w2 = e->bursts(0, Level::Framework, 21, 50, 15);
        QCOMPARE(w2.size(), size_t{2});
        QCOMPARE(w2[0].begin, int64_t{30});
        QCOMPARE(w2[1].begin, int64_t{50});
        // The report's summary: one burst of more than one allocation (10, 20, 30).
        QCOMPARE(e->burstSummary(0, Level::Framework, 15).bursts, int64_t{1});
        QCOMPARE(e->burstSummary(0, Level::Framework, 15).largestAllocations, int64_t{3});
    }

    void heatmapOneAllocation()
    {
        // A 4 KiB region alive over the whole span; one 1 KiB block at [1K, 2K) from 100 to 200;
        // the session ends at 400. A 4 x 4 raster over [0, 400) x [0, 4K): columns of 100 ns,
        // rows of 1 KiB. The block fills cell (1, 1) exactly and nothing else.
        const auto f = path("heat.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 4096));
            in.add(ev(EventType::Alloc, 100, kBase + 1024, 1024));
            in.add(ev(EventType::Free, 200, kBase + 1024));
            mark(in, 400, "end");
            in.end();
        }
        const auto e = Engine::open(f);
        HeatmapRequest r;
        r.t0 = 0;
        r.t1 = 400;
        r.width = 4;
        r.height = 4;
        const HeatmapRaster h = e->heatmap(r);
        QCOMPARE(h.layout.compactSize, uint64_t{4096});
        QCOMPARE(h.allocationsInView, int64_t{1});
        for (int y = 0; y < 4; ++y)
            for (int x = 0; x < 4; ++x) {
                const size_t k = static_cast<size_t>(y * 4 + x);
                const bool hit = x == 1 && y == 1;
                QVERIFY2(std::fabs(h.occupancy[k] - (hit ? 1.0f : 0.0f)) < 1e-6,
                         qPrintable(QString("cell %1,%2").arg(x).arg(y)));
                QCOMPARE(h.state[k], hit ? CellState::Allocated : CellState::Free);
                QVERIFY(std::fabs(h.reservedFraction[k] - 1.0f) < 1e-6);
            }
        // 2 x 2: cell (0, 0) spans [0, 200) x [0, 2K): the block covers half its time and half
        // its bytes -> occupancy 0.25.
        r.width = r.height = 2;
        const HeatmapRaster h2 = e->heatmap(r);
        QVERIFY(std::fabs(h2.occupancy[0] - 0.25f) < 1e-6);
        QCOMPARE(h2.occupancy[1], 0.0f);
        QCOMPARE(h2.occupancy[2], 0.0f);
        // A viewport after the block's life shows only free cells.
        r.t0 = 200;
        const HeatmapRaster h3 = e->heatmap(r);
        QCOMPARE(h3.allocationsInView, int64_t{0});
        for (CellState c : h3.state)
            QCOMPARE(c, CellState::Free);

        // Memory map at t = 150, 2 x 2 cells of 1 KiB along the curve: the block is curve
        // position 1, which is cell (0, 1) -> index 2.
        MemmapRequest m;
        m.time = 150;
        m.order = 1;
        const MemmapRaster mm = e->memmap(m);
        QCOMPARE(mm.side, 2);
        QCOMPARE(mm.bytesPerCell, uint64_t{1024});
        QCOMPARE(mm.state[2], CellState::Allocated);
        QVERIFY(std::fabs(mm.occupancy[2] - 1.0f) < 1e-6);
        QCOMPARE(mm.state[0], CellState::Free);
        QCOMPARE(mm.state[1], CellState::Free);
        QCOMPARE(mm.state[3], CellState::Free);
    }

    void layoutSeparators()
    {
        // Two regions 1 MiB apart: compacted end to end with one separator between them.
        const auto f = path("layout.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 64 * KiB));
            in.add(ev(EventType::RegionCreate, 1, kBase + MiB, 64 * KiB));
            mark(in, 10, "end");
            in.end();
        }
        const auto e = Engine::open(f);
        const AddressLayout L = e->layout(0, Level::Framework);
        QCOMPARE(L.ranges.size(), size_t{2});
        QCOMPARE(L.separators.size(), size_t{1});
        // Separator = max(1, total / (10 * separators)) = 128 KiB / 10 = 13107 bytes.
        QCOMPARE(L.separatorBytes, uint64_t{13107});
        QCOMPARE(L.compactSize, 128 * KiB + 13107);
        uint64_t c = 0, a = 0;
        QVERIFY(L.toCompact(kBase + MiB + 5, c));
        QCOMPARE(c, 64 * KiB + 13107 + 5);
        QVERIFY(L.toAddress(c, a));
        QCOMPARE(a, kBase + MiB + 5);
        QVERIFY(!L.toAddress(64 * KiB + 10, a));     // inside the separator
        QVERIFY(!L.toCompact(kBase + 100 * KiB, c)); // in the hole
    }

    void precursorRanking()
    {
        // Frames 0..3 of 1000 ns from t = 1000; coherence 0.9, 0.8, 0.01, 0.7: frame 2 collapses.
        // Window = [start(frame 0), end(frame 2)] = [1000, 4000]; no healthy frame precedes it,
        // so no row can be measured against the healthy spread (docs/analysis.md "Verdict"):
        // every score is 0, nothing stands out, and the rows keep the order of their kinds'
        // severity (an OOM first), then time:
        //   OOM 4 MiB at 3300 (frame 2)
        //   A (256K) at 1500 (frame 0): largest 1 MiB -> 768K
        //   new 2 MiB region at 3100
        //   B (512K mid-region) at 3200: largest 2 MiB -> 1 MiB
        //   kernel gemm_fallback only in frame 2: listed in newKernels only
        const auto f = path("collapse.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            for (int i = 0; i < 4; ++i) {
                mark(in, 1000 * (i + 1), "frame " + std::to_string(i));
                const double v[] = {0.9, 0.8, 0.01, 0.7};
                mark(in, 1000 * (i + 1) + 1, "metric coherence_score=" + std::to_string(v[i]));
                kernel(in, 1000 * (i + 1) + 100, 1000 * (i + 1) + 150, "gemm_a");
            }
            in.add(ev(EventType::Alloc, 1500, kBase, 256 * KiB));
            in.add(ev(EventType::RegionCreate, 3100, kBase + 4 * MiB, 2 * MiB));
            kernel(in, 3150, 3180, "gemm_fallback");
            in.add(ev(EventType::Alloc, 3200, kBase + 4 * MiB + 512 * KiB, 512 * KiB));
            in.add(ev(EventType::Oom, 3300, 0, 4 * MiB));
            mark(in, 5000, "end");
            in.end();
        }
        const auto e = Engine::open(f);
        QCOMPARE(e->frames().size(), size_t{4});
        QCOMPARE(e->collapses().size(), size_t{1});
        QCOMPARE(e->collapses()[0].firstFrame, int64_t{2});
        QCOMPARE(e->collapses()[0].lastFrame, int64_t{2});
        QCOMPARE(e->frames()[2].collapse, 0);
        QCOMPARE(e->frames()[2].newKernelVariants, int64_t{1});
        QCOMPARE(e->frames()[1].newKernelVariants, int64_t{0});
        QVERIFY(!e->collapseReport(1).has_value());
        const auto rep = e->collapseReport(2);
        QVERIFY(rep.has_value());
        QCOMPARE(rep->windowBegin, int64_t{1000});
        QCOMPARE(rep->windowEnd, int64_t{4000});
        const auto& p = rep->precursors;
        QCOMPARE(p.size(), size_t{4});
        QCOMPARE(p[0].kind, PrecursorKind::Oom);
        QCOMPARE(p[1].kind, PrecursorKind::SplitLargest);
        QCOMPARE(p[1].time, int64_t{1500});
        QCOMPARE(p[1].evidence.largestEffect, 0.25);
        QCOMPARE(p[2].kind, PrecursorKind::RegionCreated);
        QCOMPARE(p[3].kind, PrecursorKind::SplitLargest);
        QCOMPARE(p[3].time, int64_t{3200});
        QCOMPARE(p[3].evidence.largestEffect, 0.5);
        QCOMPARE(p[3].evidence.largestDropBytes, MiB);
        for (const Precursor& x : p) {
            QCOMPARE(x.score, 0.0);
            QVERIFY(!x.evidence.standsOut);
        }
        QVERIFY(rep->baselineFrames.empty());
        QVERIFY(!rep->verdict.allocatorRelated);
        QVERIFY(rep->verdict.mechanism.empty());
        QVERIFY2(rep->verdict.headline.find("too few") != std::string::npos,
                 rep->verdict.headline.c_str());
        QCOMPARE(rep->newKernels.size(), size_t{1});
        QCOMPARE(rep->newKernels[0].name, std::string("gemm_fallback"));
        // State diff end(frame 1) = 3000 -> end(frame 2) = 4000.
        QCOMPARE(rep->diff.size(), size_t{1});
        QCOMPARE(rep->diff[0].before.reservedBytes, MiB);
        QCOMPARE(rep->diff[0].before.largestFreeFragmentBytes, 768 * KiB);
        QCOMPARE(rep->diff[0].after.reservedBytes, 3 * MiB);
        QCOMPARE(rep->diff[0].after.largestFreeFragmentBytes, MiB);
        QCOMPARE(rep->diff[0].after.fragmentCount, int64_t{3});
        // Per-frame extremes: in frame 2 the largest went 768K -> 2 MiB -> 1 MiB.
        const FrameAllocator& fa = e->frames()[2].allocator.at(0);
        QCOMPARE(fa.minLargestFragment, 768 * KiB);
        QCOMPARE(fa.maxLargestFragment, 2 * MiB);
        QCOMPARE(fa.allocs, int64_t{1});
        // Time parsing: frame:N is the end of frame N; units are offsets from the beginning.
        QCOMPARE(parseTime(*e, "frame:1"), int64_t{3000});
        QCOMPARE(parseTime(*e, "end"), e->timeEnd());
        QCOMPARE(parseTime(*e, "2us"), e->timeBegin() + 2000);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parseTime(*e, "frame:9"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parseTime(*e, "12 parsecs"));
        // Editable rules: coherence < 0.85 breaks frames 1, 2, 3 (0.8, 0.01, 0.7): one run 1..3;
        // coherence > 0.75 breaks frames 0 and 1 (0.9, 0.8): one run 0..1.
        auto runs = e->collapsesWith({{"coherence_score", Compare::Less, 0.85}});
        QCOMPARE(runs.size(), size_t{1});
        QCOMPARE(runs[0].firstFrame, int64_t{1});
        QCOMPARE(runs[0].lastFrame, int64_t{3});
        runs = e->collapsesWith({{"coherence_score", Compare::Greater, 0.75}});
        QCOMPARE(runs.size(), size_t{1});
        QCOMPARE(runs[0].lastFrame, int64_t{1});
        // Correlation of the largest fragment at frame end with coherence over 4 frames has n = 4.
        QCOMPARE(e->correlation(0, Level::Framework, "largest_fragment_end", "coherence_score").n,
                 int64_t{4});
        // Its scatter (Engine::correlationPoints): the frame ends' largest fragments 768K, 768K,
        // 1M, 1M against coherence 0.9, 0.8, 0.01, 0.7. Least squares: mean x = 896K and every x
        // is 128K from it, so slope = sum(dx*dy) / sum(dx^2) = 128K * (-0.495 - 0.495) /
        // (4 * 128K^2) = -0.99 / 512K per byte; intercept = mean y - slope * mean x = 0.6025 +
        // 0.99 * 896K / 512K = 2.335.
        const CorrelationPoints cp =
            e->correlationPoints(0, Level::Framework, "largest_fragment_end", "coherence_score");
        QCOMPARE(cp.frames, (std::vector<int64_t>{0, 1, 2, 3}));
        QCOMPARE(cp.x, (std::vector<double>{768.0 * KiB, 768.0 * KiB, 1.0 * MiB, 1.0 * MiB}));
        QCOMPARE(cp.y, (std::vector<double>{0.9, 0.8, 0.01, 0.7}));
        QCOMPARE(cp.stats.n, int64_t{4});
        QVERIFY(std::abs(cp.line.slope + 0.99 / (512.0 * KiB)) < 1e-12);
        QVERIFY(std::abs(cp.line.intercept - 2.335) < 1e-9);
    }

    void commonRuleIsNotABreak()
    {
        // 12 frames of 1000 ns. flow_l2_px (a moving camera): 9.5 on frames 0-8 and 11, 3.0 on
        // 9 and 10, so `flow_l2_px > 8.7` fires on 10 of 12 frames: more than half, in a run of
        // at least kCommonRuleMinFrames frames with the metric, so it describes the run and
        // makes no collapse. coherence_score 0.9 everywhere but 0.01 on frame 6: frame 6 is the
        // one collapse, and its healthy baseline keeps the frames the flow rule breaks.
        const auto f = path("common-rule.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            for (int i = 0; i < 12; ++i) {
                mark(in, 1000 * (i + 1), "frame " + std::to_string(i));
                mark(in, 1000 * (i + 1) + 1,
                     fmt::format("metric flow_l2_px={} coherence_score={}",
                                 i == 9 || i == 10 ? 3.0 : 9.5, i == 6 ? 0.01 : 0.9));
            }
            mark(in, 13500, "end");
            in.end();
        }
        LoadOptions o;
        o.rules = {{"flow_l2_px", Compare::Greater, 8.7}, {"coherence_score", Compare::Less, 0.05}};
        const auto e = Engine::open(f, o);
        QCOMPARE(e->commonRules().size(), size_t{1});
        const CommonRule& c = e->commonRules()[0];
        QCOMPARE(c.fires, int64_t{10});
        QCOMPARE(c.frames, int64_t{12});
        QCOMPARE(c.describe(),
                 std::string("flow_l2_px > 8.7: not a break: fires on 10 of 12 frames"));
        QVERIFY(c.explain().starts_with("rule flow_l2_px > 8.7: not a break: fires on 10 of 12"));
        // The report prints the same sentence under its collapses.
        QVERIFY(reportText(buildReport(*e, f)).find(c.explain()) != std::string::npos);
        QCOMPARE(e->collapses().size(), size_t{1});
        QCOMPARE(e->collapses()[0].firstFrame, int64_t{6});
        QCOMPARE(e->collapses()[0].lastFrame, int64_t{6});
        for (const FrameInfo& fr : e->frames())
            QCOMPARE(fr.breaksRule, fr.index == 6);
        const auto rep = e->collapseReport(6);
        QVERIFY(rep.has_value());
        // Lookback 2: window from frame 4; the baseline is frames 0-3, all breaking the flow rule.
        QCOMPARE(rep->baselineFrames, (std::vector<int64_t>{0, 1, 2, 3}));
        // A rule that fires on 2 of 12 frames (flow_l2_px < 5: frames 9 and 10) stays active.
        const RuleSplit rare = splitCommonRules({{"flow_l2_px", Compare::Less, 5}}, e->frames());
        QCOMPARE(rare.active.size(), size_t{1});
        QVERIFY(rare.common.empty());
        // A model's score keeps its rule however often it fires (coherence_score < 0.95 on all
        // 12 frames: every frame breaks it, one collapse 0..11).
        const RuleSplit score =
            splitCommonRules({{"coherence_score", Compare::Less, 0.95}}, e->frames());
        QCOMPARE(score.active.size(), size_t{1});
        QVERIFY(score.common.empty());
        // Fewer than kCommonRuleMinFrames frames with the metric: judged as usual.
        std::vector<FrameInfo> few(e->frames().begin(), e->frames().begin() + 9);
        QVERIFY(splitCommonRules(o.rules, few).common.empty());
    }

    void frameKernelCountsInAnyRowOrder()
    {
        // Frames 0, 1, 2 from 1000, 2000 and 3000 (each to the next one's start, the last to the
        // session's end); kernel rows written out of time order (as streams finish out of order):
        //   frame 0: a@1100, b@1200, a@1300 -> 3 calls, 2 names, none new (the first frame)
        //   frame 1: a@2100, c@2500        -> 2 calls, 2 names, 1 new (c)
        //   frame 2: b@3100, b@3200        -> 2 calls, 1 name, none new (b ran in frame 0)
        // d@900 is before every frame: counted nowhere.
        const auto f = path("kernel-order.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            mark(in, 1000, "frame 0");
            mark(in, 2000, "frame 1");
            mark(in, 3000, "frame 2");
            kernel(in, 3100, 3110, "b");
            kernel(in, 1100, 1110, "a");
            kernel(in, 2100, 2110, "a");
            kernel(in, 900, 910, "d");
            kernel(in, 1200, 1210, "b");
            kernel(in, 3200, 3210, "b");
            kernel(in, 1300, 1310, "a");
            kernel(in, 2500, 2510, "c");
            in.end();
        }
        const auto e = Engine::open(f);
        QCOMPARE(e->frames().size(), size_t{3});
        const int64_t calls[] = {3, 2, 2}, names[] = {2, 2, 1}, fresh[] = {0, 1, 0};
        for (size_t i = 0; i < 3; ++i) {
            QCOMPARE(e->frames()[i].kernels, calls[i]);
            QCOMPARE(e->frames()[i].distinctKernels, names[i]);
            QCOMPARE(e->frames()[i].newKernelVariants, fresh[i]);
        }
    }

    void indexEqualsFullReplayOnLongRandomRun()
    {
        // 3 regions of 8 MiB, 90 000 first-fit operations with many equal timestamps: enough
        // events for several checkpoints. At 60 times, the checkpointed state equals the
        // brute-force replay, and allocated + free == reserved in every region.
        const auto f = path("random.fragscope");
        std::mt19937_64 rng(12345);
        const uint64_t regionSize = 8 * MiB;
        std::vector<std::map<uint64_t, uint64_t>> live(3);
        int64_t t = 0;
        {
            Ingest in(options(f));
            in.begin();
            for (int r = 0; r < 3; ++r)
                in.add(ev(EventType::RegionCreate, 0, kBase + static_cast<uint64_t>(r) * 16 * MiB,
                          regionSize));
            for (int op = 0; op < 90000; ++op) {
                t += static_cast<int64_t>(rng() % 3);
                const size_t r = rng() % 3;
                const uint64_t base = kBase + r * 16 * MiB;
                auto& m = live[r];
                if (!m.empty() && (rng() % 100 < 48 || m.size() > 60)) {
                    auto it = m.begin();
                    std::advance(it, static_cast<long>(rng() % m.size()));
                    in.add(ev(EventType::Free, t, it->first));
                    m.erase(it);
                    continue;
                }
                const uint64_t size = (1 + rng() % 2048) * 512;
                uint64_t pos = base;
                bool placed = false;
                for (auto it = m.begin();; ++it) {
                    const uint64_t gapEnd = it == m.end() ? base + regionSize : it->first;
                    if (gapEnd >= pos + size) {
                        placed = true;
                        break;
                    }
                    if (it == m.end()) break;
                    pos = it->first + it->second;
                }
                if (!placed) continue;
                in.add(ev(EventType::Alloc, t, pos, size));
                m[pos] = size;
            }
            in.add(
                ev(EventType::RegionDestroy, t + 1, kBase + 32 * MiB)); // with live blocks inside
            in.end();
        }
        const auto e = Engine::open(f);
        std::uniform_int_distribution<int64_t> pick(0, t + 2);
        for (int i = 0; i < 60; ++i) {
            const int64_t q = i == 0 ? t + 2 : pick(rng);
            const State a = e->stateAt(0, Level::Framework, q);
            const State b = e->stateAtFullReplay(0, Level::Framework, q);
            QString why;
            QVERIFY2(sameState(a, b, why), qPrintable(why));
            QCOMPARE(a.allocatedBytes + a.freeBytes, a.reservedBytes);
            if (i % 10 == 0) {
                std::map<int64_t, uint64_t> perRegion;
                for (const Fragment& fr : e->fragmentsAt(0, Level::Framework, q))
                    perRegion[fr.regionId] += fr.size;
                for (const AllocationInfo& al : e->liveAllocationsAt(0, Level::Framework, q))
                    if (al.regionId >= 0) perRegion[al.regionId] += al.size;
                for (const RegionInfo& ri : e->regions(0, Level::Framework))
                    if (ri.createNs <= q && ri.destroyNs > q) QCOMPARE(perRegion[ri.id], ri.size);
            }
        }
        // The timeline replays the same figures as point queries.
        TimelineOptions o;
        o.step = std::max<int64_t>(1, t / 50);
        const Timeline tl = e->timeline(o);
        for (size_t i = 0; i < tl.time.size(); i += 7) {
            const State s = e->stateAt(0, Level::Framework, tl.time[i]);
            QCOMPARE(tl.fragmentCount[i], static_cast<double>(s.fragmentCount));
            QCOMPARE(tl.largestFragment[i], static_cast<double>(s.largestFreeFragmentBytes));
        }
    }

    void simulatedRunProperties()
    {
        // A whole simulated video-diffusion run (the simulator of capture/sim): at 40 evenly
        // spaced times and at every frame end, the checkpointed state equals the brute-force
        // replay and allocated + free == reserved; per region at a few of them. The per-frame
        // reserved/allocated at frame end equal what the simulator itself recorded.
        const auto f = path("sim.fragscope");
        const sim::Stats st = simulate(f, 8, 6);
        const auto e = Engine::open(f);
        QVERIFY(e->caveats().synthetic);
        const auto tr = e->defaultTrack(0);
        QVERIFY(tr.has_value());
        QVERIFY(tr->allocations > 1000);
        std::vector<int64_t> times;
        for (int i = 0; i <= 40; ++i)
            times.push_back(e->timeBegin() + (e->timeEnd() - e->timeBegin()) * i / 40);
        for (const FrameInfo& fr : e->frames())
            times.push_back(fr.end);
        int k = 0;
        for (int64_t q : times) {
            const State a = e->stateAt(tr->device, tr->level, q);
            const State b = e->stateAtFullReplay(tr->device, tr->level, q);
            QString why;
            QVERIFY2(sameState(a, b, why), qPrintable(why));
            QCOMPARE(a.allocatedBytes + a.freeBytes, a.reservedBytes);
            if (k++ % 8 == 0) {
                std::map<int64_t, uint64_t> perRegion;
                for (const Fragment& fr : e->fragmentsAt(tr->device, tr->level, q))
                    perRegion[fr.regionId] += fr.size;
                for (const AllocationInfo& al : e->liveAllocationsAt(tr->device, tr->level, q))
                    if (al.regionId >= 0) perRegion[al.regionId] += al.size;
                for (const RegionInfo& ri : e->regions(tr->device, tr->level))
                    if (ri.createNs <= q && ri.destroyNs > q) QCOMPARE(perRegion[ri.id], ri.size);
            }
        }
        QCOMPARE(static_cast<int64_t>(e->frames().size()), st.frames);
        if (static_cast<int64_t>(st.perFrame.size()) == st.frames) {
            for (size_t i = 0; i < e->frames().size(); ++i) {
                const State& s = e->frames()[i].allocator.at(0).atEnd;
                QCOMPARE(s.reservedBytes, st.perFrame[i].reserved);
                QCOMPARE(s.allocatedBytes, st.perFrame[i].allocated);
            }
        }
    }

    void parallelOpenEqualsSerial()
    {
        // LoadOptions::parallelFrom = 1 splits every step that can be split over threads (the
        // allocation rows in two id ranges on two connections, the frames' kernel pass beside
        // the sort, the frames' replay in stretches, the timeline's replay); SIZE_MAX splits
        // none. A
        // simulated run (regions, frames, kernels) plus device 1's blocks outside any region
        // (a track only the rows create) must give the same figures either way. Device 1's
        // blocks come both after the run and ahead of it: the first id range then holds fewer
        // of device 0's rows than it has ids, and its part of device 0's records closes up
        // with the second's (readAllocations).
        const auto f = path("parallel.fragscope");
        auto device1 = [](int64_t t) {
            return [t](Ingest& in) {
                for (int i = 0; i < 64; ++i) {
                    Event a = ev(EventType::Alloc, t + i * 10, kBase + uint64_t(i) * MiB, 4 * KiB);
                    a.device = 1;
                    in.add(a);
                    if (i % 2) {
                        Event fr = ev(EventType::Free, t + i * 10 + 5, kBase + uint64_t(i) * MiB);
                        fr.device = 1;
                        in.add(fr);
                    }
                }
            };
        };
        simulate(f, 6, 4, device1(1'000'000'000'000), device1(1'000));
        auto open = [&](size_t parallelFrom) {
            LoadOptions o;
            o.useCache = false; // each open builds everything itself
            o.parallelFrom = parallelFrom;
            return Engine::open(f, o);
        };
        const auto serial = open(std::numeric_limits<size_t>::max());
        const auto split = open(1);
        const auto tracks = serial->tracks(), splitTracks = split->tracks();
        QCOMPARE(splitTracks.size(), tracks.size());
        QVERIFY(tracks.size() >= 2); // device 0's and device 1's
        for (size_t k = 0; k < tracks.size(); ++k) {
            const Track& a = tracks[k];
            const Track& b = splitTracks[k];
            QCOMPARE(b.device, a.device);
            QCOMPARE(b.level, a.level);
            QCOMPARE(b.allocations, a.allocations);
            TimelineOptions to;
            to.device = a.device;
            to.level = a.level;
            const Timeline x = serial->timeline(to), y = split->timeline(to);
            QCOMPARE(y.time, x.time);
            QCOMPARE(y.reserved, x.reserved);
            QCOMPARE(y.allocated, x.allocated);
            QCOMPARE(y.fragmentCount, x.fragmentCount);
            QCOMPARE(y.largestFragment, x.largestFragment);
            QCOMPARE(y.fragmentEntropy, x.fragmentEntropy);
            QCOMPARE(y.eventEntropy, x.eventEntropy);
            for (int i = 0; i <= 16; ++i) {
                const int64_t q =
                    serial->timeBegin() + (serial->timeEnd() - serial->timeBegin()) * i / 16;
                QString why;
                QVERIFY2(sameState(split->stateAt(a.device, a.level, q),
                                   serial->stateAt(a.device, a.level, q), why),
                         qPrintable(why));
            }
            HeatmapRequest rq;
            rq.device = a.device;
            rq.level = a.level;
            rq.width = 160;
            rq.height = 90;
            const HeatmapRaster hx = serial->heatmap(rq), hy = split->heatmap(rq);
            QCOMPARE(hy.allocationsInView, hx.allocationsInView);
            QVERIFY(hy.occupancy == hx.occupancy);
            QVERIFY(hy.state == hx.state);
        }
        QCOMPARE(split->frames().size(), serial->frames().size());
        QVERIFY(!serial->frames().empty());
        for (size_t i = 0; i < serial->frames().size(); ++i) {
            const FrameInfo& a = serial->frames()[i];
            const FrameInfo& b = split->frames()[i];
            QCOMPARE(b.kernels, a.kernels);
            QCOMPARE(b.distinctKernels, a.distinctKernels);
            QCOMPARE(b.newKernelVariants, a.newKernelVariants);
            QCOMPARE(b.allocator.size(), a.allocator.size());
            for (size_t k = 0; k < a.allocator.size(); ++k) {
                QString why;
                QVERIFY2(sameState(b.allocator[k].atEnd, a.allocator[k].atEnd, why),
                         qPrintable(why));
                QCOMPARE(b.allocator[k].allocs, a.allocator[k].allocs);
                QCOMPARE(b.allocator[k].frees, a.allocator[k].frees);
                QCOMPARE(b.allocator[k].minLargestFragment, a.allocator[k].minLargestFragment);
                QCOMPARE(b.allocator[k].maxRatio, a.allocator[k].maxRatio);
                QCOMPARE(b.allocator[k].maxFragmentCount, a.allocator[k].maxFragmentCount);
            }
        }
        QVERIFY(serial->frames().front().kernels > 0); // the kernel pass counted something
    }

    void frameCache()
    {
        // Per-frame figures are cached in the session file on the first open, used on the next,
        // and rebuilt (never trusted) once the frames they were computed from change.
        const auto f = path("cache.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            mark(in, 100, "frame 0");
            in.add(ev(EventType::Alloc, 150, kBase, 256 * KiB));
            mark(in, 200, "frame 1");
            in.add(ev(EventType::Alloc, 250, kBase + 512 * KiB, 256 * KiB));
            mark(in, 300, "end");
            in.end();
        }
        const auto a = Engine::open(f);
        QVERIFY(!a->loadInfo().frameCacheUsed);
        QVERIFY(a->loadInfo().frameCacheWritten);
        const auto b = Engine::open(f);
        QVERIFY(b->loadInfo().frameCacheUsed);
        QCOMPARE(b->frames().size(), a->frames().size());
        for (size_t i = 0; i < a->frames().size(); ++i) {
            const FrameAllocator& x = a->frames()[i].allocator.at(0);
            const FrameAllocator& y = b->frames()[i].allocator.at(0);
            QCOMPARE(y.atEnd.largestFreeFragmentBytes, x.atEnd.largestFreeFragmentBytes);
            QCOMPARE(y.atEnd.fragmentationRatio, x.atEnd.fragmentationRatio);
            QCOMPARE(y.minLargestFragment, x.minLargestFragment);
            QCOMPARE(y.allocs, x.allocs);
        }
        // Frame 1 ends at 300 (the session end), with A [0, 256K) and
        // B [512K, 768K) live -> fragments 256K and 256K, largest 256 KiB.
        QCOMPARE(b->frames()[1].allocator.at(0).atEnd.largestFreeFragmentBytes, 256 * KiB);
        {
            Db db(f, SQLITE_OPEN_READWRITE);
            db.exec("UPDATE frames SET end_ns = 240 WHERE idx = 1");
        }
        const auto c = Engine::open(f);
        QVERIFY(!c->loadInfo().frameCacheUsed);
        // Frame 1 now ends before B: fragments [256K, 1M) -> largest 768 KiB.
        QCOMPARE(c->frames()[1].allocator.at(0).atEnd.largestFreeFragmentBytes, 768 * KiB);
        QVERIFY(Engine::open(f)->loadInfo().frameCacheUsed);
    }

    void addressJumpsAndWindowHistogram()
    {
        // Frame 0 [100, 200): tagged "kv" at +0 and two untagged 4 KiB blocks at +64K, +68K.
        // Frame 1 [200, 300): "kv" at +512K (jump 512 KiB); the untagged ones at +64K (same
        // place: distance 0) and +128K (the second 4 KiB block moved 60 KiB).
        const auto f = path("jumps.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            mark(in, 100, "frame 0");
            Event kv = ev(EventType::Alloc, 110, kBase, 16 * KiB);
            kv.name = in.intern("kv");
            in.add(kv);
            in.add(ev(EventType::Alloc, 120, kBase + 64 * KiB, 4 * KiB));
            in.add(ev(EventType::Alloc, 130, kBase + 68 * KiB, 4 * KiB));
            in.add(ev(EventType::Free, 190, kBase));
            in.add(ev(EventType::Free, 191, kBase + 64 * KiB));
            in.add(ev(EventType::Free, 192, kBase + 68 * KiB));
            mark(in, 200, "frame 1");
            kv.time = 210;
            kv.address = kBase + 512 * KiB;
            in.add(kv);
            in.add(ev(EventType::Alloc, 220, kBase + 64 * KiB, 4 * KiB));
            in.add(ev(EventType::Alloc, 230, kBase + 128 * KiB, 4 * KiB));
            mark(in, 300, "end");
            in.end();
        }
        const auto e = Engine::open(f);
        const auto jumps = e->addressJumps(0, Level::Framework, 1);
        QCOMPARE(jumps.size(), size_t{3});
        std::map<std::string, uint64_t> byRole;
        for (const AddressJump& j : jumps)
            byRole[j.role] = j.distance;
        QCOMPARE(byRole.at("tag:kv#0"), 512 * KiB);
        QCOMPARE(byRole.at("size:4096#0"), uint64_t{0});
        QCOMPARE(byRole.at("size:4096#1"), 60 * KiB);
        // In the frame's time order (the roles are matched in role order: 210, 220, 230 here).
        QCOMPARE(jumps[0].role, std::string("tag:kv#0"));
        QCOMPARE(jumps[1].role, std::string("size:4096#0"));
        QCOMPARE(jumps[2].role, std::string("size:4096#1"));
        QVERIFY(e->addressJumps(0, Level::Framework, 0).empty()); // no previous frame

        // Window histogram over [0, 300] with 2 samples (t = 0 and t = 300): at 0 one 1 MiB
        // fragment; at 300 the blocks at +64K, +128K, +512K (+16K) cut the segment into
        // [0, 64K), [68K, 128K), [132K, 512K), [528K, 1M): bins 64K, 32K, 256K, 256K -> plus
        // the 1 MiB bin from t = 0.
        const Histogram h = e->histogramOver(0, Level::Framework, 0, 300, 2);
        int64_t total = 0;
        for (const HistogramBin& b : h.log2)
            total += b.count;
        QCOMPARE(total, int64_t{5});
        QCOMPARE(h.log2.back().lo, MiB);
        QCOMPARE(h.log2.back().count, int64_t{1});
    }

    void badFileIsASessionError()
    {
        const auto f = path("not-a-session.fragscope");
        {
            FILE* fp = std::fopen(f.c_str(), "wb");
            std::fputs("hello, this is not SQLite at all, just text padding it out to over a "
                       "hundred bytes "
                       "so the header check is what rejects it.\n",
                       fp);
            std::fclose(fp);
        }
        QVERIFY_THROWS_EXCEPTION(SessionError, Engine::open(f));
        std::atomic<bool> cancel{true};
        LoadOptions lo;
        lo.cancel = &cancel;
        QVERIFY_THROWS_EXCEPTION(Cancelled, Engine::open(knownSession(), lo));
    }
};

QTEST_GUILESS_MAIN(TstAnalysisEngine)
#include "tst_analysis_engine.moc"
