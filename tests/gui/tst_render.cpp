// fragscope_render: the scene is a cache of the analysis engine's results (one truth): every
// figure a view draws equals the engine's; live refreshes equal the finished file; rule
// changes copy no allocation record; known-answer rasters; every view exported to PNG, SVG and
// PDF (by the library and by `fragscope export`).
#include "core/store/ingest.h"
#include "fixture.h"
#include "render/live_scene.h"
#include "render/render.h"
#include "testutil.h"

#include <QDir>
#include <QFile>
#include <QGuiApplication>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>

#include <cmath>

using namespace fs;
using namespace fs::render;

namespace {

int distinctColours(const QImage& img)
{
    QSet<QRgb> c;
    for (int y = 0; y < img.height(); y += 3)
        for (int x = 0; x < img.width(); x += 3)
            c.insert(img.pixel(x, y));
    return static_cast<int>(c.size());
}

bool svgParses(const QString& path, int* elements)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return false;
    QXmlStreamReader r(&f);
    int n = 0;
    bool sawSvg = false;
    while (!r.atEnd()) {
        if (r.readNext() == QXmlStreamReader::StartElement) {
            ++n;
            sawSvg = sawSvg || r.name() == QLatin1String("svg");
        }
    }
    *elements = n;
    return !r.hasError() && sawSvg;
}

Event ev(EventType t, int64_t time, uint64_t addr, uint64_t size, Level level = Level::Pool)
{
    Event e;
    e.type = t;
    e.time = time;
    e.level = level;
    e.address = addr;
    e.size = size;
    return e;
}

// Shared snapshots (CATALOGUE.md) as `fragscope import` writes them; empty when the data is
// missing (the caller skips, or fails under CI).
QStringList sharedSnapshots()
{
    QStringList out;
    for (const char* sub : {"pytorch-snapshots", "pytorch-snapshots-features"}) {
        QDir d(fstest::dataDir() + "/" + sub);
        for (const QString& f : d.entryList({"*.pickle"}, QDir::Files, QDir::Name))
            out << d.filePath(f);
    }
    return out;
}

} // namespace

