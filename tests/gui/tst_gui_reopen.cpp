// Reopening a session in the GUI: the loader hands out a first look built from the index the
// first open stored (not one allocation row read), then the complete scene (records read from
// the stored columns, OOMs diagnosed), and the views that need the records fill in. Offscreen.
#include "fixture.h"
#include "main_window.h"
#include "widgets/cursor_bar.h"
#include "widgets/heatmap_widget.h"
#include "widgets/plot_widgets.h"

#include <QApplication>
#include <QComboBox>
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

    void firstOpenPreviewsTheHeatmap()
    {
        // A session without its stored index: the heatmap shows the engine's level-of-detail
        // picture as soon as the records are read, before the first look; the first look then
        // takes over with the same grid. A cancelled load puts back what was shown before.
        const QString path = dir_.filePath("preview.fragscope");
        fstest::makeFixtureSession(path.toStdString());
        {
            gui::MainWindow w;
            w.show();
            w.loader()->setPreviewFrom(1);
            std::shared_ptr<const render::Scene> preview;
            bool heatmapShowedIt = false, noteSaidSo = false, barNamedTheFile = false;
            int previewsAtFirstLook = -1;
            QSignalSpy previewed(w.loader(), &gui::SessionLoader::previewed);
            connect(w.loader(), &gui::SessionLoader::previewed, this,
                    [&](const QString&, std::shared_ptr<const render::Scene> s) {
                        preview = s;
                        heatmapShowedIt = w.heatmap()->scene() == s;
                        noteSaidSo = w.heatmap()->note().contains(QStringLiteral("First look"));
                        // The bar above the heatmap names the file, not "No session.".
                        barNamedTheFile =
                            w.cursorBar()->text().contains(QStringLiteral("Loading")) &&
                            w.cursorBar()->text().contains(QFileInfo(path).fileName());
                    });
            connect(w.loader(), &gui::SessionLoader::loaded, this,
                    [&] { previewsAtFirstLook = static_cast<int>(previewed.count()); });
            w.openFile(path);
            QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 60000);
            QCOMPARE(previewsAtFirstLook, 1); // before the first look
            QVERIFY(preview && !preview->engine);
            QVERIFY(heatmapShowedIt);
            QVERIFY(noteSaidSo);
            QVERIFY(barNamedTheFile);
            QVERIFY(w.heatmap()->scene()->engine); // the first look took over
            QCOMPARE(w.heatmap()->scene()->engine, w.scene()->engine);
            QVERIFY(w.heatmap()->note().isEmpty());
            // The preview's picture is the engine's: one grid.
            const int ti = w.scene()->defaultTrack();
            const auto& ld = w.scene()->tracks[static_cast<size_t>(ti)];
            QCOMPARE(preview->tracks.front().device, ld.device);
            QCOMPARE(preview->tracks.front().level, ld.level);
            const auto a = preview->heatmapPreview(0, w.scene()->timeBegin(), w.scene()->timeEnd(),
                                                   0, ld.compactSize(), 200, 100);
            const auto b = w.scene()->heatmapPreview(
                ti, w.scene()->timeBegin(), w.scene()->timeEnd(), 0, ld.compactSize(), 200, 100);
            QVERIFY(!a.occupancy.empty());
            QVERIFY(a.occupancy == b.occupancy);
            // Reopened (the loader stored the index and the grid): nothing to preview.
            w.loader()->wait();
            previewed.clear();
            w.openFile(path);
            QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 60000);
            QCOMPARE(previewed.count(), 0);
        }
        {
            // A track picked while a load previews: the heatmap leaves the preview (its note
            // too) for the session the other views show.
            gui::MainWindow w;
            w.show();
            w.openFile(fixture_);
            QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 60000);
            w.loader()->wait();
            const QString third = dir_.filePath("preview-track.fragscope");
            fstest::makeFixtureSession(third.toStdString());
            w.loader()->setPreviewFrom(1);
            auto* box = w.findChild<QComboBox*>(QStringLiteral("trackBox"));
            QVERIFY(box);
            QVERIFY(box->count() >= 1);
            bool picked = false, previewShown = false, backToScene = false, noteCleared = false;
            connect(w.loader(), &gui::SessionLoader::previewed, this, [&] {
                previewShown = w.heatmap()->scene() != w.scene();
                // As a user picks the track again from the list (activated(), which a
                // programmatic change does not emit).
                emit box->activated(box->currentIndex());
                backToScene = w.heatmap()->scene() == w.scene(); // the first session's
                noteCleared = w.heatmap()->note().isEmpty();
                picked = true;
            });
            w.openFile(third);
            QTRY_VERIFY_WITH_TIMEOUT(picked, 60000);
            QVERIFY(previewShown);
            QVERIFY(backToScene);
            QVERIFY(noteCleared);
            w.loader()->cancel();
            w.loader()->wait();
        }
        const QString again = dir_.filePath("preview-cancel.fragscope");
        fstest::makeFixtureSession(again.toStdString());
        gui::MainWindow w;
        w.show();
        w.loader()->setPreviewFrom(1);
        bool cancelled = false;
        connect(w.loader(), &gui::SessionLoader::previewed, this, [&] {
            w.loader()->cancel();
            cancelled = true;
        });
        w.openFile(again);
        QTRY_VERIFY_WITH_TIMEOUT(cancelled, 60000);
        w.loader()->wait();
        QApplication::processEvents();
        QVERIFY(!w.scene());
        QVERIFY(!w.heatmap()->scene()); // back to the empty window it was
        QVERIFY(w.heatmap()->note().isEmpty());
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
