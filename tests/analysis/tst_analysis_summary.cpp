// Engine::trackSummary (core/analysis/summary.h): known answers worked out by hand, every figure
// against the state at every instant (Engine::stateAt, poolStatesAt) on a random workload with
// pools, ties and blocks outside any region, and a split replay equal to a serial one to the bit.
#include "builder.h"
#include "core/analysis/engine.h"
#include "core/store/debug_query.h"
#include "core/store/session.h"

#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

// Figures worked out from the state at every instant with the definitions of docs/analysis.md
// "Summary", the slow way.
SummaryFigures bruteForce(const std::vector<int64_t>& instants, int64_t end,
                          const std::function<State(int64_t)>& stateAt)
{
    SummaryFigures f;
    long double weighted = 0, plain = 0;
    for (size_t i = 0; i < instants.size(); ++i) {
        const int64_t t = instants[i];
        const State s = stateAt(t);
        const int64_t until = i + 1 < instants.size() ? instants[i + 1] : std::max(end, t);
        ++f.instants;
        f.finalReservedBytes = s.reservedBytes;
        if (s.allocatedOutsideBytes > f.peakAllocatedOutsideBytes) {
            f.peakAllocatedOutsideBytes = s.allocatedOutsideBytes;
            f.peakAllocatedOutsideAtNs = t;
        }
        if (s.reservedBytes == 0) continue;
        const bool first = f.countedInstants++ == 0;
        f.reservedNs += until - t;
        weighted += static_cast<long double>(s.fragmentationRatio) * (until - t);
        plain += s.fragmentationRatio;
        auto more = [&](auto& v, int64_t& at, auto nv) {
            if (first || nv > v) {
                v = nv;
                at = t;
            }
        };
        more(f.peakReservedBytes, f.peakReservedAtNs, s.reservedBytes);
        more(f.peakAllocatedBytes, f.peakAllocatedAtNs, s.allocatedBytes);
        more(f.maxFragmentationRatio, f.maxFragmentationRatioAtNs, s.fragmentationRatio);
        more(f.maxFragmentCount, f.maxFragmentCountAtNs, s.fragmentCount);
        if (first || s.largestFreeFragmentBytes < f.minLargestFreeBytes) {
            f.minLargestFreeBytes = s.largestFreeFragmentBytes;
            f.minLargestFreeAtNs = t;
        }
    }
    if (f.reservedNs > 0)
        f.meanFragmentationRatio = static_cast<double>(weighted / f.reservedNs);
    else if (f.countedInstants > 0)
        f.meanFragmentationRatio = static_cast<double>(plain / f.countedInstants);
    return f;
}

void compareFigures(const SummaryFigures& got, const SummaryFigures& want, const char* what)
{
    const QByteArray w(what);
    auto eq = [&](auto a, auto b, const char* name) {
        if (a != b)
            QFAIL(qPrintable(w + " " + name + ": " + QByteArray::number(double(a), 'g', 17) +
                             " vs " + QByteArray::number(double(b), 'g', 17)));
    };
    eq(got.peakReservedBytes, want.peakReservedBytes, "peak reserved");
    eq(got.peakReservedAtNs, want.peakReservedAtNs, "peak reserved at");
    eq(got.peakAllocatedBytes, want.peakAllocatedBytes, "peak allocated");
    eq(got.peakAllocatedAtNs, want.peakAllocatedAtNs, "peak allocated at");
    eq(got.peakAllocatedOutsideBytes, want.peakAllocatedOutsideBytes, "peak outside");
    eq(got.peakAllocatedOutsideAtNs, want.peakAllocatedOutsideAtNs, "peak outside at");
    eq(got.maxFragmentationRatio, want.maxFragmentationRatio, "max F");
    eq(got.maxFragmentationRatioAtNs, want.maxFragmentationRatioAtNs, "max F at");
    eq(got.minLargestFreeBytes, want.minLargestFreeBytes, "min largest free");
    eq(got.minLargestFreeAtNs, want.minLargestFreeAtNs, "min largest free at");
    eq(got.maxFragmentCount, want.maxFragmentCount, "max fragments");
    eq(got.maxFragmentCountAtNs, want.maxFragmentCountAtNs, "max fragments at");
    eq(got.finalReservedBytes, want.finalReservedBytes, "final reserved");
    eq(got.instants, want.instants, "instants");
    eq(got.countedInstants, want.countedInstants, "counted instants");
    eq(got.reservedNs, want.reservedNs, "reserved ns");
    if (std::fabs(got.meanFragmentationRatio - want.meanFragmentationRatio) > 1e-12)
        QFAIL(qPrintable(w + " mean F: " + QByteArray::number(got.meanFragmentationRatio, 'g', 17) +
                         " vs " + QByteArray::number(want.meanFragmentationRatio, 'g', 17)));
}

