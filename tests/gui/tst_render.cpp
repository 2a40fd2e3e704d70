// fragscope_render: known-answer rasters, scene loading, collapse rules, and every view exported
// to PNG, SVG and PDF (by the library and by `fragscope export`).
#include "core/ingest.h"
#include "fixture.h"
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
        // 0.124 (the seed's value before the collapse) and does not.
        QCOMPARE(scene_->collapses.size(), size_t(1));
        QCOMPARE(scene_->collapses[0].firstFrame, int64_t(17));
        QCOMPARE(scene_->collapses[0].lastFrame, int64_t(18));
        // A stricter rule (coherence < 0.2) adds frame 16 to the same run: 16-18.
        Scene copy = *scene_;
        copy.applyRules({{"coherence_score", true, 0.2, true}});
        QCOMPARE(copy.collapses.size(), size_t(1));
        QCOMPARE(copy.collapses[0].firstFrame, int64_t(16));
        QCOMPARE(copy.collapses[0].lastFrame, int64_t(18));
        // The precursors of 17 include the fallback kernel that no earlier frame ran.
        const auto p = scene_->precursors(17, scene_->defaultLevel());
        QVERIFY(!p.empty());
        bool sawKernel = false;
        for (const auto& x : p)
            sawKernel = sawKernel || (x.kind == "new_kernel_variant" &&
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
        QVERIFY2(QFile::exists(snap), qPrintable(snap + " missing: set FRAGSCOPE_DATA"));
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
