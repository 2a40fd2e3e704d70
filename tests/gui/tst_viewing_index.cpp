// analysis::storeViewingIndex (core: the engine builds, the store keeps) stores what the GUI's
// loader (render::loadScene) looks up at a reopen: the index and the allocation records (no
// allocation row is read), every track's timeline at the GUI's sampling, and the default
// track's level-of-detail grid; a session below the size rule is left as it was.
#include "core/analysis/viewing_index.h"
#include "core/store/debug_query.h"
#include "fixture.h"
#include "render/scene.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace fs;

class TstViewingIndex : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    std::string fixture_;

    std::string copyOfFixture(const char* name)
    {
        const QString to = dir_.filePath(name);
        QFile::remove(to);
        if (!QFile::copy(QString::fromStdString(fixture_), to)) return {};
        return to.toStdString();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        fixture_ = dir_.filePath("fixture.fragscope").toStdString();
        fstest::makeFixtureSession(fixture_);
    }

    void smallSessionIsLeftAlone()
    {
        // The fixture has a few hundred allocations, far below kIndexAtWriteAllocations (2 M):
        // its first open indexes it in well under a second, so the writer stores nothing.
        const std::string path = copyOfFixture("small.fragscope");
        QVERIFY(!path.empty());
        QVERIFY(!analysis::storeViewingIndex(path));
        QVERIFY(!store::debugQuery(Session::open(path)).hasTable("analysis_cache"));
    }

    void storedIndexIsWhatTheGuiReads()
    {
        const std::string path = copyOfFixture("stored.fragscope");
        QVERIFY(!path.empty());
        analysis::ViewingIndexOptions vo;
        vo.always = true;
        vo.previewFrom = 1; // the fixture's track is small: store its grid anyway
        std::vector<int> percents;
        vo.progress = [&](int p) { percents.push_back(p); };
        QVERIFY(analysis::storeViewingIndex(path, vo));
        QVERIFY(percents.size() >= 3);
        QCOMPARE(percents.front(), 0);
        QCOMPARE(percents.back(), 100);
        QVERIFY(std::is_sorted(percents.begin(), percents.end()));

        // The GUI's loader with its default sampling, as a first look (records not read).
        render::LoadProgress lp;
        lp.loadRows = false;
        const auto scene = render::loadScene(path, lp);
        const analysis::LoadInfo info = scene->engine->loadInfo();
        QVERIFY(info.indexCacheUsed);
        QVERIFY(info.rowsDeferred);
        QCOMPARE(info.allocationRowsRead, int64_t(0));
        QVERIFY(info.frameCacheUsed);
        // One timeline per track, each found stored (none recomputed).
        QVERIFY(!scene->tracks.empty());
        QCOMPARE(info.timelinesFromCache, static_cast<int64_t>(scene->tracks.size()));
        // The heatmap's first preview finds the default track's grid stored.
        const int ti = scene->defaultTrack();
        QVERIFY(ti >= 0);
        QVERIFY(scene->previewReady(ti));

        // What was stored is what a computation from the rows gives.
        analysis::LoadOptions fresh;
        fresh.useCache = false;
        const auto e = analysis::Engine::open(fixture_, fresh);
        for (const render::TrackEntry& ld : scene->tracks) {
            analysis::TimelineOptions to;
            to.device = ld.device;
            to.level = ld.level;
            to.step = std::max<int64_t>(1, (e->timeEnd() - e->timeBegin()) / 1200);
            const analysis::Timeline tl = e->timeline(to);
            QCOMPARE(ld.timeline->time, tl.time);
            QCOMPARE(ld.timeline->fragmentationRatio, tl.fragmentationRatio);
            QCOMPARE(ld.timeline->reserved, tl.reserved);
        }
    }
};

QTEST_MAIN(TstViewingIndex)
#include "tst_viewing_index.moc"
