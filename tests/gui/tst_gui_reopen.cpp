// Reopening a session in the GUI: the loader hands out a first look built from the index the
// first open stored (not one allocation row read), then the complete scene (records read from
// the stored columns, OOMs diagnosed), and the views that need the records fill in. Offscreen.
#include "fixture.h"
#include "main_window.h"
#include "widgets/plot_widgets.h"

#include <QApplication>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace fs;

class TstGuiReopen : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        QCoreApplication::setOrganizationName(QStringLiteral("fragscope-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_gui_reopen"));
        QSettings().clear();
        qputenv("FRAGSCOPE_SETTINGS", dir_.filePath("settings.json").toLocal8Bit());
        fixture_ = dir_.filePath("fixture.fragscope");
        fstest::makeFixtureSession(fixture_.toStdString());
    }

    void reopenShowsAFirstLookWithoutReadingRows()
    {
        std::vector<analysis::HistogramBin> firstBins;
        {
            // First open: every row read, the index built and stored by the loader.
            gui::MainWindow w;
            w.show();
            w.openFile(fixture_);
            QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 60000);
            QVERIFY(!w.scene()->engine->loadInfo().rowsDeferred);
            QVERIFY(w.scene()->engine->loadInfo().allocationRowsRead > 0);
            QVERIFY(w.scene()->ooms);
            firstBins = w.histogram()->current();
            QVERIFY(!firstBins.empty());
        }
        gui::MainWindow w;
        w.show();
        QSignalSpy completed(w.loader(), &gui::SessionLoader::completed);
        bool firstLook = false, deferred = false;
        int64_t rowsAtFirstLook = -1;
        connect(w.loader(), &gui::SessionLoader::loaded, this,
                [&](const QString&, std::shared_ptr<const render::Scene> s) {
                    firstLook = s->firstLook;
                    deferred = s->engine->loadInfo().rowsDeferred;
                    rowsAtFirstLook = s->engine->loadInfo().allocationRowsRead;
                });
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 60000);
        QApplication::processEvents();
        QVERIFY(firstLook);
        QVERIFY(deferred);
        QCOMPARE(rowsAtFirstLook, int64_t(0)); // the first picture read no allocation row
        QCOMPARE(completed.count(), 1);
        // The complete scene: records from the stored columns (still no row read), OOMs
        // diagnosed, and the histogram equal to the first open's.
        const auto& s = *w.scene();
        QVERIFY(!s.firstLook);
        QVERIFY(s.ooms);
        QVERIFY(s.engine->loadInfo().rowsFromCache);
        QCOMPARE(s.engine->loadInfo().allocationRowsRead, int64_t(0));
        const auto bins = w.histogram()->current();
        QCOMPARE(bins.size(), firstBins.size());
        for (size_t i = 0; i < bins.size(); ++i) {
            QCOMPARE(bins[i].lo, firstBins[i].lo);
            QCOMPARE(bins[i].count, firstBins[i].count);
        }
    }

    void firstLookAnswersNothingInsteadOfWaiting()
    {
        // Before the records are read, a first-look scene's record queries return at once with
        // nothing (the GUI thread never waits for them); the engine's own query reads them.
        analysis::Engine::open(fixture_.toStdString()); // stores the index (if not yet)
        render::LoadProgress lp;
        lp.loadRows = false;
        auto scene =
            std::make_shared<render::Scene>(*render::loadScene(fixture_.toStdString(), lp));
        QVERIFY(scene->engine->loadInfo().rowsDeferred);
        scene->firstLook = true;
        const int ti = scene->defaultTrack();
        QVERIFY(!scene->recordsReady());
        QCOMPARE(scene->stateAt(ti, scene->timeEnd()).liveAllocations, int64_t(0));
        QVERIFY(scene->fragmentsAt(ti, scene->timeEnd()).empty());
        QVERIFY(!scene->recordsReady()); // nothing above read them
        scene->engine->loadRows();
        QVERIFY(scene->recordsReady());
        const analysis::State st = scene->stateAt(ti, scene->timeEnd());
        const auto& ld = scene->tracks[static_cast<size_t>(ti)];
        QCOMPARE(st.liveAllocations,
                 scene->engine->stateAt(ld.device, ld.level, scene->timeEnd()).liveAllocations);
    }
};

QTEST_MAIN(TstGuiReopen)
#include "tst_gui_reopen.moc"