bool identical(const SummaryFigures& a, const SummaryFigures& b)
{
    return a.peakReservedBytes == b.peakReservedBytes && a.peakReservedAtNs == b.peakReservedAtNs &&
           a.peakAllocatedBytes == b.peakAllocatedBytes &&
           a.peakAllocatedAtNs == b.peakAllocatedAtNs &&
           a.peakAllocatedOutsideBytes == b.peakAllocatedOutsideBytes &&
           a.meanFragmentationRatio == b.meanFragmentationRatio &&
           a.maxFragmentationRatio == b.maxFragmentationRatio &&
           a.maxFragmentationRatioAtNs == b.maxFragmentationRatioAtNs &&
           a.minLargestFreeBytes == b.minLargestFreeBytes &&
           a.minLargestFreeAtNs == b.minLargestFreeAtNs &&
           a.maxFragmentCount == b.maxFragmentCount &&
           a.maxFragmentCountAtNs == b.maxFragmentCountAtNs &&
           a.finalReservedBytes == b.finalReservedBytes && a.instants == b.instants &&
           a.countedInstants == b.countedInstants && a.reservedNs == b.reservedNs;
}

} // namespace

class TstAnalysisSummary : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    std::string path(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }

    // A first-fit workload over three regions, two of them in the default pool and one in
    // private pool (1, 2) (or all in the default pool), a region released while blocks are live
    // in it (they count outside from then on), blocks outside any region, and several events at
    // one instant. Returns the distinct event times.
    // frameEvery > 0: a frame starts every frameEvery steps.
    std::vector<int64_t> randomSession(const std::string& f, unsigned seed, bool privatePool,
                                       int steps, int frameEvery = 0)
    {
        Ingest in(options(f));
        in.begin();
        std::set<int64_t> times;
        struct Reg
        {
            uint64_t base, size;
            bool alive;
            std::map<uint64_t, uint64_t> blocks; // address -> size
        };
        std::vector<Reg> regs = {{kBase, 4 * MiB, false, {}},
                                 {kBase + 64 * MiB, 2 * MiB, false, {}},
                                 {kBase + 128 * MiB, 3 * MiB, false, {}}};
        auto create = [&](size_t r, int64_t t) {
            Event e = ev(EventType::RegionCreate, t, regs[r].base, regs[r].size);
            e.aux = privatePool && r == 1 ? (uint64_t{1} << 32 | 2) : 0;
            in.add(e);
            regs[r].alive = true;
            times.insert(t);
        };
        create(0, 0);
        create(1, 0);
        std::mt19937 rng(seed);
        int64_t t = 0;
        std::vector<uint64_t> outside;
        for (int i = 0; i < steps; ++i) {
            t += static_cast<int64_t>(rng() % 4); // 0: same instant as the previous event
            if (i == steps / 3) create(2, t);
            if (frameEvery > 0 && i % frameEvery == 0 && i > 0)
                mark(in, t, "frame " + std::to_string(i / frameEvery));
            if (i == 2 * steps / 3 && regs[2].alive) {
                in.add(ev(EventType::RegionDestroy, t, regs[2].base));
                regs[2].alive = false; // its live blocks stay live, outside any region
                times.insert(t);
                continue;
            }
            const unsigned what = rng() % 10;
            if (what == 0) { // a block outside any region
                const uint64_t a = kBase + 512 * MiB + outside.size() * MiB;
                in.add(ev(EventType::Alloc, t, a, 64 * KiB));
                outside.push_back(a);
                times.insert(t);
                continue;
            }
            const size_t r = rng() % regs.size();
            Reg& R = regs[r];
            if (!R.alive) continue;
            if (what < 5 && !R.blocks.empty()) { // free a random block
                auto it = R.blocks.begin();
                std::advance(it, static_cast<long>(rng() % R.blocks.size()));
                in.add(ev(EventType::Free, t, it->first));
                R.blocks.erase(it);
                times.insert(t);
                continue;
            }
            const uint64_t size = (1 + rng() % 128) * 4 * KiB;
            uint64_t pos = R.base; // first fit
            for (const auto& [a, s] : R.blocks) {
                if (a - pos >= size) break;
                pos = a + s;
            }
            if (pos + size > R.base + R.size) continue;
            in.add(ev(EventType::Alloc, t, pos, size));
            R.blocks[pos] = size;
            times.insert(t);
        }
        mark(in, t + 25, "end"); // the session ends after the track's last event
        in.end();
        return {times.begin(), times.end()};
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void knownAnswers()
    {
        // builder.h's known session: one 1 MiB segment at 0: A [0, 256K) at 10, B [256K, 512K)
        // at 20, C [512K, 896K) at 30, B freed at 40, D (4 KiB) outside any region at 50; the
        // session ends at 100. States: 0..10 F 0 (one 1 MiB fragment); 10..20 largest 768K; 20..30
        // 512K; 30..40 128K (F 0); 40..50 and 50..100 fragments 256K + 128K, F = 1 - 256/384 = 1/3.
        // Mean F = (1/3 * 10 + 1/3 * 50) / 100 = 0.2 exactly (time-weighted, 100 ns reserved).
        const auto f = path("known.fragscope");
        writeKnownSession(f);
        const auto e = Engine::open(f);
        QCOMPARE(e->timeEnd(), int64_t{100});
        const TrackSummary s = e->trackSummary(0, Level::Framework);
        QCOMPARE(s.track.allocations, int64_t{4});
        QVERIFY(s.pools.empty()); // one pool: nothing to split
        const SummaryFigures& g = s.figures;
        QCOMPARE(g.peakReservedBytes, 1 * MiB);
        QCOMPARE(g.peakReservedAtNs, int64_t{0});
        QCOMPARE(g.peakAllocatedBytes, 896 * KiB); // A + B + C at 30
        QCOMPARE(g.peakAllocatedAtNs, int64_t{30});
        QCOMPARE(g.peakAllocatedOutsideBytes, 4 * KiB);
        QCOMPARE(g.peakAllocatedOutsideAtNs, int64_t{50});
        QCOMPARE(g.meanFragmentationRatio, 0.2);
        QCOMPARE(g.maxFragmentationRatio, 1.0 - 256.0 / 384.0);
        QCOMPARE(g.maxFragmentationRatioAtNs, int64_t{40});
        QCOMPARE(g.minLargestFreeBytes, 128 * KiB);
        QCOMPARE(g.minLargestFreeAtNs, int64_t{30});
        QCOMPARE(g.maxFragmentCount, int64_t{2});
        QCOMPARE(g.maxFragmentCountAtNs, int64_t{40});
        QCOMPARE(g.finalReservedBytes, 1 * MiB);
        QCOMPARE(g.instants, int64_t{6});
        QCOMPARE(g.countedInstants, int64_t{6});
        QCOMPARE(g.reservedNs, int64_t{100});

        // A track without data: zeros, no times.
        const TrackSummary none = e->trackSummary(3, Level::Driver);
        QCOMPARE(none.figures.instants, int64_t{0});
        QCOMPARE(none.figures.peakReservedAtNs, kNoTime);
        QCOMPARE(none.figures.meanFragmentationRatio, 0.0);
    }

    void onlyAnInstant()
    {
        // Everything happens at the session's last instant (t = 5): no counting state lasts any
        // time, so the mean is that of the counting instants: one, F = 1 - 2/3 = 1/3 (fragments
        // 1 MiB and 2 MiB around a 1 MiB block in a 4 MiB segment).
        const auto f = path("instant.fragscope");
        {
            Ingest in(options(f));
            in.begin();
            in.add(ev(EventType::RegionCreate, 5, kBase, 4 * MiB));
            in.add(ev(EventType::Alloc, 5, kBase + 1 * MiB, 1 * MiB));
            in.end();
        }
        const auto e = Engine::open(f);
        const SummaryFigures g = e->trackSummary(0, Level::Framework).figures;
        QCOMPARE(g.reservedNs, int64_t{0});
        QCOMPARE(g.countedInstants, int64_t{1});
        QCOMPARE(g.meanFragmentationRatio, 1.0 - 2.0 / 3.0);
        QCOMPARE(g.maxFragmentationRatio, 1.0 - 2.0 / 3.0);
        QCOMPARE(g.minLargestFreeBytes, 2 * MiB);
    }

    void everyInstant_data()
    {
        QTest::addColumn<unsigned>("seed");
        QTest::addColumn<bool>("privatePool");
        QTest::newRow("pools, seed 1") << 1u << true;
        QTest::newRow("pools, seed 2") << 2u << true;
        QTest::newRow("one pool, seed 3") << 3u << false;
    }

    void everyInstant()
    {
        QFETCH(unsigned, seed);
        QFETCH(bool, privatePool);
        const auto f = path(qPrintable(QString("random-%1.fragscope").arg(seed)));
        const std::vector<int64_t> times = randomSession(f, seed, privatePool, 400);
        const auto e = Engine::open(f);
        const TrackSummary s = e->trackSummary(0, Level::Framework);
        compareFigures(s.figures,
                       bruteForce(times, e->timeEnd(),
                                  [&](int64_t t) { return e->stateAt(0, Level::Framework, t); }),
                       "track");
        QVERIFY(s.figures.peakAllocatedOutsideBytes > 0);
        if (!privatePool) {
            QVERIFY(s.pools.empty());
            return;
        }
        // Default pool 0 and private pool (1, 2), each against poolStatesAt at every instant.
        QCOMPARE(s.pools.size(), size_t{2});
        QCOMPARE(s.pools[0].pool, uint64_t{0});
        QCOMPARE(s.pools[1].pool, uint64_t{1} << 32 | 2);
        for (const PoolSummary& p : s.pools) {
            const SummaryFigures want = bruteForce(times, e->timeEnd(), [&](int64_t t) {
                for (const PoolState& ps : e->poolStatesAt(0, Level::Framework, t))
                    if (ps.pool == p.pool) return ps.state;
                return State{};
            });
            compareFigures(p.figures, want,
                           qPrintable(QString::fromStdString(poolLabel(p.pool, Level::Framework))));
        }
        // The pools add up to the track at every instant, so their reserved time covers it.
        QVERIFY(s.pools[0].figures.peakReservedBytes + s.pools[1].figures.peakReservedBytes >=
                s.figures.peakReservedBytes);
    }

    void splitEqualsSerial()
    {
        // LoadOptions::parallelFrom = 1 splits the replay into chunks at allocation times; the
        // figures, the mean of F included, are the same to the bit (fixed-point sum).
        const auto f = path("split.fragscope");
        randomSession(f, 9, false, 3000);
        auto open = [&](size_t parallelFrom) {
            LoadOptions o;
            o.useCache = false;
            o.parallelFrom = parallelFrom;
            return Engine::open(f, o);
        };
        const SummaryFigures serial =
            open(std::numeric_limits<size_t>::max())->trackSummary(0, Level::Framework).figures;
        const SummaryFigures split = open(1)->trackSummary(0, Level::Framework).figures;
        QVERIFY(serial.instants > 1000);
        QVERIFY(identical(serial, split));
    }

    void takenWithTheFrames()
    {
        // A first open replays every frame forward for the per-frame figures, and takes the
        // summary on the way (a track of one pool): it is stored before anyone asks for it, and
        // equals the figures from the state at every instant, and a separate replay's to the bit.
        // The session has events before its first frame and after its last.
        const auto f = path("frames.fragscope");
        const std::vector<int64_t> times = randomSession(f, 5, false, 3000, 100);
        const auto e = Engine::open(f);
        QVERIFY(e->frames().size() > 20);
        QVERIFY(e->frames().front().start > times.front());
        const auto stored = [&] {
            return store::debugQuery(Session::open(f))
                .scalar("SELECT count(*) FROM analysis_cache WHERE key LIKE 'summary:%'");
        };
        QCOMPARE(stored(), int64_t{1});
        const SummaryFigures pass = e->trackSummary(0, Level::Framework).figures;
        QVERIFY(pass.instants > 1000);
        compareFigures(pass,
                       bruteForce(times, e->timeEnd(),
                                  [&](int64_t t) { return e->stateAt(0, Level::Framework, t); }),
                       "pass");
        {
            Db db(f, SQLITE_OPEN_READWRITE); // a reopen then finds the frames but no summary
            db.exec("DELETE FROM analysis_cache WHERE key LIKE 'summary:%'");
        }
        const auto reopened = Engine::open(f);
        QCOMPARE(stored(), int64_t{0});
        QVERIFY(identical(pass, reopened->trackSummary(0, Level::Framework).figures));
        QCOMPARE(stored(), int64_t{1}); // replayed on demand, and stored

        // With private pools the summary splits by pool: no pass, the figures come on demand.
        const auto g = path("frames-pools.fragscope");
        randomSession(g, 6, true, 1000, 100);
        const auto p = Engine::open(g);
        QCOMPARE(store::debugQuery(Session::open(g))
                     .scalar("SELECT count(*) FROM analysis_cache WHERE key LIKE 'summary:%'"),
                 int64_t{0});
        QCOMPARE(p->trackSummary(0, Level::Framework).pools.size(), size_t{2});
    }

    void takenWithTheFramesInStretches()
    {
        // LoadOptions::parallelFrom = 1 splits the frames' replay at frame starts into
        // stretches, each replayed from the checkpoint before it on a thread of its own, and
        // joins their summary passes (SummaryPass::append: the instant before a seam is weighed
        // until the first instant after it). The stored summary must equal an unsplit open's
        // to the bit, and the per-frame figures field by field. Events before the first frame
        // and after the last, as above.
        if (std::thread::hardware_concurrency() < 2) QSKIP("one core: the replay is not split");
        const auto f = path("stretches.fragscope");
        randomSession(f, 11, false, 4000, 100);
        auto open = [&](size_t parallelFrom, const char* copy) {
            const std::string g = path(copy); // each open computes and stores in its own file
            std::filesystem::copy_file(f, g, std::filesystem::copy_options::overwrite_existing);
            LoadOptions o;
            o.parallelFrom = parallelFrom;
            o.storeIndexAtOpen = false; // else the index is stored beside, on the second core
            return Engine::open(g, o);
        };
        const auto serial = open(std::numeric_limits<size_t>::max(), "stretches-serial.fragscope");
        const auto split = open(1, "stretches-split.fragscope");
        const SummaryFigures a = serial->trackSummary(0, Level::Framework).figures;
        const SummaryFigures b = split->trackSummary(0, Level::Framework).figures;
        QVERIFY(a.instants > 1000);
        QVERIFY(identical(a, b));
        QCOMPARE(split->frames().size(), serial->frames().size());
        QVERIFY(serial->frames().size() > 20);
        for (size_t i = 0; i < serial->frames().size(); ++i) {
            const auto& x = serial->frames()[i].allocator;
            const auto& y = split->frames()[i].allocator;
            QCOMPARE(y.size(), x.size());
            for (size_t k = 0; k < x.size(); ++k) {
                QCOMPARE(y[k].allocs, x[k].allocs);
                QCOMPARE(y[k].frees, x[k].frees);
                QCOMPARE(y[k].allocBytes, x[k].allocBytes);
                QCOMPARE(y[k].minLargestFragment, x[k].minLargestFragment);
                QCOMPARE(y[k].maxLargestFragment, x[k].maxLargestFragment);
                QCOMPARE(y[k].minRatio, x[k].minRatio);
                QCOMPARE(y[k].maxRatio, x[k].maxRatio);
                QCOMPARE(y[k].minFragmentCount, x[k].minFragmentCount);
                QCOMPARE(y[k].maxFragmentCount, x[k].maxFragmentCount);
                QCOMPARE(y[k].atEnd.largestFreeFragmentBytes, x[k].atEnd.largestFreeFragmentBytes);
                QCOMPARE(y[k].atEnd.fragmentCount, x[k].atEnd.fragmentCount);
                QCOMPARE(y[k].atEnd.fragmentEntropyBits, x[k].atEnd.fragmentEntropyBits);
                QCOMPARE(y[k].atEnd.allocatedBytes, x[k].atEnd.allocatedBytes);
            }
        }
    }

    void delta()
    {
        // B - A, field by field; signed for byte figures.
        SummaryFigures a, b;
        a.peakReservedBytes = 10;
        b.peakReservedBytes = 4;
        a.meanFragmentationRatio = 0.25;
        b.meanFragmentationRatio = 0.5;
        a.maxFragmentCount = 3;
        b.maxFragmentCount = 7;
        const SummaryDelta d = summaryDelta(a, b);
        QCOMPARE(d.peakReservedBytes, int64_t{-6});
        QCOMPARE(d.meanFragmentationRatio, 0.25);
        QCOMPARE(d.maxFragmentCount, int64_t{4});
    }
};

QTEST_GUILESS_MAIN(TstAnalysisSummary)
#include "tst_analysis_summary.moc"
