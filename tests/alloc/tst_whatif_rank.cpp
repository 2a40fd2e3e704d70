// The what-if ranking (core/alloc/whatif_rank.cpp, docs/whatif.md "Ranking and the default
// alternatives"): which alternatives a plain `fragscope whatif` tries, worked out by hand from a
// request-size distribution; the order of the runs; the one-sentence recommendation; the
// one-line fidelity statement, which never calls a partial trace reproduced.
#include "core/alloc/whatif_rank.h"

#include <QTest>

using namespace fs;
using namespace fs::alloc;

namespace {
constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;

// One device whose allocations request these sizes (a free in between, which must not count).
Trace traceOf(const std::vector<uint64_t>& sizes)
{
    DeviceTrace d;
    for (uint64_t s : sizes) {
        Request r;
        r.kind = Request::Alloc;
        r.size = s;
        d.requests.push_back(r);
        Request f;
        f.kind = Request::Free;
        f.size = 999 * MiB;
        d.requests.push_back(f);
    }
    Trace t;
    t.devices.push_back(d);
    return t;
}

RankedRun row(const char* label, int64_t ooms, uint64_t peak, bool recorded = false,
              Policy policy = Policy::PyTorch)
{
    RankedRun r;
    r.label = label;
    r.allocConf = recorded ? "PyTorch defaults" : label;
    r.recorded = recorded;
    r.ooms = ooms;
    r.peakReserved = peak;
    r.policy = policy;
    return r;
}

QStringList labels(const std::vector<Alternative>& v)
{
    QStringList out;
    for (const Alternative& a : v)
        out << QString::fromStdString(a.spec.label);
    return out;
}
} // namespace

class TstWhatIfRank : public QObject
{
    Q_OBJECT
private slots:
    void alternativesFollowTheRequestSizes()
    {
        // Requests: 512 KiB (small pool: not counted), 3, 5, 40, 40, 70 and 200 MiB. The six over
        // 1 MiB, in order: 3, 5, 40, 40, 70, 200. Median (nearest rank ceil(0.5 * 6) = 3rd): 40 MiB
        // -> the next power of two MiB at least 32: 64. 90th percentile (ceil(0.9 * 6) = 6th):
        // 200 MiB -> 256, above the largest segment the run makes (200 MiB rounded up to 2 MiB:
        // 200 MiB), so it is skipped. No capacity: the GC threshold is skipped too.
        const Trace t =
            traceOf({512 * 1024, 3 * MiB, 5 * MiB, 40 * MiB, 40 * MiB, 70 * MiB, 200 * MiB});
        const AlternativeSet a = defaultAlternatives(t, false);
        QCOMPARE(labels(a.tried),
                 (QStringList{"expandable_segments:True", "roundup_power2_divisions:4",
                              "max_split_size_mb:64"}));
        QCOMPARE(a.tried[2].spec.config.maxSplitSize, 64 * MiB);
        QVERIFY(QString::fromStdString(a.tried[2].why).contains("median of the 6 requests"));
        QVERIFY(a.tried[0].spec.config.expandableSegments);
        QCOMPARE(a.tried[1].spec.config.divisionsFor(100 * MiB), 4u);
        QCOMPARE(a.skipped.size(), size_t(2));
        QCOMPARE(a.skipped[0].label, std::string("max_split_size_mb:256"));
        QVERIFY(QString::fromStdString(a.skipped[0].reason).contains("above every segment"));
        QCOMPARE(a.skipped[1].label, std::string("garbage_collection_threshold:0.6"));
        // With a capacity the GC threshold is tried.
        const AlternativeSet c = defaultAlternatives(t, true);
        QCOMPARE(c.tried.size(), size_t(4));
        QCOMPARE(c.tried[3].spec.config.gcThreshold, 0.6);
        QCOMPARE(c.skipped.size(), size_t(1));
    }

    void alternativesChangeOneSettingOfTheRecordedOnes()
    {
        // 30 MiB requests only: median and 90th percentile both 30 MiB -> 32 (tried once); the
        // largest segment is 30 MiB, under 32, so it is skipped as changing nothing.
        Trace t = traceOf({30 * MiB, 30 * MiB});
        t.recorded.expandableSegments = true;
        const AlternativeSet a = defaultAlternatives(t, false);
        QCOMPARE(labels(a.tried), QStringList{"roundup_power2_divisions:4"});
        QVERIFY(a.tried[0].spec.config.expandableSegments); // the recorded setting stays
        QCOMPARE(a.skipped.size(), size_t(3));
        QCOMPARE(a.skipped[0].label, std::string("expandable_segments:True"));
        QCOMPARE(a.skipped[0].reason, std::string("already the recorded setting"));
        QCOMPARE(a.skipped[1].label, std::string("max_split_size_mb:32"));
        // 34 MiB and 100 MiB: median (1st) 34 MiB -> 64, 90th (2nd) 100 MiB -> 128; the largest
        // segment is 100 MiB, so only 64 is tried.
        const AlternativeSet b = defaultAlternatives(traceOf({34 * MiB, 100 * MiB}), false);
        QCOMPARE(labels(b.tried).last(), QString("max_split_size_mb:64"));
        QCOMPARE(b.skipped[0].label, std::string("max_split_size_mb:128"));
        // Nothing over 1 MiB: max_split_size_mb would change nothing.
        const AlternativeSet small = defaultAlternatives(traceOf({4096, MiB}), false);
        QCOMPARE(small.tried.size(), size_t(2));
        QCOMPARE(small.skipped[0].label, std::string("max_split_size_mb"));
    }

