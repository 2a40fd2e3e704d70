// fragscope_render: known-answer rasters, scene loading, collapse rules, and every view exported
// to PNG, SVG and PDF (by the library and by `fragscope export`).
#include "core/ingest.h"
#include "fixture.h"
#include "render/live_scene.h"
#include "render/render.h"
#include "testutil.h"

#include <QFile>
#include <QGuiApplication>
#include <QImage>
#include <QSet>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>

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

} // namespace

class TstRender : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;
    std::shared_ptr<const Scene> scene_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        fixture_ = dir_.filePath("fixture.fragscope");
        fstest::makeFixtureSession(fixture_.toStdString());
        scene_ = loadScene(fixture_.toStdString());
        QVERIFY(scene_);
    }

    void liveSceneMatchesFullLoad()
    {
        // The fixture as a live viewer sees it while it is recorded: a LiveScene refreshed after
        // each committed frame. The refreshes only grow; the last one (after the end) equals
        // loadScene of the finished file; and every sample the incremental replay took equals
        // the state recomputed from scratch (fragmentsAt) from the events up to its time. 16
        // samples per level force the sample step to double several times on the way.
        const std::string path = dir_.filePath("live.fragscope").toStdString();
        LiveScene live(path, 16);
        // Only the newest scene and frame 12's are kept: the others are let go, as the views
        // do, so that refreshes bring a released scene up to date instead of copying it.
        std::shared_ptr<const Scene> prev, at12;
        int refreshes = 0;
        fstest::makeFixtureSession(path, [&](int f) {
            auto sc = live.refresh();
            ++refreshes;
            QVERIFY(sc->live);
            QVERIFY(sc->engine == nullptr);
            if (prev) {
                QVERIFY(sc->summary.events >= prev->summary.events);
                QVERIFY(sc->summary.allocations > prev->summary.allocations);
                QVERIFY(sc->frames.size() >= prev->frames.size());
            }
            if (f == 12) at12 = sc;
            prev = std::move(sc);
        });
        QCOMPARE(refreshes, fstest::kFixtureFrames);
        // Frame 12's scene is unchanged by later refreshes: frame 12 is known and the fifth
        // segment (created in frame 16) is not.
        QVERIFY(at12->frame(12) != nullptr);
        QVERIFY(at12->frame(13) == nullptr);
        QCOMPARE(at12->levels.at(0).regions.size(), size_t(4));
        prev.reset();
        compareWithFullLoad(live, path, 16);
    }

    void liveSceneFollowsFreesAndRegionsAcrossCommits()
    {
        // Allocations that outlive a commit are written live (free_ns NULL) and freed later by
        // an UPDATE; a region is created and destroyed in later commits. Ten commits, 100 ns
        // apart: at step k, 1 MiB at base + k MiB is allocated at 100k and the block of step
        // k-2 is freed at 100k + 50; a second region lives from 550 to 850.
        const std::string path = dir_.filePath("live2.fragscope").toStdString();
        LiveScene live(path, 16);
        IngestOptions o;
        o.path = path;
        o.sourceKind = "test";
        o.commitIntervalMs = 0;
        Ingest in(o);
        in.begin();
        auto ev = [](EventType t, int64_t time, uint64_t addr, uint64_t size) {
            Event e;
            e.type = t;
            e.time = time;
            e.level = Level::Pool;
            e.address = addr;
            e.size = size;
            return e;
        };
        constexpr uint64_t base = 0x10000000, mib = 1 << 20;
        in.add(ev(EventType::RegionCreate, 0, base, 16 * mib));
        int64_t lastEvents = -1;
        for (int k = 0; k < 10; ++k) {
            in.add(ev(EventType::Alloc, 100 * k, base + k * mib, mib));
            if (k >= 2) in.add(ev(EventType::Free, 100 * k + 50, base + (k - 2) * mib, 0));
            // A level without regions (its axis spans its allocations): a block 16 MiB further
            // up at every step widens the axis each time.
            Event d = ev(EventType::Alloc, 100 * k + 10, 0x90000000 + k * 16 * mib, mib);
            d.level = Level::Driver;
            in.add(d);
            if (k == 5) in.add(ev(EventType::RegionCreate, 550, base + 32 * mib, 4 * mib));
            if (k == 8) in.add(ev(EventType::RegionDestroy, 850, base + 32 * mib, 0));
            in.tick();
            const auto sc = live.refresh();
            QVERIFY(sc->summary.events > lastEvents);
            lastEvents = sc->summary.events;
            // Two blocks are live after every step but the first.
            QCOMPARE(sc->levels.size(), size_t(2));
            QCOMPARE(sc->levels[0].spans.size(), size_t(k + 1)); // driver: one span per block
            const auto& ld = sc->levels.at(1);
            int liveBlocks = 0;
            for (const auto& a : ld.allocs)
                liveBlocks += a.freed ? 0 : 1;
            QCOMPARE(liveBlocks, k == 0 ? 1 : 2);
            QCOMPARE(ld.regions.size(), size_t(k >= 5 ? 2 : 1));
        }
        in.end();
        QVERIFY(live.stats().liveLookups > 0); // the frees came as UPDATEs of live rows
        // Each scene was let go before the next refresh: only the first was a full copy, the
        // others brought a released scene up to date.
        QCOMPARE(live.stats().fullCopies, int64_t(1));
        compareWithFullLoad(live, path, 16);
    }

    // The last refresh of a finished recording equals loadScene of the file, and every sample the
    // incremental replay took equals the state recomputed from scratch (fragmentsAt).
    static void compareWithFullLoad(LiveScene& live, const std::string& path, size_t samples)
    {
        const auto last = live.refresh();
        const auto full = loadScene(path);
        QCOMPARE(last->summary.events, full->summary.events);
        QCOMPARE(last->summary.allocations, full->summary.allocations);
        QCOMPARE(last->summary.kernels, full->summary.kernels);
        QCOMPARE(last->summary.frames, full->summary.frames);
        QCOMPARE(last->levels.size(), full->levels.size());
        QCOMPARE(last->frames.size(), full->frames.size());
        for (size_t i = 0; i < full->frames.size(); ++i) {
            QCOMPARE(last->frames[i].start, full->frames[i].start);
            QCOMPARE(last->frames[i].end, full->frames[i].end);
            QCOMPARE(last->frames[i].collapsed, full->frames[i].collapsed);
            QVERIFY(last->frames[i].metrics == full->frames[i].metrics);
            QVERIFY(last->frames[i].kernelNames == full->frames[i].kernelNames);
        }
        QCOMPARE(last->collapses.size(), full->collapses.size());
        QCOMPARE(last->kernels.size(), full->kernels.size());
        for (size_t i = 0; i < full->kernels.size(); ++i)
            QCOMPARE(last->kernels[i].start, full->kernels[i].start);
        QVERIFY(last->stacks == full->stacks);
        for (size_t li = 0; li < full->levels.size(); ++li) {
            const LevelData& a = last->levels[li];
            const LevelData& b = full->levels[li];
            QCOMPARE(a.label(), b.label());
            QCOMPARE(a.allocs.size(), b.allocs.size());
            for (size_t i = 0; i < b.allocs.size(); ++i) {
                QCOMPARE(a.allocs[i].id, b.allocs[i].id);
                QCOMPARE(a.allocs[i].address, b.allocs[i].address);
                QCOMPARE(a.allocs[i].size, b.allocs[i].size);
                QCOMPARE(a.allocs[i].allocNs, b.allocs[i].allocNs);
                QCOMPARE(a.allocs[i].freeNs, b.allocs[i].freeNs);
                QCOMPARE(a.allocs[i].freed, b.allocs[i].freed);
                QCOMPARE(a.allocs[i].stack, b.allocs[i].stack);
            }
            QCOMPARE(a.maxAllocDuration, b.maxAllocDuration);
            QCOMPARE(a.regions.size(), b.regions.size());
            QCOMPARE(a.spans.size(), b.spans.size());
            QCOMPARE(a.compactSize, b.compactSize);
            // Every sample against a from-scratch recomputation (a sample at t holds the events
            // at or before t).
            QVERIFY(a.samples.size() >= samples);
            QVERIFY(a.samples.size() <= 2 * samples + 2 * full->frames.size() + 2);
            QCOMPARE(a.samples.back().t, full->timeEnd());
            QCOMPARE(a.samples.back().fragmentCount, b.stateAt(full->timeEnd()).fragmentCount);
            QCOMPARE(a.samples.back().fragRatio, b.stateAt(full->timeEnd()).fragRatio);
            for (const StateSample& smp : a.samples) {
                // At the very end, allocations still live count as freed for fragmentsAt.
                if (smp.t >= full->timeEnd()) continue;
                const auto frags = fragmentsAt(b, smp.t);
                double free = 0, largest = 0;
                for (const auto& [addr, size] : frags) {
                    free += double(size);
                    largest = std::max(largest, double(size));
                }
                double allocated = 0;
                for (const auto& al : b.allocs)
                    if (al.allocNs <= smp.t && al.freeNs > smp.t) allocated += double(al.size);
                QCOMPARE(smp.fragmentCount, double(frags.size()));
                QCOMPARE(smp.largestFragment, largest);
                QCOMPARE(smp.freeInRegions, free);
                QCOMPARE(smp.allocated, allocated);
            }
        }
    }

    void rasterKnownAnswer()
    {
        // One region [0x1000000, +1 MiB) alive over [0, 100) ns, one allocation covering its
        // lower half [0x1000000, +512 KiB) over [0, 50). A 4×2 raster: each column is 25 ns,
        // each row 512 KiB; row 0 is the lowest address and is drawn at the bottom (image y=1).
        // Expected: bottom-left two cells fully allocated (occupancy 1), bottom-right two free,
        // the whole top row free.
        LevelData ld;
        ld.regions.push_back({0, 100, 0x1000000, 1 << 20, 1, RegionKind::Segment});
        AllocRec a;
        a.allocNs = 0;
        a.freeNs = 50;
        a.address = 0x1000000;
        a.size = 512 << 10;
        a.regionId = 1;
        a.freed = true;
        ld.allocs.push_back(a);
        ld.maxAllocDuration = 50;
        ld.spans.push_back({0x1000000, 1 << 20, 0});
        ld.compactSize = 1 << 20;
        const QImage img = heatmapRaster(ld, {0, 100, 0, double(1 << 20)}, 4, 2);
        QCOMPARE(img.size(), QSize(4, 2));
        const QRgb full = occupancyColor(1.0).rgb(), fr = freeColor().rgb();
        QCOMPARE(img.pixel(0, 1), full);
        QCOMPARE(img.pixel(1, 1), full);
        QCOMPARE(img.pixel(2, 1), fr);
        QCOMPARE(img.pixel(3, 1), fr);
        for (int x = 0; x < 4; ++x)
            QCOMPARE(img.pixel(x, 0), fr);
        // Half a cell: the allocation ends at 37.5 ns, so column 1 (25..50 ns) is half covered:
        // occupancy 0.5 -> the ramp's middle colour (index 128 of 256).
        ld.allocs[0].freeNs = 37; // 12/25 = 0.48 of the column
        const QImage half = heatmapRaster(ld, {0, 100, 0, double(1 << 20)}, 4, 2);
        QCOMPARE(half.pixel(1, 1), occupancyColor(int(0.48 * 256) / 256.0).rgb());
        // Outside any region: the region now starts at 50 ns, so columns 0-1 have none at all.
        ld.regions[0].createNs = 50;
        ld.allocs[0].allocNs = 60;
        ld.allocs[0].freeNs = 100;
        const QImage out = heatmapRaster(ld, {0, 100, 0, double(1 << 20)}, 4, 2);
        QCOMPARE(out.pixel(0, 0), outsideColor().rgb());
        QCOMPARE(out.pixel(0, 1), outsideColor().rgb());
        QCOMPARE(out.pixel(3, 1), full);
        QCOMPARE(out.pixel(3, 0), fr);
    }

    void fragmentsKnownAnswer()
    {
        // Region [1000, 2000) with allocations [1100,1200) and [1500,1600) live at t=5:
        // fragments [1000,1100), [1200,1500), [1600,2000) -> sizes 100, 300, 400.
        LevelData ld;
        ld.regions.push_back({0, 10, 1000, 1000, 1, RegionKind::Segment});
        for (uint64_t addr : {1100ull, 1500ull}) {
            AllocRec a;
            a.allocNs = 1;
            a.freeNs = 9;
            a.address = addr;
            a.size = 100;
            a.regionId = 1;
            ld.allocs.push_back(a);
        }
        ld.maxAllocDuration = 8;
        const auto f = fragmentsAt(ld, 5);
        QCOMPARE(f.size(), size_t(3));
        QCOMPARE(f[0], std::make_pair(uint64_t(1000), uint64_t(100)));
        QCOMPARE(f[1], std::make_pair(uint64_t(1200), uint64_t(300)));
        QCOMPARE(f[2], std::make_pair(uint64_t(1600), uint64_t(400)));
        // Histogram: 100 -> bin 2^6, 300 -> 2^8, 400 -> 2^8.
        const auto h = fragmentHistogram(ld, 5);
        QCOMPARE(h.size(), size_t(2));
        QCOMPARE(h[0].log2lo, 6);
        QCOMPARE(h[0].count, int64_t(1));
        QCOMPARE(h[1].log2lo, 8);
        QCOMPARE(h[1].count, int64_t(2));
    }

    void sceneFromFixture()
    {
        const Scene& s = *scene_;
        QVERIFY(s.summary.synthetic);
        QCOMPARE(int(s.frames.size()), fstest::kFixtureFrames);
        const int li = s.defaultLevel();
        QVERIFY(li >= 0);
        const LevelData& ld = s.levels[size_t(li)];
        QCOMPARE(ld.level, Level::Framework);
        QCOMPARE(ld.regions.size(), size_t(5));
        // Five 64 MiB segments, 256 MiB apart: five spans on the compacted axis.
        QCOMPARE(ld.spans.size(), size_t(5));
        // At the first frame's start only the four segments exist, all free: four fragments of
        // 64 MiB; F = 1 - 64/256 = 0.75.
        const StateSample s0 = ld.stateAt(fstest::kFixtureBegin);
        QCOMPARE(s0.fragmentCount, 4.0);
        QCOMPARE(s0.reserved, 4.0 * 64 * 1024 * 1024);
        QCOMPARE(s0.fragRatio, 0.75);
        // Invariant at every sample: allocated (all inside regions here) + free = reserved.
        for (const auto& smp : ld.samples)
            QCOMPARE(smp.allocated + smp.freeInRegions, smp.reserved);
        // The replay's fragment count at a frame end matches a direct computation.
        const int64_t t = s.frame(17)->end;
        QCOMPARE(ld.stateAt(t).fragmentCount, double(fragmentsAt(ld, t).size()));
    }

    // Regions created (and released) at the same instant as the allocations inside them, as the
    // simulator and PyTorch snapshots emit them: the replay must still carve every allocation out
    // of its region. Known answer: at t = 1000 + 10i, regions 0..i exist (i+1 x 2 MiB) holding one
    // live 1 MiB block each except those already freed, so allocated + free = reserved and the
    // free bytes are exactly reserved - allocated.
    void simultaneousRegionAndAllocation()
    {
        const std::string path = dir_.filePath("simultaneous.fragscope").toStdString();
        {
            IngestOptions o;
            o.path = path;
            o.sourceKind = "test";
            Ingest in(o);
            in.begin();
            for (int i = 0; i < 200; ++i) {
                const uint64_t base = 0x7f0000000000ull + (uint64_t(i) << 22);
                const int64_t t = 1000 + 10 * i;
                Event r;
                r.type = EventType::RegionCreate;
                r.level = Level::Framework;
                r.time = t;
                r.address = base;
                r.size = 2 << 20;
                in.add(r);
                Event a = r;
                a.type = EventType::Alloc;
                a.size = 1 << 20;
                in.add(a);
                if (i % 2 == 1) { // freed and released together 5 ns later
                    Event f = a;
                    f.type = EventType::Free;
                    f.time = t + 5;
                    in.add(f);
                    Event d = r;
                    d.type = EventType::RegionDestroy;
                    d.time = t + 5;
                    in.add(d);
                }
            }
            in.end();
        }
        const auto scene = loadScene(path);
        QVERIFY(scene);
        const LevelData& ld = scene->levels[size_t(scene->defaultLevel())];
        for (const auto& smp : ld.samples)
            QCOMPARE(smp.allocated + smp.freeInRegions, smp.reserved);
        // At the last creation (i = 199, odd, not yet released): 100 even regions + region 199
        // live = 101 x 2 MiB reserved, 101 x 1 MiB allocated, 101 fragments of 1 MiB.
        const StateSample st = ld.stateAt(1000 + 10 * 199);
        QCOMPARE(st.reserved, 101.0 * (2 << 20));
        QCOMPARE(st.allocated, 101.0 * (1 << 20));
        QCOMPARE(st.freeInRegions, 101.0 * (1 << 20));
        QCOMPARE(st.fragmentCount, 101.0);
    }

    void collapsesAndRules()
    {
        // Default rules: coherence_score < 0.05 breaks at 17 (0.009) and 18 (0.03); 16 has
        // 0.124 (a healthy-looking score just above the rule) and does not.
        QCOMPARE(scene_->collapses.size(), size_t(1));
        QCOMPARE(scene_->collapses[0].firstFrame, int64_t(17));
        QCOMPARE(scene_->collapses[0].lastFrame, int64_t(18));
        // A stricter rule (coherence < 0.2) adds frame 16 to the same run: 16-18.
        Scene copy = *scene_;
        copy.applyRules({{"coherence_score", true, 0.2, true}});
        QCOMPARE(copy.collapses.size(), size_t(1));
        QCOMPARE(copy.collapses[0].firstFrame, int64_t(16));
        QCOMPARE(copy.collapses[0].lastFrame, int64_t(18));
        // The precursors of 17 include the fallback kernel that no earlier frame ran (the
        // engine reports it as a kernel-variant shift, the local ranking as a new variant).
        const auto p = scene_->precursors(17, scene_->defaultLevel());
        QVERIFY(!p.empty());
        bool sawKernel = false;
        for (const auto& x : p)
            sawKernel = sawKernel ||
                        ((x.kind == "kernel_variant_shift" || x.kind == "new_kernel_variant") &&
                         x.what.find("gemm_fallback_kernel") != std::string::npos);
        QVERIFY(sawKernel);
        // Frame 16 creates the fifth segment: a region_create precursor for frame 17's window.
        bool sawRegion = false;
        for (const auto& x : p)
            sawRegion = sawRegion || x.kind == "region_created";
        QVERIFY(sawRegion);
    }

    void realSnapshotFinalState()
    {
        // A real PyTorch snapshot from ../shared/data (CATALOGUE.md), imported by the CLI: the
        // replay's state at the end must equal the reference figures computed independently
        // from the pickle's final segments: decomfl.pickle reserved 1897922560 B, free
        // 883492352 B in 71 fragments, largest 155189248 B, F = 1 - 155189248/883492352 = 0.824346.
        const QString snap = fstest::dataDir() + "/pytorch-snapshots/decomfl.pickle";
        FSTEST_REQUIRE_DATA("pytorch-snapshots/decomfl.pickle");
        const QString out = dir_.filePath("decomfl.fragscope");
        const auto r = fstest::runCli({"import", snap, "-o", out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const auto scene = loadScene(out.toStdString());
        const int li = scene->defaultLevel();
        QVERIFY(li >= 0);
        const StateSample st = scene->levels[size_t(li)].stateAt(scene->timeEnd());
        QCOMPARE(st.reserved, 1897922560.0);
        QCOMPARE(st.freeInRegions, 883492352.0);
        QCOMPARE(st.fragmentCount, 71.0);
        QCOMPARE(st.largestFragment, 155189248.0);
        QVERIFY(std::abs(st.fragRatio - 0.824346) < 1e-6);
        // And its heatmap exports with real content.
        const QString png = dir_.filePath("decomfl.png");
        QString err;
        QVERIFY2(exportView(png, QSize(1200, 700), *scene, View::Heatmap, {}, &err),
                 qPrintable(err));
        QVERIFY(distinctColours(QImage(png)) >= 8);
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