class TstRender : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;
    std::shared_ptr<const Scene> scene_;

    // Every timeline sample of every track equals the engine's state at that instant (stateAt:
    // checkpoint + replay, not the timeline's sweep), entropies included, and a few equal
    // `fragscope state --at T --json` (the CLI's figures).
    static void checkAgreesWithEngine(const Scene& s, const QString& file)
    {
        QVERIFY(s.engine);
        QVERIFY(!s.tracks.empty());
        for (size_t ti = 0; ti < s.tracks.size(); ++ti) {
            const TrackEntry& ld = s.tracks[ti];
            QVERIFY(ld.timeline);
            const analysis::Timeline& tl = *ld.timeline;
            QVERIFY(!tl.time.empty());
            QCOMPARE(tl.time.back(), s.timeEnd()); // the session end is a sample
            // A pool's entry (PyTorch private pools) plots that pool's state.
            auto expected = [&](int64_t t) {
                if (!ld.pool) return s.engine->stateAt(ld.device, ld.level, t);
                for (const analysis::PoolState& p : s.engine->poolStatesAt(ld.device, ld.level, t))
                    if (p.pool == *ld.pool) return p.state;
                return analysis::State{};
            };
            for (size_t i = 0; i < tl.time.size(); ++i) {
                const analysis::State st = expected(tl.time[i]);
                QCOMPARE(tl.reserved[i], double(st.reservedBytes));
                QCOMPARE(tl.allocated[i], double(st.allocatedBytes));
                QCOMPARE(tl.freeInRegions[i], double(st.freeBytes));
                QCOMPARE(tl.fragmentCount[i], double(st.fragmentCount));
                QCOMPARE(tl.largestFragment[i], double(st.largestFreeFragmentBytes));
                QCOMPARE(tl.fragmentationRatio[i], st.fragmentationRatio);
                QCOMPARE(tl.fragmentEntropy[i], st.fragmentEntropyBits);
            }
            // Event-size entropy: a one-sample timeline at the instant (its own window sweep).
            for (size_t i : {size_t(0), tl.time.size() / 2, tl.time.size() - 1}) {
                analysis::TimelineOptions o;
                o.device = ld.device;
                o.level = ld.level;
                o.from = o.to = tl.time[i];
                const auto one = s.engine->timeline(o);
                QCOMPARE(one.eventEntropy.back(), tl.eventEntropy[i]);
            }
            for (size_t i : {tl.time.size() / 3, tl.time.size() - 1}) {
                QStringList args = {
                    "state",    file,
                    "--at",     QString::number(tl.time[i]),
                    "--device", QString::number(ld.device),
                    "--level",  QString::fromStdString(std::string(levelName(ld.level))),
                    "--json"};
                if (ld.pool) args << "--pool" << QString::number(*ld.pool);
                const auto r = fstest::runCli(args);
                QVERIFY2(r.exitCode == 0, r.err.constData());
                const QJsonObject st = QJsonDocument::fromJson(r.out)
                                           .object()[ld.pool ? "pools" : "states"]
                                           .toArray()
                                           .at(0)
                                           .toObject();
                QCOMPARE(st["fragment_count"].toDouble(), tl.fragmentCount[i]);
                QCOMPARE(st["reserved_bytes"].toDouble(), tl.reserved[i]);
                QCOMPARE(st["free_bytes"].toDouble(), tl.freeInRegions[i]);
                QVERIFY(std::abs(st["fragment_entropy_bits"].toDouble() - tl.fragmentEntropy[i]) <
                        1e-9);
                QVERIFY(std::abs(st["fragmentation_ratio"].toDouble() - tl.fragmentationRatio[i]) <
                        1e-9);
            }
        }
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        fixture_ = dir_.filePath("fixture.fragscope");
        fstest::makeFixtureSession(fixture_.toStdString());
        scene_ = loadScene(fixture_.toStdString());
        QVERIFY(scene_);
    }

    void fixtureTimelineEqualsEngine() { checkAgreesWithEngine(*scene_, fixture_); }

    // One binary unit per byte axis, the largest value under 2048 of it: 2047 B stays in bytes,
    // 2048 B is 2 KiB, 80 GiB (81920 MiB) is GiB, and 4 PiB stops at TiB (4096 TiB).
    void byteAxisUnits()
    {
        QCOMPARE(QString(byteAxisUnit(2047).name), QString("B"));
        QCOMPARE(byteAxisUnit(2047).div, 1.0);
        QCOMPARE(QString(byteAxisUnit(2048).name), QString("KiB"));
        QCOMPARE(byteAxisUnit(2048).div, 1024.0);
        QCOMPARE(QString(byteAxisUnit(80.0 * (1ull << 30)).name), QString("GiB"));
        QCOMPARE(QString(byteAxisUnit(4.0 * (1ull << 50)).name), QString("TiB"));
    }

    void sharedSnapshotsTimelineEqualsEngine()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        const QStringList snaps = sharedSnapshots();
        QVERIFY(!snaps.isEmpty());
        for (const QString& snap : snaps) {
            const QString out = dir_.filePath(QFileInfo(snap).completeBaseName() + ".fragscope");
            const auto r = fstest::runCli({"import", snap, "-o", out});
            QVERIFY2(r.exitCode == 0, (snap + ": " + r.err).toUtf8().constData());
            const auto s = loadScene(out.toStdString());
            checkAgreesWithEngine(*s, out);
            if (QTest::currentTestFailed()) QFAIL(qPrintable(snap));
        }
    }

    void realSnapshotFinalState()
    {
        // decomfl.pickle (CATALOGUE.md): at the end reserved 1897922560 B, free 883492352 B in
        // 71 fragments, largest 155189248 B, F = 1 - 155189248/883492352 = 0.824346, fragment
        // entropy 1.429 bits (size classes (2^(n-1), 2^n] KiB). Blocks still live at the end are
        // allocated, not freed, in the scene the views draw.
        FSTEST_REQUIRE_DATA("pytorch-snapshots/decomfl.pickle");
        const QString snap = fstest::dataDir() + "/pytorch-snapshots/decomfl.pickle";
        const QString out = dir_.filePath("decomfl-final.fragscope");
        const auto r = fstest::runCli({"import", snap, "-o", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto scene = loadScene(out.toStdString());
        const int ti = scene->defaultTrack();
        QVERIFY(ti >= 0);
        const analysis::Timeline& tl = *scene->tracks[size_t(ti)].timeline;
        QCOMPARE(tl.reserved.back(), 1897922560.0);
        QCOMPARE(tl.freeInRegions.back(), 883492352.0);
        QCOMPARE(tl.fragmentCount.back(), 71.0);
        QCOMPARE(tl.largestFragment.back(), 155189248.0);
        QVERIFY(std::abs(tl.fragmentationRatio.back() - 0.824346) < 1e-6);
        QVERIFY(std::abs(tl.fragmentEntropy.back() - 1.429) < 5e-4);
        // The histogram the views draw at the end holds the same 71 fragments.
        int64_t n = 0;
        for (const auto& b : scene->stateAt(ti, scene->timeEnd()).histogram.log2)
            n += b.count;
        QCOMPARE(n, int64_t(71));
        const QString png = dir_.filePath("decomfl.png");
        QString err;
        QVERIFY2(exportView(png, QSize(1200, 700), *scene, View::Heatmap, {}, &err),
                 qPrintable(err));
        QVERIFY(distinctColours(QImage(png)) >= 8);
    }

    void pendingFreesDrawnApart()
    {
        // verl's pools snapshot (CATALOGUE.md): 9 active_pending_free blocks, 569.7 MiB, the two
        // largest 260 and 130 MiB. The heatmap and the memory map draw them in the pending
        // colour, which no other state uses, and say so in their legends; the memory map's
        // figures are the engine's, pending apart.
        FSTEST_REQUIRE_DATA("pytorch-snapshots-features/verl-pools-pending-free.pickle");
        const QString out = dir_.filePath("verl-pending.fragscope");
        const auto r = fstest::runCli(
            {"import",
             fstest::dataDir() + "/pytorch-snapshots-features/verl-pools-pending-free.pickle", "-o",
             out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto scene = loadScene(out.toStdString());
        const int ti = scene->defaultTrack();
        QVERIFY(ti >= 0);
        const analysis::State st = scene->stateAt(ti, scene->timeEnd());
        QCOMPARE(st.pendingFreeBytes, uint64_t{597377024});
        QCOMPARE(st.freeBytes, uint64_t{675822592});
        auto pendingPixels = [](const QImage& img) {
            int n = 0;
            for (int y = 0; y < img.height(); ++y)
                for (int x = 0; x < img.width(); ++x)
                    n += img.pixel(x, y) == pendingColor().rgb();
            return n;
        };
        for (View v : {View::Heatmap, View::MemMap}) {
            const QString png = dir_.filePath(QString("verl-pending-%1.png").arg(int(v)));
            QString err;
            QVERIFY2(exportView(png, QSize(1200, 700), *scene, v, {}, &err), qPrintable(err));
            // The cells (and the legend's swatch): 2.3 % of the reserved bytes are pending.
            QVERIFY2(pendingPixels(QImage(png)) > 200, qPrintable(png));
        }
    }

    void expandableSegmentDrawnAsMapped()
    {
        // An expandable segment reserves 1 GiB of address space but maps only 64 MiB at
        // [base, +32 MiB) from t=10 and [base+512 MiB, +32 MiB) from t=20 (unmapped at 40);
        // a 16 MiB block lives in the first mapping over [30, 50). Reserved is the mapped
        // bytes: 32 MiB at 15, 64 MiB at 25 and 35, 32 MiB at 45; free = mapped - allocated.
        const std::string path = dir_.filePath("expandable.fragscope").toStdString();
        constexpr uint64_t base = 0x7f0000000000ull, mib = 1 << 20;
        {
            IngestOptions o;
            o.path = path;
            o.sourceKind = "test";
            Ingest in(o);
            in.begin();
            Event r = ev(EventType::RegionCreate, 5, base, 1024 * mib, Level::Framework);
            r.flags = 1; // expandable
            in.add(r);
            in.add(ev(EventType::RegionMap, 10, base, 32 * mib, Level::Framework));
            in.add(ev(EventType::RegionMap, 20, base + 512 * mib, 32 * mib, Level::Framework));
            in.add(ev(EventType::Alloc, 30, base, 16 * mib, Level::Framework));
            in.add(ev(EventType::RegionUnmap, 40, base + 512 * mib, 0, Level::Framework));
            in.add(ev(EventType::Free, 50, base, 0, Level::Framework));
            in.add(ev(EventType::Mark, 60, 0, 0, Level::Framework));
            in.end();
        }
        const auto s = loadScene(path, {}, 60);
        const int ti = s->defaultTrack();
        QVERIFY(ti >= 0);
        auto reservedAt = [&](int64_t t) { return double(s->stateAt(ti, t).reservedBytes); };
        QCOMPARE(reservedAt(15), 32.0 * mib);
        QCOMPARE(reservedAt(25), 64.0 * mib);
        QCOMPARE(reservedAt(35), 64.0 * mib);
        QCOMPARE(reservedAt(45), 32.0 * mib);
        QCOMPARE(double(s->stateAt(ti, 35).freeBytes), 48.0 * mib);
        // The timeline draws the same, never the 1 GiB reservation.
        const analysis::Timeline& tl = *s->tracks[size_t(ti)].timeline;
        for (size_t i = 0; i < tl.time.size(); ++i) {
            QVERIFY(tl.reserved[i] <= 64.0 * mib);
            QCOMPARE(tl.reserved[i], reservedAt(tl.time[i]));
        }
        // The address axis holds the two mapped ranges (64 MiB), not the reservation.
        QCOMPARE(s->tracks[size_t(ti)].layout.ranges.size(), size_t(2));
        QVERIFY(s->tracks[size_t(ti)].compactSize() < 80.0 * mib);
    }

    void fragmentEntropyClassesAndLiveAtEnd()
    {
        // One 64 KiB region holding blocks that leave free fragments of 8 KiB and 12 KiB (and
        // no other): 8 KiB is in class (4, 8] KiB, 12 KiB in (8, 16] KiB, so the fragment
        // entropy is 1 bit (two equally frequent classes). A [2^n, 2^(n+1)) binning would put
        // both in one class: 0 bits. The blocks are never freed: at the session end they are
        // still allocated (64 - 8 - 12 = 44 KiB).
        const std::string path = dir_.filePath("classes.fragscope").toStdString();
        constexpr uint64_t base = 0x10000000, kib = 1024;
        {
            IngestOptions o;
            o.path = path;
            o.sourceKind = "test";
            Ingest in(o);
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, base, 64 * kib));
            in.add(ev(EventType::Alloc, 1, base, 20 * kib));            // [0, 20)
            in.add(ev(EventType::Alloc, 2, base + 28 * kib, 24 * kib)); // [28, 52): 8 KiB gap
            in.end();                                                   // [52, 64): 12 KiB
        }
        const auto s = loadScene(path, {}, 10);
        const int ti = s->defaultTrack();
        const analysis::Timeline& tl = *s->tracks[size_t(ti)].timeline;
        QCOMPARE(tl.time.back(), s->timeEnd());
        QCOMPARE(tl.fragmentEntropy.back(), 1.0);
        QCOMPARE(tl.fragmentCount.back(), 2.0);
        QCOMPARE(tl.allocated.back(), 44.0 * kib);
        QCOMPARE(tl.freeInRegions.back(), 20.0 * kib);
        // F = 1 - 12/20 = 0.4.
        QVERIFY(std::abs(tl.fragmentationRatio.back() - 0.4) < 1e-12);
    }

    void rasterKnownAnswer()
    {
        // One region [0x1000000, +1 MiB) alive over [0, 100) ns, one allocation covering its
        // lower half [0x1000000, +512 KiB) over [0, 50). A 4x2 raster: each column is 25 ns,
        // each row 512 KiB; row 0 is the lowest address and is drawn at the bottom (image y=1).
        // Expected: bottom-left two cells fully allocated, bottom-right two free, the whole top
        // row free. The image is the engine's raster, coloured.
        const std::string path = dir_.filePath("raster.fragscope").toStdString();
        {
            IngestOptions o;
            o.path = path;
            o.sourceKind = "test";
            Ingest in(o);
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, 0x1000000, 1 << 20));
            in.add(ev(EventType::Alloc, 0, 0x1000000, 512 << 10));
            in.add(ev(EventType::Free, 50, 0x1000000, 0));
            in.add(ev(EventType::RegionDestroy, 100, 0x1000000, 0));
            in.end();
        }
        const auto s = loadScene(path, {}, 10);
        const int ti = s->defaultTrack();
        const Viewport vp{0, 100, 0, double(1 << 20)};
        const QImage img = heatmapRaster(*s, ti, vp, 4, 2);
        QCOMPARE(img.size(), QSize(4, 2));
        const QRgb full = occupancyColor(1.0).rgb(), fr = freeColor().rgb();
        QCOMPARE(img.pixel(0, 1), full);
        QCOMPARE(img.pixel(1, 1), full);
        QCOMPARE(img.pixel(2, 1), fr);
        QCOMPARE(img.pixel(3, 1), fr);
        for (int x = 0; x < 4; ++x)
            QCOMPARE(img.pixel(x, 0), fr);
        // The drawn image is exactly the engine's raster: same cells, coloured.
        analysis::HeatmapRequest rq;
        rq.device = s->tracks[size_t(ti)].device;
        rq.level = s->tracks[size_t(ti)].level;
        rq.t0 = 0;
        rq.t1 = 100;
        rq.y0 = 0;
        rq.y1 = 1 << 20;
        rq.width = 4;
        rq.height = 2;
        QCOMPARE(heatmapImage(s->engine->heatmap(rq)), img);
    }

    void heatmapEqualsEngineOnFixture()
    {
        // The whole-span heatmap and a zoomed one are the engine's rasters (a changed engine
        // answer would change the image: it is drawn from nothing else).
        const int ti = scene_->defaultTrack();
        const Viewport full = fullViewport(*scene_, ti);
        const Viewport zoom{scene_->frame(15)->start, scene_->frame(18)->end, full.y1 / 4,
                            full.y1 / 2};
        for (const Viewport& vp : {full, zoom}) {
            const QImage img = heatmapRaster(*scene_, ti, vp, 320, 180);
            QCOMPARE(img, heatmapImage(scene_->heatmap(ti, vp.t0, vp.t1, vp.y0, vp.y1, 320, 180)));
            QVERIFY(distinctColours(img) >= 4);
        }
    }

    void heatmapPreviewAlignedEqualsExact()
    {
        // The level-of-detail grid spans [begin, end + 1) x [0, compact size) in 2048 x 1024
        // cells. A 256 x 128 request over exactly that window puts 8 x 8 whole cells in each
        // pixel, so the preview's averages are the exact heatmap's, up to rounding.
        const int ti = scene_->defaultTrack();
        const auto& ld = scene_->tracks[size_t(ti)];
        const int64_t t0 = scene_->timeBegin(), t1 = scene_->timeEnd() + 1;
        const double y1 = ld.compactSize();
        const auto exact = scene_->heatmap(ti, t0, t1, 0, y1, 256, 128);
        const auto preview = scene_->heatmapPreview(ti, t0, t1, 0, y1, 256, 128);
        QCOMPARE(preview.occupancy.size(), exact.occupancy.size());
        int allocated = 0;
        for (size_t k = 0; k < exact.occupancy.size(); ++k) {
            QVERIFY2(std::abs(preview.occupancy[k] - exact.occupancy[k]) < 1e-4,
                     qPrintable(QString("cell %1: %2 vs %3")
                                    .arg(k)
                                    .arg(preview.occupancy[k])
                                    .arg(exact.occupancy[k])));
            QVERIFY(std::abs(preview.reservedFraction[k] - exact.reservedFraction[k]) < 1e-4);
            allocated += exact.state[k] == analysis::CellState::Allocated;
        }
        QVERIFY(allocated > 100);
    }

    void sceneFromFixture()
    {
        const Scene& s = *scene_;
        QVERIFY(s.summary.synthetic);
        QCOMPARE(int(s.frames.size()), fstest::kFixtureFrames);
        const int ti = s.defaultTrack();
        QVERIFY(ti >= 0);
        const TrackEntry& ld = s.tracks[size_t(ti)];
        QCOMPARE(ld.level, Level::Framework);
        QCOMPARE(ld.regions, int64_t(5));
        // Five 64 MiB segments, 256 MiB apart: five ranges on the compacted axis.
        QCOMPARE(ld.layout.ranges.size(), size_t(5));
        // At the first frame's start only the four segments exist, all free: four fragments of
        // 64 MiB; F = 1 - 64/256 = 0.75.
        const analysis::State s0 = s.stateAt(ti, fstest::kFixtureBegin);
        QCOMPARE(s0.fragmentCount, int64_t(4));
        QCOMPARE(s0.reservedBytes, 4ull * 64 * 1024 * 1024);
        QCOMPARE(s0.fragmentationRatio, 0.75);
        // Invariant at every sample: allocated (all inside regions here) + free = reserved.
        const analysis::Timeline& tl = *ld.timeline;
        for (size_t i = 0; i < tl.time.size(); ++i)
            QCOMPARE(tl.allocated[i] + tl.freeInRegions[i], tl.reserved[i]);
        // The frames' figures are the engine's.
        for (size_t i = 0; i < s.frames.size(); ++i)
            QCOMPARE(s.frames[i].allocator.front().atEnd.fragmentCount,
                     s.engine->frames()[i].allocator.front().atEnd.fragmentCount);
    }

    void collapsesAndRulesCopyNothing()
    {
        // Default rules: coherence_score < 0.05 breaks at 17 (0.009) and 18 (0.03); 16 has
        // 0.124 (a healthy-looking score just above the rule) and does not.
        QCOMPARE(scene_->collapses.size(), size_t(1));
        QCOMPARE(scene_->collapses[0].firstFrame, int64_t(17));
        QCOMPARE(scene_->collapses[0].lastFrame, int64_t(18));
        QVERIFY(scene_->collapsed(17) && !scene_->collapsed(16));
        // A stricter rule (coherence < 0.2) adds frame 16 to the same run: 16-18. The new scene
        // shares the engine and the timelines; no allocation row is read again.
        const int64_t rows = scene_->engine->loadInfo().allocationRowsRead;
        QCOMPARE(rows, scene_->summary.allocations); // each row read once, by the engine
        const auto copy = scene_->withRules({{"coherence_score", analysis::Compare::Less, 0.2}});
        QCOMPARE(copy->collapses.size(), size_t(1));
        QCOMPARE(copy->collapses[0].firstFrame, int64_t(16));
        QCOMPARE(copy->collapses[0].lastFrame, int64_t(18));
        QCOMPARE(copy->engine.get(), scene_->engine.get());
        for (size_t i = 0; i < copy->tracks.size(); ++i)
            QCOMPARE(copy->tracks[i].timeline.get(), scene_->tracks[i].timeline.get());
        QCOMPARE(scene_->engine->loadInfo().allocationRowsRead, rows);
        QCOMPARE(scene_->collapses[0].firstFrame, int64_t(17)); // the original is unchanged
        // The precursors of 17 are the engine's: the fallback kernel no earlier frame ran, and
        // the fifth segment created in frame 16.
        const auto rep = scene_->frameReport(17);
        QVERIFY(!rep.precursors.empty());
        bool sawKernel = false, sawRegion = false;
        for (const auto& x : rep.precursors) {
            sawKernel =
                sawKernel || ((x.kind == analysis::PrecursorKind::KernelVariantShift ||
                               x.kind == analysis::PrecursorKind::NewKernelVariant) &&
                              x.description.find("gemm_fallback_kernel") != std::string::npos);
            sawRegion = sawRegion || x.kind == analysis::PrecursorKind::RegionCreated;
        }
        QVERIFY(sawKernel);
        QVERIFY(sawRegion);
    }

    void videoRuleOnMostFramesMakesNoCollapse()
    {
        // "flow_l2_px > 2.05" fires on every fixture frame but 0 (flow 2.0 + 0.1 f, 11.5 at 17):
        // a video rule on most frames describes the video, so the scene keeps only the
        // coherence collapse 17-18 and names the rule as no break, with its counts.
        const auto copy = scene_->withRules({{"coherence_score", analysis::Compare::Less, 0.05},
                                             {"flow_l2_px", analysis::Compare::Greater, 2.05}});
        QCOMPARE(copy->collapses.size(), size_t(1));
        QCOMPARE(copy->collapses[0].firstFrame, int64_t(17));
        QCOMPARE(copy->commonRules.size(), size_t(1));
        const int64_t frames = static_cast<int64_t>(scene_->frames.size());
        QCOMPARE(copy->commonRules[0].frames, frames);
        QCOMPARE(copy->commonRules[0].fires, frames - 1);
        QVERIFY(scene_->commonRules.empty()); // the default rules: none
    }

    void rankingFollowsRuleChange()
    {
        // Adding "flow_l2_px < 2.35" breaks frames 0-3 (flow 2.0 + 0.1 f), a collapse of its
        // own; 17-18 still collapse by coherence. The precursor window of frame 17 (lookback 2)
        // starts at frame 15, so its healthy baseline shrinks from frames 0-14 (default rules)
        // to frames 4-14. The GUI's rule change (withRules), the engine opened with the rules and
        // `fragscope collapse --rules` must give the same ranking.
        const std::vector<analysis::CollapseRule> rules = {
            {"coherence_score", analysis::Compare::Less, 0.05},
            {"flow_l2_px", analysis::Compare::Less, 2.35}};
        std::vector<int64_t> all;
        for (int64_t f = 0; f <= 14; ++f)
            all.push_back(f);
        QCOMPARE(scene_->frameReport(17).baselineFrames, all);
        const auto copy = scene_->withRules(rules);
        QCOMPARE(copy->collapses.size(), size_t(2));
        QCOMPARE(copy->collapses[0].lastFrame, int64_t(3));
        QCOMPARE(copy->collapses[1].firstFrame, int64_t(17));
        const auto rep = copy->frameReport(17);
        QCOMPARE(rep.baselineFrames, std::vector<int64_t>(all.begin() + 4, all.end()));
        // The scenes share one report cache: the original's report is still its own.
        QCOMPARE(scene_->frameReport(17).baselineFrames, all);

        analysis::LoadOptions o;
        o.rules = rules;
        const auto opened = analysis::Engine::open(fixture_.toStdString(), o)->frameReport(17);
        QCOMPARE(rep.baselineFrames, opened.baselineFrames);
        compareRankings(rep, opened);
        if (QTest::currentTestFailed()) return;

        const QString rulesFile = dir_.filePath("rules-flow.json");
        {
            QFile f(rulesFile);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(R"([{"metric": "coherence_score", "compare": "<", "threshold": 0.05},
                        {"metric": "flow_l2_px", "compare": "<", "threshold": 2.35}])");
        }
        const auto r = fstest::runCli({"collapse", fixture_, "--frame", "17", "--rules", rulesFile,
                                       "--top", "100000", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject j = QJsonDocument::fromJson(r.out).object();
        const QJsonArray base = j["baseline_frames"].toArray();
        QCOMPARE(base.size(), qsizetype(11));
        for (qsizetype i = 0; i < base.size(); ++i)
            QCOMPARE(base[i].toInteger(), rep.baselineFrames[size_t(i)]);
        const QJsonArray pre = j["precursors"].toArray();
        QCOMPARE(size_t(pre.size()), rep.precursors.size());
        for (qsizetype i = 0; i < pre.size(); ++i) {
            const QJsonObject p = pre[i].toObject();
            QCOMPARE(p["time_ns"].toInteger(), rep.precursors[size_t(i)].time);
            QCOMPARE(p["description"].toString().toStdString(),
                     rep.precursors[size_t(i)].description);
            QVERIFY(std::abs(p["score"].toDouble() - rep.precursors[size_t(i)].score) < 1e-9);
        }
    }

    void liveRefreshesEqualFinishedFile()
    {
        // The fixture as a live viewer sees it while it is recorded: a LiveScene refreshed after
        // each committed frame. Each refresh reads only the new allocation rows; the last one
        // (after the end) gives the same figures and precursor ranking as opening the file.
        const std::string path = dir_.filePath("live.fragscope").toStdString();
        LiveScene live(path, 64);
        std::shared_ptr<const Scene> prev;
        int refreshes = 0;
        int64_t rowsBefore = 0, allocsBefore = 0;
        fstest::makeFixtureSession(path, [&](int f) {
            auto sc = live.refresh();
            ++refreshes;
            QVERIFY(sc->live);
            QVERIFY(sc->engine);
            const auto info = sc->engine->loadInfo();
            if (prev) {
                QVERIFY(sc->summary.events >= prev->summary.events);
                QVERIFY(sc->summary.allocations > prev->summary.allocations);
                QCOMPARE(sc->engine.get(), prev->engine.get()); // one engine, brought up to date
                QCOMPARE(info.liveRebuilds, int64_t(0));
                // Only the rows committed since the last refresh were read.
                QCOMPARE(info.allocationRowsRead - rowsBefore,
                         sc->summary.allocations - allocsBefore);
            }
            rowsBefore = info.allocationRowsRead;
            allocsBefore = sc->summary.allocations;
            QVERIFY(sc->frame(f) != nullptr);
            // Lookups between refreshes (the inspector's report, a hover) must leave no
            // connection open: the recorder finishes the file (Ingest::end) only when alone.
            QCOMPARE(sc->frameReport(f).frame, int64_t(f));
            (void)sc->allocationAt(sc->defaultTrack(), sc->timeEnd(), fstest::kBase);
            prev = std::move(sc);
        });
        QCOMPARE(refreshes, fstest::kFixtureFrames);
        compareWithFinished(live, path, 64);
    }

    void liveFollowsFreesAndRegionsAcrossCommits()
    {
        // Allocations that outlive a commit are written live (free_ns NULL) and freed later by
        // an UPDATE; a region is created and destroyed in later commits. Ten commits, 100 ns
        // apart: at step k, 1 MiB at base + k MiB is allocated at 100k and the block of step
        // k-2 is freed at 100k + 50; a second region lives from 550 to 850. After every commit
        // the live engine's figures equal a fresh open of the file as it is then.
        const std::string path = dir_.filePath("live2.fragscope").toStdString();
        LiveScene live(path, 16);
        IngestOptions o;
        o.path = path;
        o.sourceKind = "test";
        o.commitIntervalMs = 0;
        Ingest in(o);
        in.begin();
        constexpr uint64_t base = 0x10000000, mib = 1 << 20;
        in.add(ev(EventType::RegionCreate, 0, base, 16 * mib));
        for (int k = 0; k < 10; ++k) {
            in.add(ev(EventType::Alloc, 100 * k, base + k * mib, mib));
            if (k >= 2) in.add(ev(EventType::Free, 100 * k + 50, base + (k - 2) * mib, 0));
            in.add(
                ev(EventType::Alloc, 100 * k + 10, 0x90000000 + k * 16 * mib, mib, Level::Driver));
            if (k == 5) in.add(ev(EventType::RegionCreate, 550, base + 32 * mib, 4 * mib));
            if (k == 8) in.add(ev(EventType::RegionDestroy, 850, base + 32 * mib, 0));
            in.tick();
            const auto sc = live.refresh();
            QCOMPARE(sc->tracks.size(), size_t(2));
            const int pool = sc->tracks[0].level == Level::Pool ? 0 : 1;
            // Two blocks are live after every step but the first.
            QCOMPARE(sc->stateAt(pool, sc->timeEnd()).liveAllocations, int64_t(k == 0 ? 1 : 2));
            QCOMPARE(sc->tracks[size_t(pool)].regions, int64_t(k >= 5 ? 2 : 1));
            const auto fresh = loadScene(path, {}, 16);
            for (size_t ti = 0; ti < fresh->tracks.size(); ++ti) {
                const auto a = sc->stateAt(int(ti), sc->timeEnd());
                const auto b = fresh->stateAt(int(ti), fresh->timeEnd());
                QCOMPARE(a.reservedBytes, b.reservedBytes);
                QCOMPARE(a.allocatedBytes, b.allocatedBytes);
                QCOMPARE(a.fragmentCount, b.fragmentCount);
                QCOMPARE(a.largestFreeFragmentBytes, b.largestFreeFragmentBytes);
            }
        }
        in.end();
        const auto info = live.refresh()->engine->loadInfo();
        QVERIFY(info.liveLookups > 0); // the frees came as UPDATEs of live rows
        QCOMPARE(info.liveRebuilds, int64_t(0));
        compareWithFinished(live, path, 16);
    }

    // The same precursor ranking, row by row.
    static void compareRankings(const analysis::CollapseReport& a,
                                const analysis::CollapseReport& b)
    {
        QCOMPARE(a.precursors.size(), b.precursors.size());
        for (size_t k = 0; k < b.precursors.size(); ++k) {
            QCOMPARE(a.precursors[k].kind, b.precursors[k].kind);
            QCOMPARE(a.precursors[k].time, b.precursors[k].time);
            QCOMPARE(a.precursors[k].score, b.precursors[k].score);
            QCOMPARE(a.precursors[k].description, b.precursors[k].description);
        }
    }

    static void compareWithFinished(LiveScene& live, const std::string& path, int samples)
    {
        const auto last = live.refresh();
        const auto full = loadScene(path, {}, samples);
        QCOMPARE(last->summary.allocations, full->summary.allocations);
        QCOMPARE(last->tracks.size(), full->tracks.size());
        QCOMPARE(last->frames.size(), full->frames.size());
        for (size_t i = 0; i < full->frames.size(); ++i) {
            const auto& a = last->frames[i];
            const auto& b = full->frames[i];
            QCOMPARE(a.index, b.index);
            QCOMPARE(a.start, b.start);
            QCOMPARE(a.end, b.end);
            QVERIFY(a.metrics == b.metrics);
            QCOMPARE(a.allocator.size(), b.allocator.size());
            for (size_t k = 0; k < b.allocator.size(); ++k) {
                QCOMPARE(a.allocator[k].atEnd.fragmentCount, b.allocator[k].atEnd.fragmentCount);
                QCOMPARE(a.allocator[k].atEnd.largestFreeFragmentBytes,
                         b.allocator[k].atEnd.largestFreeFragmentBytes);
                QCOMPARE(a.allocator[k].minLargestFragment, b.allocator[k].minLargestFragment);
                QCOMPARE(a.allocator[k].allocs, b.allocator[k].allocs);
            }
            // The same precursor ranking.
            compareRankings(last->frameReport(a.index), full->frameReport(b.index));
            if (QTest::currentTestFailed()) return;
        }
        QCOMPARE(last->collapses.size(), full->collapses.size());
        for (size_t ti = 0; ti < full->tracks.size(); ++ti) {
            const analysis::Timeline& a = *last->tracks[ti].timeline;
            const analysis::Timeline& b = *full->tracks[ti].timeline;
            QCOMPARE(last->tracks[ti].label(), full->tracks[ti].label());
            QVERIFY(a.time == b.time);
            QVERIFY(a.reserved == b.reserved);
            QVERIFY(a.allocated == b.allocated);
            QVERIFY(a.fragmentCount == b.fragmentCount);
            QVERIFY(a.largestFragment == b.largestFragment);
            QVERIFY(a.fragmentationRatio == b.fragmentationRatio);
            QVERIFY(a.fragmentEntropy == b.fragmentEntropy);
            QVERIFY(a.eventEntropy == b.eventEntropy);
            const Viewport vp = fullViewport(*full, int(ti));
            QCOMPARE(heatmapRaster(*last, int(ti), vp, 200, 100),
                     heatmapRaster(*full, int(ti), vp, 200, 100));
        }
    }

    void exportEveryView_data()
    {
        QTest::addColumn<int>("view");
        QTest::addColumn<QString>("ext");
        for (View v : {View::Heatmap, View::MemMap, View::Histogram, View::Timeline})
            for (const char* e : {"png", "svg", "pdf"})
                QTest::addRow("%s.%s", viewName(v), e) << int(v) << QString::fromLatin1(e);
    }

    void exportEveryView()
    {
        QFETCH(int, view);
        QFETCH(QString, ext);
        const QString path =
            dir_.filePath(QStringLiteral("%1.%2").arg(QLatin1String(viewName(View(view))), ext));
        RenderOptions o;
        o.frame = 17;
        QString err;
        QVERIFY2(exportView(path, QSize(1200, 700), *scene_, View(view), o, &err), qPrintable(err));
        if (ext == QLatin1String("png")) {
            QImage img(path);
            QCOMPARE(img.size(), QSize(1200, 700));
            QVERIFY2(distinctColours(img) >= 8, "PNG looks blank");
        } else if (ext == QLatin1String("svg")) {
            int elements = 0;
            QVERIFY(svgParses(path, &elements));
            QVERIFY(elements > 20);
        } else {
            QFile f(path);
            QVERIFY(f.open(QIODevice::ReadOnly));
            QVERIFY(f.read(5) == "%PDF-");
        }
    }

    void exportRejectsBadInput()
    {
        QString err;
        QVERIFY(!exportView(dir_.filePath("x.bmpx"), QSize(800, 600), *scene_, View::Heatmap, {},
                            &err));
        QVERIFY(err.contains("x.bmpx"));
        QVERIFY(
            !exportView(dir_.filePath("x.png"), QSize(10, 10), *scene_, View::Heatmap, {}, &err));
        QVERIFY(err.contains("size"));
    }

    void cliExport()
    {
        const QString out = dir_.filePath("cli-heatmap.png");
        auto r = fstest::runCli(
            {"export", "heatmap", fixture_, "-o", out, "--size", "900x500", "--frames", "15-18"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QImage img(out);
        QCOMPARE(img.size(), QSize(900, 500));
        QVERIFY(distinctColours(img) >= 8);
        const QString svg = dir_.filePath("cli-timeline.svg");
        r = fstest::runCli(
            {"export", "timeline", fixture_, "-o", svg, "--from", "0.5s", "--to", "2s"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        int elements = 0;
        QVERIFY(svgParses(svg, &elements));
        r = fstest::runCli(
            {"export", "histogram", fixture_, "-o", dir_.filePath("h.png"), "--frame", "17"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        // Usage errors: unknown view, bad size, frames that do not exist -> 64.
        QCOMPARE(fstest::runCli({"export", "piechart", fixture_, "-o", out}).exitCode, 64);
        QCOMPARE(
            fstest::runCli({"export", "heatmap", fixture_, "-o", out, "--size", "big"}).exitCode,
            64);
        QCOMPARE(fstest::runCli({"export", "heatmap", fixture_, "-o", out, "--frames", "90-99"})
                     .exitCode,
                 64);
        // A corrupt session -> 2 with the file named.
        const QString bad = dir_.filePath("bad.fragscope");
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("this is not a session");
        f.close();
        r = fstest::runCli({"export", "heatmap", bad, "-o", out});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("bad.fragscope"));
    }
};

QTEST_MAIN(TstRender)
#include "tst_render.moc"
