// The engine's index kept in the session file (analysis_cache): a reopen uses it and replays
// nothing, and reads no allocation row (the records come from the stored columns, and only when
// a query needs them); content changed behind it (same row counts) is detected by the guard
// triggers and the index rebuilt; a malformed stored index is ignored, never trusted.
#include "builder.h"

#include "core/analysis/engine.h"
#include "core/store/sqlite.h"

#include <QTemporaryDir>
#include <QtTest>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>

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

// Every field of the given allocations, as each engine holds them.
void sameRecords(const Engine& a, const Engine& b, const std::vector<int64_t>& ids)
{
    for (int64_t id : ids) {
        const auto x = a.allocation(id), y = b.allocation(id);
        QVERIFY(x && y);
        QCOMPARE(y->address, x->address);
        QCOMPARE(y->size, x->size);
        QCOMPARE(y->allocNs, x->allocNs);
        QCOMPARE(y->freeNs, x->freeNs);
        QCOMPARE(y->regionId, x->regionId);
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

    void summaryIsKept()
    {
        // The track summary (a replay of the whole track) is stored at the first call; a
        // reopen answers it from the stored value, before any allocation row is read. Proof
        // that the stored value is what comes back: a well-formed value written behind the
        // engine's back is returned as it is; a malformed one is ignored and recomputed.
        const std::string path = dir_.filePath("summary.fragscope").toStdString();
        makeSession(path);
        const SummaryFigures computed =
            Engine::open(path)->trackSummary(0, Level::Framework).figures;
        QVERIFY(computed.peakAllocatedBytes > 0);
        QVERIFY(computed.maxFragmentCount > 0);
        {
            Db db(path, SQLITE_OPEN_READONLY);
            QCOMPARE(db.scalar("SELECT COUNT(*) FROM analysis_cache WHERE key = 'summary:0:2'"),
                     int64_t(1));
        }
        {
            const auto again = Engine::open(path);
            const SummaryFigures stored = again->trackSummary(0, Level::Framework).figures;
            QVERIFY(again->loadInfo().rowsDeferred);
            QVERIFY(!again->loadInfo().rowsFromCache); // no record was needed
            QVERIFY(stored == computed);               // every field, the doubles bit for bit
        }
        {
            // The first stored field is the peak reserved (eight bytes, little-endian).
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("UPDATE analysis_cache SET value = x'3930000000000000' || substr(value, 9)"
                    " WHERE key = 'summary:0:2'");
        }
        QCOMPARE(Engine::open(path)->trackSummary(0, Level::Framework).figures.peakReservedBytes,
                 uint64_t(12345));
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("UPDATE analysis_cache SET value = x'0100' WHERE key = 'summary:0:2'");
        }
        QCOMPARE(Engine::open(path)->trackSummary(0, Level::Framework).figures.peakReservedBytes,
                 computed.peakReservedBytes);
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

    void previewComesBeforeTheIndex()
    {
        // LoadOptions::preview: a session read without its stored index hands out the default
        // track's level-of-detail grid once its records are in; the engine answers
        // heatmapPreview from that very grid, stores it with the index, and a reopen (which
        // reads no record) hands out nothing and answers the same picture from the file.
        const std::string path = dir_.filePath("preview.fragscope").toStdString();
        const std::string copy = dir_.filePath("preview-copy.fragscope").toStdString();
        makeSession(path);
        std::filesystem::copy_file(path, copy);
        HeatmapRequest rq;
        rq.width = 300;
        rq.height = 200;
        HeatmapRequest zoom = rq;
        std::vector<std::shared_ptr<const HeatmapPreview>> got;
        LoadOptions o;
        o.storeIndexAtOpen = false;
        o.preview = [&](std::shared_ptr<const HeatmapPreview> p) { got.push_back(std::move(p)); };
        Engine::open(copy, o); // ~2000 blocks: opens at once, no preview (kPreviewFromAllocations)
        QVERIFY(got.empty());
        o.previewFrom = 1;
        const auto e = Engine::open(path, o);
        QCOMPARE(got.size(), size_t(1));
        const HeatmapPreview& p = *got.front();
        QCOMPARE(p.device, 0u);
        QCOMPARE(p.level, Level::Framework); // the fixture's only track
        QCOMPARE(p.allocations, e->tracks().front().allocations);
        QCOMPARE(p.layout.compactSize, e->layout(0, Level::Framework).compactSize);
        zoom.t0 = e->timeBegin() + (e->timeEnd() - e->timeBegin()) / 3;
        zoom.t1 = e->timeBegin() + (e->timeEnd() - e->timeBegin()) / 2;
        zoom.y0 = p.layout.compactSize / 4;
        zoom.y1 = p.layout.compactSize / 2;
        for (const HeatmapRequest& r : {rq, zoom}) {
            QVERIFY(e->previewReady(0, Level::Framework));
            const HeatmapRaster a = p.raster(r), b = e->heatmapPreview(r);
            QCOMPARE(a.t0, b.t0);
            QCOMPARE(a.t1, b.t1);
            QCOMPARE(a.y1, b.y1);
            QVERIFY(a.occupancy == b.occupancy); // one grid: equal to the bit
            QVERIFY(a.state == b.state);
        }
        // The grid was built before the records were sorted: the same cells as one built
        // after (the blocks added in another order), to rounding.
        const HeatmapRaster mine = e->heatmapPreview(rq);
        const HeatmapRaster later = Engine::open(copy)->heatmapPreview(rq);
        int allocated = 0;
        for (size_t k = 0; k < mine.occupancy.size(); ++k) {
            QVERIFY(std::abs(mine.occupancy[k] - later.occupancy[k]) < 1e-6);
            QCOMPARE(mine.state[k], later.state[k]);
            allocated += mine.state[k] == CellState::Allocated;
        }
        QVERIFY(allocated > 1000);
        auto stored = [&] {
            Db db(path, SQLITE_OPEN_READONLY);
            return db.scalar("SELECT COUNT(*) FROM analysis_cache WHERE key LIKE 'lod:%'");
        };
        QCOMPARE(stored(), int64_t(0)); // not before the index
        QVERIFY(e->storeIndex());
        QCOMPARE(stored(), int64_t(1));
        got.clear();
        const auto again = Engine::open(path, o);
        QVERIFY(again->loadInfo().rowsDeferred);
        QVERIFY(got.empty()); // nothing to wait for: the stored grid answers at once
        QVERIFY(again->previewReady(0, Level::Framework));
        const HeatmapRaster back = again->heatmapPreview(rq);
        QVERIFY(!again->loadInfo().rowsFromCache); // the stored grid, not a pass over records
        for (size_t k = 0; k < mine.occupancy.size(); ++k) {
            QVERIFY(std::abs(mine.occupancy[k] - back.occupancy[k]) < 1e-6);
            QCOMPARE(mine.state[k], back.state[k]);
        }
    }

    void indexStoredWithoutTheGridStillGivesAFirstPicture()
    {
        // A command that draws nothing (the CLI's collapse, state) stores the index without the
        // default track's grid. An open that wants a first picture then reads the records (a
        // deferred load would wait for them anyway, later), hands out the grid built from them,
        // keeps using the stored index, and stores the grid: the next open defers again.
        const std::string path = dir_.filePath("nogrid.fragscope").toStdString();
        makeSession(path);
        auto stored = [&] {
            Db db(path, SQLITE_OPEN_READONLY);
            return db.scalar("SELECT COUNT(*) FROM analysis_cache WHERE key LIKE 'lod:%'");
        };
        QVERIFY(Engine::open(path)->loadInfo().indexCacheWritten); // no preview asked
        QCOMPARE(stored(), int64_t(0));
        std::vector<std::shared_ptr<const HeatmapPreview>> got;
        LoadOptions o;
        o.storeIndexAtOpen = false;
        o.previewFrom = 1;
        o.preview = [&](std::shared_ptr<const HeatmapPreview> p) { got.push_back(std::move(p)); };
        const auto e = Engine::open(path, o);
        QCOMPARE(got.size(), size_t(1));
        QVERIFY(!e->loadInfo().rowsDeferred);
        QVERIFY(e->loadInfo().indexCacheUsed);
        QCOMPARE(stored(), int64_t(0)); // storeIndexAtOpen false: stored on request
        QVERIFY(e->storeIndex());
        QCOMPARE(stored(), int64_t(1));
        got.clear();
        const auto again = Engine::open(path, o);
        QVERIFY(again->loadInfo().rowsDeferred);
        QVERIFY(got.empty());
        QVERIFY(again->previewReady(0, Level::Framework));
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

    void reopenReadsNoAllocationRow()
    {
        // A reopen answers the first picture (timelines, frames, collapses, the heatmap
        // preview) from the stored values alone: not one row of the allocations table is read,
        // and the records themselves stay in the file until a query walks them.
        const std::string path = dir_.filePath("deferred.fragscope").toStdString();
        makeSession(path);
        TimelineOptions o;
        HeatmapRequest rq;
        rq.width = 300;
        rq.height = 200;
        {
            const auto first = Engine::open(path);
            QVERIFY(!first->loadInfo().rowsDeferred);
            QVERIFY(first->loadInfo().allocationRowsRead > 0);
            o.step = (first->timeEnd() - first->timeBegin()) / 300;
            first->timeline(o);        // stored
            first->heatmapPreview(rq); // grid stored
        }
        const auto again = Engine::open(path);
        QVERIFY(again->loadInfo().rowsDeferred);
        QVERIFY(!again->loadInfo().rowsFromCache);
        QCOMPARE(again->loadInfo().allocationRowsRead, int64_t(0));
        QVERIFY(again->loadInfo().frameCacheUsed);
        const Timeline tl = again->timeline(o);
        QCOMPARE(again->loadInfo().timelinesFromCache, int64_t(1));
        QVERIFY(!tl.time.empty());
        again->heatmapPreview(rq);
        QVERIFY(!again->frames().empty());
        QCOMPARE(again->tracks().size(), size_t(1));
        // 3000 events, a third of them frees: the track's count comes from the stored list.
        const auto eager = [&] {
            LoadOptions no;
            no.useCache = false;
            return Engine::open(path, no);
        }();
        QCOMPARE(again->tracks()[0].allocations, eager->tracks()[0].allocations);
        QVERIFY(!again->loadInfo().rowsFromCache); // nothing above needed the records
        // The first query that walks allocations reads them from the stored columns.
        exact(*again);
        QVERIFY(again->loadInfo().rowsFromCache);
        QCOMPARE(again->loadInfo().allocationRowsRead, int64_t(0));
        sameFigures(*eager, *again);
    }

    void deferredEngineAnswersLikeAFreshOne()
    {
        // Every query of an engine whose records were deferred equals the same query of one that
        // read the rows (no cache at all).
        const std::string path = dir_.filePath("same.fragscope").toStdString();
        makeSession(path);
        Engine::open(path);
        LoadOptions no;
        no.useCache = false;
        const auto a = Engine::open(path, no);
        const auto b = Engine::open(path);
        QVERIFY(b->loadInfo().rowsDeferred);
        const int64_t end = a->timeEnd(), mid = (a->timeBegin() + a->timeEnd()) / 2;
        // The precursor ranking first: it is the query that walks every track directly.
        const auto fa = a->frameReport(3), fb = b->frameReport(3);
        QCOMPARE(fa.precursors.size(), fb.precursors.size());
        for (size_t i = 0; i < fa.precursors.size(); ++i) {
            QCOMPARE(fa.precursors[i].allocationId, fb.precursors[i].allocationId);
            QCOMPARE(fa.precursors[i].score, fb.precursors[i].score);
        }
        QVERIFY(b->loadInfo().rowsFromCache);
        QCOMPARE(a->fragmentsAt(0, Level::Framework, mid).size(),
                 b->fragmentsAt(0, Level::Framework, mid).size());
        QCOMPARE(a->liveAllocationsAt(0, Level::Framework, end).size(),
                 b->liveAllocationsAt(0, Level::Framework, end).size());
        QCOMPARE(a->bursts(0, Level::Framework).size(), b->bursts(0, Level::Framework).size());
        QCOMPARE(a->addressJumps(0, Level::Framework, 4).size(),
                 b->addressJumps(0, Level::Framework, 4).size());
        HeatmapRequest rq;
        rq.width = 200;
        rq.height = 100;
        QVERIFY(a->heatmap(rq).occupancy == b->heatmap(rq).occupancy);
        const auto live = a->liveAllocationsAt(0, Level::Framework, end);
        QVERIFY(!live.empty());
        QCOMPARE(b->allocation(live.front().id)->address, live.front().address);
        const auto ha = a->histogramOver(0, Level::Framework, a->timeBegin(), end);
        const auto hb = b->histogramOver(0, Level::Framework, b->timeBegin(), end);
        QCOMPARE(ha.log2.size(), hb.log2.size());
        for (size_t i = 0; i < ha.log2.size(); ++i)
            QCOMPARE(ha.log2[i].count, hb.log2[i].count);
    }

    void storedRecordsKeepEveryField()
    {
        // The stored records are delta-coded column by column: every field must come back as a
        // load from the rows gives it, edge values included (a block outside every region, one
        // never freed, one freed when allocated, one of size 0, addresses far apart, ids out of
        // time order).
        const std::string path = dir_.filePath("fields.fragscope").toStdString();
        {
            Ingest in(options(path));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 64 * MiB));
            in.add(ev(EventType::Alloc, 10, kBase + MiB, 3 * MiB));         // freed at 900
            in.add(ev(EventType::Alloc, 20, 0xffffff0000000000ull, 12345)); // outside
            in.add(ev(EventType::Alloc, 30, kBase, 0));                     // size 0
            in.add(ev(EventType::Alloc, 40, kBase + 8 * MiB, 4096));        // freed at 40
            in.add(ev(EventType::Free, 40, kBase + 8 * MiB));
            in.add(ev(EventType::Alloc, 50, kBase + 60 * MiB, 4 * MiB - 1)); // never freed
            in.add(ev(EventType::Free, 900, kBase + MiB));
            in.end();
        }
        Engine::open(path);
        LoadOptions no;
        no.useCache = false;
        const auto a = Engine::open(path, no);
        const auto b = Engine::open(path);
        QVERIFY(b->loadInfo().rowsDeferred);
        std::vector<int64_t> ids;
        {
            Db db(path, SQLITE_OPEN_READONLY);
            Stmt st = db.prepare("SELECT id FROM allocations ORDER BY id");
            while (st.step())
                ids.push_back(st.i64(0));
        }
        QCOMPARE(ids.size(), size_t(5));
        sameRecords(*a, *b, ids);
        QVERIFY(b->loadInfo().rowsFromCache);
        for (int64_t t : {int64_t(0), int64_t(25), int64_t(45), int64_t(1000)}) {
            QCOMPARE(b->stateAt(0, Level::Framework, t).allocatedOutsideBytes,
                     a->stateAt(0, Level::Framework, t).allocatedOutsideBytes);
            QCOMPARE(b->stateAt(0, Level::Framework, t).freeBytes,
                     a->stateAt(0, Level::Framework, t).freeBytes);
        }
    }

    void storedRecordsKeepTheTag()
    {
        // The records carry each block's tag (its strings.id) for the roles of address jumps.
        // Frame 0 [100, 200): "kv" at +0, "w" at +64K; frame 1 [200, 300): "kv" at +512K (moved
        // 512 KiB), "w" at +1M (moved 960 KiB). "w"'s string id is then moved past 32 bits: the
        // record cannot hold it, and its text is read by the allocation's id. Roles follow the
        // tags (tag:kv#0, tag:w#0), from the rows and from the stored records alike; a record
        // that lost its tag would give size:16384#0 and size:8192#0.
        const std::string path = dir_.filePath("tags.fragscope").toStdString();
        {
            Ingest in(options(path));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
            mark(in, 100, "frame 0");
            Event kv = ev(EventType::Alloc, 110, kBase, 16 * KiB);
            kv.name = in.intern("kv");
            Event w = ev(EventType::Alloc, 120, kBase + 64 * KiB, 8 * KiB);
            w.name = in.intern("w");
            in.add(kv);
            in.add(w);
            in.add(ev(EventType::Free, 190, kBase));
            in.add(ev(EventType::Free, 191, kBase + 64 * KiB));
            mark(in, 200, "frame 1");
            kv.time = 210;
            kv.address = kBase + 512 * KiB;
            w.time = 220;
            w.address = kBase + MiB;
            in.add(kv);
            in.add(w);
            mark(in, 300, "end");
            in.end();
        }
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            const int64_t old = db.scalar("SELECT id FROM strings WHERE text = 'w'");
            db.exec("UPDATE strings SET id = 5000000000 WHERE id = " + std::to_string(old));
            db.exec("UPDATE allocations SET tag = 5000000000 WHERE tag = " + std::to_string(old));
        }
        Engine::open(path); // stores the index, records included
        LoadOptions no;
        no.useCache = false;
        const auto a = Engine::open(path, no);
        const auto b = Engine::open(path);
        QVERIFY(b->loadInfo().rowsDeferred);
        for (const auto& e : {a, b}) {
            std::map<std::string, uint64_t> byRole;
            for (const AddressJump& j : e->addressJumps(0, Level::Framework, 1))
                byRole[j.role] = j.distance;
            QCOMPARE(byRole.size(), size_t(2));
            QVERIFY(byRole.count("tag:kv#0") && byRole.count("tag:w#0"));
            QCOMPARE(byRole["tag:kv#0"], 512 * KiB);
            QCOMPARE(byRole["tag:w#0"], 960 * KiB);
        }
        QVERIFY(b->loadInfo().rowsFromCache);
    }

    void storedRecordsReadOverThreads()
    {
        // The stored records are kept in chunks of 2^20; a deferred read decodes several chunks
        // at once and checks the records in parts, one per thread (LoadOptions::parallelFrom = 1
        // splits even this). 1.1 M blocks (two chunks and a part of a third), 16 KiB apart in a
        // ring of 4096 slots, each freed when its slot comes round again: every record must come
        // back as the rows give it, across the chunk boundaries too.
        const std::string path = dir_.filePath("chunks.fragscope").toStdString();
        constexpr int64_t n = (int64_t{1} << 20) + 100'000;
        {
            Ingest in(options(path));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 64 * MiB));
            for (int64_t i = 0; i < n; ++i) {
                const uint64_t addr = kBase + static_cast<uint64_t>(i % 4096) * 16 * KiB;
                if (i >= 4096) in.add(ev(EventType::Free, 10 + 2 * i, addr));
                in.add(ev(EventType::Alloc, 11 + 2 * i, addr, 1024 + 64 * uint64_t(i % 200)));
            }
            in.end();
        }
        Engine::open(path); // stores the index, records included
        LoadOptions no, split;
        no.useCache = false;
        split.parallelFrom = 1;
        const auto a = Engine::open(path, no);
        const auto b = Engine::open(path, split);
        QVERIFY(b->loadInfo().rowsDeferred);
        const auto live = b->liveAllocationsAt(0, Level::Framework, b->timeEnd());
        QVERIFY(b->loadInfo().rowsFromCache);
        QCOMPARE(b->loadInfo().allocationRowsRead, int64_t(0));
        QCOMPARE(live.size(), size_t(4096));
        QCOMPARE(b->tracks()[0].allocations, n);
        // Blocks on both sides of each chunk boundary and spread over the rest.
        std::vector<int64_t> ids;
        {
            Db db(path, SQLITE_OPEN_READONLY);
            Stmt st = db.prepare("SELECT id FROM allocations ORDER BY alloc_ns");
            for (int64_t i = 0; st.step(); ++i)
                if (i % 9973 == 0 || (i % (int64_t{1} << 20)) < 2 ||
                    ((i + 1) % (int64_t{1} << 20)) == 0)
                    ids.push_back(st.i64(0));
        }
        QVERIFY(ids.size() > 100);
        sameRecords(*a, *b, ids);
        sameFigures(*a, *b);
    }

    void guardDropsTheIndexOnAnyChange()
    {
        // Triggers on the tables the index is computed from drop meta's guard on any change,
        // made by any program (here: plain SQL): the next open reads the rows again.
        const std::string path = dir_.filePath("guard.fragscope").toStdString();
        makeSession(path);
        Engine::open(path);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            QVERIFY(!db.scalarText("SELECT value FROM meta WHERE key='analysis_guard'").empty());
            db.exec("UPDATE regions SET destroy_ns = destroy_ns WHERE id = 1");
            QVERIFY(db.scalarText("SELECT value FROM meta WHERE key='analysis_guard'").empty());
        }
        const auto e = Engine::open(path);
        QVERIFY(!e->loadInfo().rowsDeferred);
        QVERIFY(!e->loadInfo().indexCacheUsed);
        QVERIFY(e->loadInfo().indexCacheWritten); // under a new guard
        QVERIFY(Engine::open(path)->loadInfo().rowsDeferred);
        // Without its triggers the guard proves nothing: a reopen does not trust it.
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("DROP TRIGGER fs_analysis_guard_allocations_update");
            db.exec("UPDATE allocations SET size = size WHERE id = 2");
        }
        const auto f = Engine::open(path);
        QVERIFY(!f->loadInfo().rowsDeferred);
        QVERIFY(!f->loadInfo().indexCacheUsed);
        exact(*f);
    }

    void storedIndexChangedBeforeRowsAreRead()
    {
        // The records of a deferred engine are read later, by the first query that needs them.
        const std::string path = dir_.filePath("later.fragscope").toStdString();
        makeSession(path);
        const auto before = Engine::open(path); // stores the index
        // (a) A row changed meanwhile: the engine answers for the content it opened (the stored
        // records carry its stamp), like an engine that had read everything at open.
        const auto a = Engine::open(path);
        QVERIFY(a->loadInfo().rowsDeferred);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("UPDATE allocations SET address = address + 4096 WHERE id = (SELECT id FROM"
                    " allocations WHERE free_ns IS NULL ORDER BY id LIMIT 1)");
        }
        sameFigures(*before, *a);
        QVERIFY(a->loadInfo().rowsFromCache);
        // (b) Stored records gone, content unchanged (the guard stands): the rows are read and
        // indexed again.
        Engine::open(path); // the new content stored under a new guard
        const auto b = Engine::open(path);
        QVERIFY(b->loadInfo().rowsDeferred);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("DELETE FROM analysis_cache WHERE key LIKE 'rows:%'");
        }
        exact(*b);
        QVERIFY(!b->loadInfo().rowsFromCache);
        QVERIFY(b->loadInfo().allocationRowsRead > 0);
        // (c) Stored records gone and content changed: nothing in the file matches the engine
        // any more; the query fails with an error naming the file, never with mixed figures.
        const auto c = Engine::open(path);
        QVERIFY(c->loadInfo().rowsDeferred);
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            db.exec("DELETE FROM analysis_cache WHERE key LIKE 'rows:%'");
            db.exec("UPDATE allocations SET size = size WHERE id = 2");
        }
        try {
            c->stateAt(0, Level::Framework, c->timeEnd());
            QFAIL("expected a SessionError");
        } catch (const SessionError& err) {
            QVERIFY(std::string(err.what()).find(path) != std::string::npos);
        }
        // A fresh open rebuilds.
        const auto d = Engine::open(path);
        QVERIFY(!d->loadInfo().rowsDeferred);
        exact(*d);
    }

    void readOnlyFileUsesItsGuardedIndex()
    {
        const std::string path = dir_.filePath("ro.fragscope").toStdString();
        makeSession(path);
        Engine::open(path);
        QCOMPARE(::chmod(path.c_str(), 0444), 0);
        if (::access(path.c_str(), W_OK) == 0) QSKIP("running as root: the file stays writable");
        const auto e = Engine::open(path);
        QVERIFY(e->loadInfo().rowsDeferred);
        exact(*e);
    }

    void malformedIndexIsIgnored()
    {
        const std::string path = dir_.filePath("bad.fragscope").toStdString();
        makeSession(path);
        Engine::open(path);
        // The stored index changed in place (same key, version and stamp) by `sql`: a reopen
        // finds a stamp that matches and leaves the records for later; the first query that
        // walks them finds the value malformed and reads and indexes the rows instead (storing
        // a good index again for the next case).
        auto reopenAfter = [&](const char* sql) {
            {
                Db db(path, SQLITE_OPEN_READWRITE);
                db.exec(sql);
            }
            const auto e = Engine::open(path);
            exact(*e);
            return e;
        };
        // A truncated value.
        const auto e = reopenAfter("UPDATE analysis_cache SET value = substr(value, 1, 40) WHERE "
                                   "key LIKE 'index:%'");
        QVERIFY(!e->loadInfo().indexCacheUsed);
        QVERIFY(!e->loadInfo().rowsFromCache);
        QVERIFY(e->loadInfo().allocationRowsRead > 0);
        // An index pointing past the allocations.
        QVERIFY(!reopenAfter("UPDATE analysis_cache SET value = x'ffffffffffffffff' || "
                             "substr(value, 9) WHERE key LIKE 'index:%'")
                     ->loadInfo()
                     .indexCacheUsed);
        // The freed blocks by free time (after u64 blocks and u64 regions: a u64 count, then
        // each index as a zigzag LEB128 delta from the one before) with the first listed twice
        // and the second left out: every entry in range and freed, but not each freed block once.
        {
            Db db(path, SQLITE_OPEN_READWRITE);
            Stmt st = db.prepare("SELECT key, value FROM analysis_cache WHERE key LIKE 'index:%'");
            QVERIFY(st.step());
            const std::string key = st.text(0);
            const std::vector<uint8_t> v = st.blob(1);
            QVERIFY(v.size() > 24);
            uint64_t n = 0;
            std::memcpy(&n, v.data() + 16, 8);
            QVERIFY(n >= 2);
            size_t at = 24;
            auto next = [&] {
                uint64_t x = 0;
                for (int shift = 0; at < v.size(); shift += 7) {
                    const uint8_t c = v[at++];
                    x |= uint64_t{c & 0x7fu} << shift;
                    if (!(c & 0x80)) break;
                }
                return static_cast<int64_t>(x >> 1) ^ -static_cast<int64_t>(x & 1);
            };
            std::vector<int64_t> byFree;
            for (int64_t prev = 0; byFree.size() < n;)
                byFree.push_back(prev += next());
            byFree[1] = byFree[0];
            std::vector<uint8_t> out(v.begin(), v.begin() + 24);
            for (int64_t prev = 0; int64_t x : byFree) {
                const int64_t d = x - prev;
                uint64_t z = (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
                for (; z >= 0x80; z >>= 7)
                    out.push_back(static_cast<uint8_t>(z | 0x80));
                out.push_back(static_cast<uint8_t>(z));
                prev = x;
            }
            out.insert(out.end(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
            Stmt up = db.prepare("UPDATE analysis_cache SET value = ?1 WHERE key = ?2");
            up.bindBlob(1, out.data(), out.size()).bind(2, std::string_view(key));
            up.run();
        }
        const auto twice = Engine::open(path);
        exact(*twice);
        QVERIFY(!twice->loadInfo().indexCacheUsed);
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