    void rankedBestFirstAndRecommended()
    {
        WhatIfResult r;
        r.ranking = {row("recorded", 0, 10 * GiB, true),
                     row("expandable_segments:True", 0, 4 * GiB),
                     row("max_split_size_mb:64", 2, 3 * GiB),
                     row("tiered", 0, 2 * GiB, false, Policy::Tiered)};
        rankRuns(r.ranking);
        // Fewest OOMs first, then lowest peak: tiered (0, 2), expandable (0, 4), recorded (0, 10),
        // max_split (2 OOMs, 3). Each minus the recorded peak of 10 GiB.
        QCOMPARE(r.ranking[0].label, std::string("tiered"));
        QCOMPARE(r.ranking[1].label, std::string("expandable_segments:True"));
        QVERIFY(r.ranking[2].recorded);
        QCOMPARE(r.ranking[3].label, std::string("max_split_size_mb:64"));
        QCOMPARE(r.ranking[0].vsRecordedPeak, -int64_t(8 * GiB));
        QCOMPARE(r.ranking[3].vsRecordedPeak, -int64_t(7 * GiB));
        QCOMPARE(r.ranking[2].vsRecordedPeak, int64_t(0));
        // The experimental policy is ranked, never recommended.
        recommend(r);
        QCOMPARE(r.recommended, 1);
        QCOMPARE(r.recommendation,
                 std::string("With expandable_segments:True the peak reserved would have been "
                             "4.00 GiB instead of 10.00 GiB (model figures)."));
    }

    void fewerOomsComeFirst()
    {
        // 40 OOMs recorded; the alternative has none but a higher peak: it still ranks first.
        WhatIfResult r;
        r.ranking = {row("recorded", 40, 37 * GiB, true),
                     row("expandable_segments:True", 0, 38 * GiB)};
        rankRuns(r.ranking);
        recommend(r);
        QCOMPARE(r.recommended, 0);
        QCOMPARE(r.recommendation,
                 std::string("With expandable_segments:True there would have been no OOMs instead "
                             "of 40, and the peak reserved would have been 38.00 GiB instead of "
                             "37.00 GiB (model figures)."));
        QCOMPARE(r.ranking[0].vsRecordedPeak, int64_t(GiB));
    }

    void nothingBetter()
    {
        // A tie keeps the recorded settings first: nothing is recommended.
        WhatIfResult r;
        r.ranking = {row("recorded", 1, GiB, true), row("roundup_power2_divisions:4", 1, GiB),
                     row("expandable_segments:True", 1, 2 * GiB)};
        rankRuns(r.ranking);
        recommend(r);
        QCOMPARE(r.recommended, -1);
        QVERIFY(r.ranking[0].recorded);
        QCOMPARE(r.recommendation,
                 std::string("None of the 2 alternatives tried does better than the recorded "
                             "settings (PyTorch defaults), with a peak reserved of 1.00 GiB and 1 "
                             "OOM (model figures)."));
    }

    void fidelityIsOneStatement()
    {
        Fidelity f;
        f.complete = true;
        f.reproduced = true;
        QVERIFY(QString::fromStdString(fidelitySummary(f)).startsWith("exact: "));
        // A partial trace whose traced part the replay matches is still not "reproduced": the
        // one statement is that it is partial (issue 50: the GUI said both).
        f.complete = false;
        f.completeNote = "3 blocks were allocated before the trace's first entry";
        const QString partial = QString::fromStdString(fidelitySummary(f));
        QVERIFY(partial.startsWith("partial trace"));
        QVERIFY(partial.contains("3 blocks were allocated before"));
        QVERIFY(!partial.contains("reproduce"));
        // Not exact: by how much (the largest reserved difference of any device, 16 MiB; 7 + 1
        // segment events differ).
        f.complete = true;
        f.reproduced = false;
        DeviceFidelity d0, d1;
        d0.time.maxReservedDiff = 16 * MiB;
        d0.time.timeDiffers = 7;
        d1.time.maxReservedDiff = 4 * MiB;
        d1.time.timeDiffers = 1;
        f.devices = {d0, d1};
        QCOMPARE(fidelitySummary(f),
                 std::string("not exact: under the recorded settings the model's reserved bytes "
                             "are up to 16.00 MiB off the real run (8 segment events differ); "
                             "differences that small may be the model's error"));
        // Short: one line, far under the old 90-word sentence.
        QVERIFY(fidelitySummary(f).size() < 200);
    }
};

QTEST_GUILESS_MAIN(TstWhatIfRank)
#include "tst_whatif_rank.moc"
