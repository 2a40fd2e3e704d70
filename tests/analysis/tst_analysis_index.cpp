// The engine's index kept in the session file (analysis_cache): a reopen uses it and replays
// nothing; content changed behind it (same row counts) is detected and the index rebuilt; a
// malformed stored index is ignored, never trusted.
#include "builder.h"

#include "core/analysis/engine.h"
#include "core/sqlite.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

// One 64 MiB segment; 3000 blocks of 64-448 KiB churned over 3000 us, a third of them kept to
// the end (enough events for several checkpoints), frames every 500 us.
void makeSession(const std::string& path)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, 64 * MiB));
    uint32_t lcg = 5;
    std::vector<uint64_t> live;
    for (int i = 0; i < 3000; ++i) {
        const int64_t t = 1000 + 1000 * int64_t(i);
        if (i % 500 == 0) mark(in, t, "frame " + std::to_string(i / 500));
        lcg = lcg * 1664525u + 1013904223u;
        const uint64_t slot = (lcg >> 8) % 128;
        const uint64_t addr = kBase + slot * 512 * KiB;
        const bool taken = std::find(live.begin(), live.end(), addr) != live.end();
        if (taken) {
            in.add(ev(EventType::Free, t, addr));
            live.erase(std::find(live.begin(), live.end(), addr));
        } else {
            in.add(ev(EventType::Alloc, t, addr, (64 + 64 * ((lcg >> 20) % 7)) * KiB));
            live.push_back(addr);
        }
    }
    in.end();
}

void sameFigures(const Engine& a, const Engine& b)
{
    for (int64_t t = a.timeBegin(); t <= a.timeEnd(); t += (a.timeEnd() - a.timeBegin()) / 97) {
        const State x = a.stateAt(0, Level::Framework, t);
        const State y = b.stateAt(0, Level::Framework, t);
        QCOMPARE(x.fragmentCount, y.fragmentCount);
        QCOMPARE(x.largestFreeFragmentBytes, y.largestFreeFragmentBytes);
        QCOMPARE(x.allocatedBytes, y.allocatedBytes);
        QCOMPARE(x.fragmentEntropyBits, y.fragmentEntropyBits);
    }
}

// Every figure against the from-scratch replay (no checkpoint, no stored index).
void exact(const Engine& e)
{
    for (int64_t t = e.timeBegin(); t <= e.timeEnd(); t += (e.timeEnd() - e.timeBegin()) / 89) {
        const State x = e.stateAt(0, Level::Framework, t);
        const State y = e.stateAtFullReplay(0, Level::Framework, t);
        QCOMPARE(x.fragmentCount, y.fragmentCount);
        QCOMPARE(x.largestFreeFragmentBytes, y.largestFreeFragmentBytes);
        QCOMPARE(x.allocatedBytes, y.allocatedBytes);
        QCOMPARE(x.freeBytes, y.freeBytes);
    }
}

} // namespace

class TstAnalysisIndex : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;

private slots:
    void reopenUsesStoredIndex()
    {
        const std::string path = dir_.filePath("idx.fragscope").toStdString();
        makeSession(path);
        const auto first = Engine::open(path);
        QVERIFY(!first->loadInfo().indexCacheUsed);
        QVERIFY(first->loadInfo().indexCacheWritten);
        TimelineOptions o;
        o.step = (first->timeEnd() - first->timeBegin()) / 300;
        const Timeline computed = first->timeline(o);
        QCOMPARE(first->loadInfo().timelinesFromCache, int64_t(0));
        exact(*first);

        const auto again = Engine::open(path);
        QVERIFY(again->loadInfo().indexCacheUsed);
        QVERIFY(!again->loadInfo().indexCacheWritten);
        QVERIFY(again->loadInfo().frameCacheUsed);
        sameFigures(*first, *again);
        exact(*again);
        // The whole-session timeline comes back stored, value for value.
        const Timeline stored = again->timeline(o);
        QCOMPARE(again->loadInfo().timelinesFromCache, int64_t(1));
        QVERIFY(stored.time == computed.time);
        QVERIFY(stored.fragmentCount == computed.fragmentCount);
        QVERIFY(stored.fragmentEntropy == computed.fragmentEntropy);
        QVERIFY(stored.eventEntropy == computed.eventEntropy);
        QCOMPARE(stored.step, computed.step);
    }

    void kernelFirstStartsAreKept()
    {
        // Frames 0-3 of 1000 ns from t = 1000. "a" runs in every frame; "b" first in frame 2,
        // again in 3; "c" once before the first frame (which does not count) and in frame 3. So
        // frame 2 has "b" new, frame 3 has "c" new, and nothing is new in frame 1. The first
        // open computes each name's first start in one pass over the kernels and stores it; a
        // reopen answers from the stored copy, and a malformed copy is recomputed.
        const std::string path = dir_.filePath("kernels.fragscope").toStdString();
        {
            Ingest in(options(path));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            kernel(in, 100, 200, "c");
            for (int f = 0; f < 4; ++f) {
                const int64_t s = 1000 * (f + 1);
                mark(in, s, "frame " + std::to_string(f));
                kernel(in, s + 100, s + 200, "a");
                if (f >= 2) kernel(in, s + 300, s + 400, "b");
                if (f == 3) kernel(in, s + 500, s + 600, "c");
            }
            mark(in, 5000, "end");
            in.end();
        }
        auto newIn = [](const Engine& e, int64_t frame) {
            std::vector<std::string> out;
            for (const KernelSummary& k : e.kernelsInFrame(frame))
                if (k.newInFrame) out.push_back(k.name);
            return out;
        };
        const std::vector<std::string> none, b{"b"}, c{"c"};
        auto check = [&](const Engine& e) {
            QCOMPARE(newIn(e, 1), none);
            QCOMPARE(newIn(e, 2), b);
            QCOMPARE(newIn(e, 3), c);
            QCOMPARE(e.kernelsInFrame(3).size(), size_t(3));
        };
        check(*Engine::open(path));
        if (QTest::currentTestFailed()) return;
        {
            Db db(path, SQLITE_OPEN_READONLY);
            QCOMPARE(db.scalar("SELECT COUNT(*) FROM analysis_cache WHERE key LIKE 'kernels:%'"),
                     int64_t(1));
        }
        check(*Engine::open(path));
        if (QTest::currentTestFailed()) return;
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("UPDATE analysis_cache SET value = x'0100' WHERE key LIKE 'kernels:%'");
        }
        check(*Engine::open(path));
    }

    void levelOfDetailIsKept()
    {
        // The preview's grid is built once and stored: a reopen answers the same preview from
        // the stored cells (floats: equal to 1e-6), without a pass over the blocks.
        const std::string path = dir_.filePath("lod.fragscope").toStdString();
        makeSession(path);
        HeatmapRequest rq;
        rq.width = 300;
        rq.height = 200;
        const auto a = Engine::open(path)->heatmapPreview(rq);
        {
            Db db(path, SQLITE_OPEN_READONLY);
            QCOMPARE(db.scalar("SELECT COUNT(*) FROM analysis_cache WHERE key LIKE 'lod:%'"),
                     int64_t(1));
        }
        const auto b = Engine::open(path)->heatmapPreview(rq);
        QCOMPARE(a.occupancy.size(), b.occupancy.size());
        int allocated = 0;
        for (size_t k = 0; k < a.occupancy.size(); ++k) {
            QVERIFY(std::abs(a.occupancy[k] - b.occupancy[k]) < 1e-6);
            QCOMPARE(a.state[k], b.state[k]);
            allocated += a.state[k] == CellState::Allocated;
        }
        QVERIFY(allocated > 1000);
    }

    void staleIndexIsRebuilt()
    {
        // Move one block 4 KiB up behind the engine's back: every row count, the event count
        // and the largest id stay the same, so only the content hash can tell. The index
        // stored for the old content must not be used.
        const std::string path = dir_.filePath("stale.fragscope").toStdString();
        makeSession(path);
        const auto before = Engine::open(path);
        QVERIFY(before->loadInfo().indexCacheWritten);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("UPDATE allocations SET address = address + 4096 WHERE id = (SELECT id FROM"
                    " allocations WHERE free_ns IS NULL ORDER BY id LIMIT 1)");
        }
        const auto after = Engine::open(path);
        QVERIFY(!after->loadInfo().indexCacheUsed);
        QVERIFY(!after->loadInfo().frameCacheUsed);
        QVERIFY(after->loadInfo().indexCacheWritten);
        exact(*after);
        // The move is visible at the end: the free fragment just below the moved block is
        // 4 KiB longer, the one above 4 KiB shorter, so the fragment lists differ; the stale
        // figures would have kept the old ones.
        const auto f0 = before->fragmentsAt(0, Level::Framework, before->timeEnd());
        const auto f1 = after->fragmentsAt(0, Level::Framework, after->timeEnd());
        uint64_t free0 = 0, free1 = 0;
        bool differ = f0.size() != f1.size();
        for (size_t i = 0; i < std::min(f0.size(), f1.size()); ++i) {
            differ = differ || f0[i].address != f1[i].address || f0[i].size != f1[i].size;
            free0 += f0[i].size;
            free1 += f1[i].size;
        }
        QVERIFY(differ);
        if (f0.size() == f1.size()) QCOMPARE(free0, free1);     // moved, not resized
        QVERIFY(Engine::open(path)->loadInfo().indexCacheUsed); // the rebuilt one is kept
    }

    void malformedIndexIsIgnored()
    {
        const std::string path = dir_.filePath("bad.fragscope").toStdString();
        makeSession(path);
        Engine::open(path);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            // Same key, version and stamp, a truncated value: it must be rejected.
            db.exec("UPDATE analysis_cache SET value = substr(value, 1, 40) WHERE key LIKE "
                    "'index:%'");
        }
        const auto e = Engine::open(path);
        QVERIFY(!e->loadInfo().indexCacheUsed);
        exact(*e);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            // An index pointing past the allocations.
            db.exec("UPDATE analysis_cache SET value = x'ffffffffffffffff' || substr(value, 9)"
                    " WHERE key LIKE 'index:%'");
        }
        const auto f = Engine::open(path);
        QVERIFY(!f->loadInfo().indexCacheUsed);
        exact(*f);
    }

    void noCacheWhenAsked()
    {
        const std::string path = dir_.filePath("nocache.fragscope").toStdString();
        makeSession(path);
        LoadOptions o;
        o.useCache = false;
        const auto e = Engine::open(path, o);
        QVERIFY(!e->loadInfo().indexCacheWritten);
        QVERIFY(!Engine::open(path, o)->loadInfo().indexCacheUsed);
    }
};

QTEST_MAIN(TstAnalysisIndex)
#include "tst_analysis_index.moc"
