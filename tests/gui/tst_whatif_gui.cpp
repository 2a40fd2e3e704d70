// File › What-if replay… in the main window (app/gui/whatif_controller.h): the dialog shows the
// ranking of the recorded settings and the default alternatives (core's, computed on a worker) and
// replays a chosen row in full; it parses other settings with the CLI's parser, the replay runs on
// a worker with progress and cancel, and the result opens as B in the compare window, labelled as a
// what-if replay with its fidelity verdict; the heatmaps zoom together. With FRAGSCOPE_SHOTS=DIR
// set, the dialog and the compare window are saved there as PNGs (for a look at them).
#include "compare_window.h"
#include "main_window.h"
#include "testutil.h"
#include "whatif_controller.h"
#include "whatif_dialog.h"
#include "widgets/heatmap_widget.h"

#include "core/alloc/whatif_rank.h"
#include "core/format.h"
#include "core/store/ingest.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <qcustomplot.h>

using namespace fs;

namespace {

void waitLoaded(gui::MainWindow& w)
{
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 60000);
    QApplication::processEvents();
}

void shot(QWidget* w, const char* name)
{
    const QByteArray dir = qgetenv("FRAGSCOPE_SHOTS");
    if (dir.isEmpty()) return;
    QApplication::processEvents();
    w->grab().save(QString::fromLocal8Bit(dir) + "/" + name);
}

} // namespace

class TstWhatIfGui : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString sim_, driverOnly_;
    QStringList errors_;

    std::unique_ptr<gui::MainWindow> window(const QString& path)
    {
        auto w = std::make_unique<gui::MainWindow>();
        w->setErrorReporter(
            [this](const QString& t, const QString& m) { errors_ << t + ": " + m; });
        w->resize(1400, 900);
        w->show();
        if (!path.isEmpty()) {
            w->openFile(path);
            waitLoaded(*w);
        }
        return w;
    }

private slots:
    void initTestCase()
    {
        sim_ = dir_.filePath("sim.fragscope");
        QCOMPARE(
            fstest::runCli({"simulate", "-o", sim_, "--frames", "6", "--steps", "3", "--seed", "3"})
                .exitCode,
            0);
        // A session with driver-level (cudaMalloc) allocations only: nothing a caching
        // allocator model could replay.
        driverOnly_ = dir_.filePath("driver.fragscope");
        IngestOptions o;
        o.path = driverOnly_.toStdString();
        o.sourceKind = "simulator";
        Ingest ing(o);
        ing.begin();
        Event a;
        a.type = EventType::Alloc;
        a.time = 10;
        a.address = 0x100000000;
        a.size = 1 << 20;
        a.level = Level::Driver;
        ing.add(a);
        Event f = a;
        f.type = EventType::Free;
        f.time = 20;
        ing.add(f);
        ing.end();
    }

    void disabledWithAReason()
    {
        auto w = window({});
        QAction* act = w->whatIf()->action();
        QVERIFY(!act->isEnabled());
        QVERIFY(act->toolTip().contains("Open a session"));
        QCOMPARE(act->shortcut(), QKeySequence(QStringLiteral("Ctrl+Shift+W")));
        w->openFile(driverOnly_);
        waitLoaded(*w);
        QVERIFY(w->scene());
        QVERIFY(!act->isEnabled());
        QVERIFY2(act->toolTip().contains("no framework-level"), qPrintable(act->toolTip()));
        w->openFile(sim_);
        waitLoaded(*w);
        QVERIFY(act->isEnabled());
    }

    // The dialog answers "which setting would have helped" by default, as `fragscope whatif
    // SESSION` does: core's recommendation and one-line fidelity statement, the ranked rows with
    // core's figures, the recommended row highlighted and selected. Compare replays it in full.
    void rankingByDefault()
    {
        auto w = window(sim_);
        gui::WhatIfController* c = w->whatIf();
        QSignalSpy ready(c, &gui::WhatIfController::rankingReady);
        c->action()->trigger();
        QPointer<gui::WhatIfDialog> d = c->dialog();
        QVERIFY(d);
        // On a worker: the dialog is up, with its progress, before the ranking arrives.
        QVERIFY(c->rankingRunning());
        QVERIFY(!d->ranking());
        QVERIFY(d->rankingProgress()->isVisible());
        QVERIFY(!d->rankingTable()->isVisible());
        QVERIFY2(ready.wait(120000), qPrintable(errors_.join("\n")));
        QVERIFY(d->rankingDone());
        QVERIFY(!d->rankingProgress()->isVisible());
        shot(d, "whatif-ranking.png");

        // The core's answer for the same session, computed here on its own.
        alloc::WhatIfOptions o;
        o.session = sim_.toStdString();
        o.rankAlternatives = true;
        const alloc::WhatIfResult core = alloc::whatIf(o);
        QVERIFY(core.recommended >= 0); // expandable segments lower this run's peak
        QCOMPARE(d->recommendationLabel()->text(), QString::fromStdString(core.recommendation));
        QVERIFY(d->recommendationLabel()->text().startsWith("With "));
        // One statement about fidelity, core's.
        const QString fid = d->fidelityLabel()->text();
        QCOMPARE(fid, "<b>Fidelity:</b> " +
                          QString::fromStdString(core.fidelity.summary).toHtmlEscaped());
        QVERIFY(fid.contains("exact: under the recorded settings"));

        QTableWidget* t = d->rankingTable();
        QVERIFY(t->isVisible());
        QCOMPARE(t->rowCount(), static_cast<int>(core.ranking.size()));
        QVERIFY(t->rowCount() >= 3); // the recorded settings and at least two alternatives
        auto bytes = [](uint64_t b) { return QString::fromStdString(humanBytes(b)); };
        int full = 0, modelOnly = 0;
        for (int i = 0; i < t->rowCount(); ++i) {
            const alloc::RankedRun& r = core.ranking[static_cast<size_t>(i)];
            auto cell = [&](int k) { return t->item(i, k)->text(); };
            const bool best = i == core.recommended;
            QCOMPARE(cell(0), QString::number(i + 1));
            QCOMPARE(cell(1), QString::fromStdString(alloc::rankedName(r)) +
                                  (best ? QString("  (recommended)") : QString()));
            QCOMPARE(cell(2), bytes(r.peakReserved));
            QCOMPARE(cell(3), bytes(r.finalReserved));
            QCOMPARE(cell(4), QString::number(r.segments));
            QCOMPARE(cell(5), QString::number(r.cudaMallocs));
            QCOMPARE(cell(6), QString::number(r.ooms));
            if (r.run >= 0) {
                ++full;
                const analysis::SummaryFigures& f =
                    core.runs[static_cast<size_t>(r.run)].devices.at(0).summary;
                QCOMPARE(cell(7), QString::number(f.meanFragmentationRatio, 'f', 4));
                QCOMPARE(cell(8), QString::number(f.maxFragmentationRatio, 'f', 4));
            } else {
                ++modelOnly;
                QCOMPARE(cell(7), QString("–"));
                QCOMPARE(cell(8), QString("–"));
            }
            QCOMPARE(cell(9), r.recorded
                                  ? QString("–")
                                  : QString::fromStdString(signedHumanBytes(r.vsRecordedPeak)));
            // The recommended row, and only it, is highlighted.
            QCOMPARE(t->item(i, 1)->font().bold(), best);
            QCOMPARE(t->item(i, 6)->background().style() != Qt::NoBrush, best);
        }
        QCOMPARE(full, 2); // the recorded settings and the recommended one, replayed in full
        QVERIFY(modelOnly > 0);
        // The recommended row is selected: Compare replays it.
        QCOMPARE(t->selectedItems().front()->row(), core.recommended);
        QVERIFY(d->compareButton()->isEnabled());
        const alloc::RankedRun& best = core.ranking[static_cast<size_t>(core.recommended)];
        QSignalSpy opened(c, &gui::WhatIfController::compareOpened);
        QTest::mouseClick(d->compareButton(), Qt::LeftButton);
        QVERIFY2(opened.wait(120000), qPrintable(errors_.join("\n")));
        auto* cw = opened.at(0).at(0).value<gui::CompareWindow*>();
        QSignalSpy loaded(cw, &gui::CompareWindow::loaded);
        QVERIFY(cw->comparison() || loaded.wait(60000));
        QCOMPARE(cw->comparison()->b.label,
                 "what-if: " + best.allocConf + " replay of sim.fragscope");
        QCOMPARE(cw->comparison()->b.figures.peakReservedBytes, best.peakReserved);
        // Bytes by call site at each peak: both replays hold memory, so some site shows it.
        QCOMPARE(cw->callSitesTable()->columnCount(), 4);
        QVERIFY(cw->callSitesTable()->rowCount() >= 1);
        QVERIFY(!cw->callSitesTable()->item(0, 0)->text().isEmpty());
        QCOMPARE(cw->comparison()->a.label,
                 std::string("what-if: recorded settings (PyTorch defaults) replay of "
                             "sim.fragscope"));
        cw->close();
        // Opened again, the dialog shows the ranking kept for the unchanged session at once.
        c->action()->trigger();
        QVERIFY(c->dialog());
        QVERIFY(!c->rankingRunning());
        QCOMPARE(c->dialog()->ranking(), c->ranking().get());
        QCOMPARE(c->dialog()->rankingTable()->rowCount(), static_cast<int>(core.ranking.size()));
        c->dialog()->reject();
        QVERIFY2(errors_.isEmpty(), qPrintable(errors_.join("\n")));
    }

    void dialogReplayOpensTheComparison()
    {
        auto w = window(sim_);
        gui::WhatIfController* c = w->whatIf();
        QVERIFY(c->action()->isEnabled());
        c->action()->trigger();
        gui::WhatIfDialog* d = c->dialog();
        QVERIFY(d);
        QVERIFY(d->isVisible());
        // The first preset that changes something is offered.
        QCOMPARE(d->confEdit()->text(), QString("expandable_segments:True"));
        shot(d, "whatif-dialog.png");
        // A typo is caught by the CLI's parser before anything runs.
        d->confEdit()->clear();
        QTest::keyClicks(d->confEdit(), "max_split_size_mb:lots");
        QVERIFY(!d->runButton()->isEnabled());
        QVERIFY(d->errorLabel()->text().contains("max_split_size_mb"));
        d->confEdit()->clear();
        QTest::keyClicks(d->confEdit(), "max_split_size_mb:128");
        QVERIFY(d->runButton()->isEnabled());
        QVERIFY(d->errorLabel()->text().isEmpty());
        QSignalSpy opened(c, &gui::WhatIfController::compareOpened);
        QSignalSpy progress(c, &gui::WhatIfController::progress);
        QTest::mouseClick(d->runButton(), Qt::LeftButton);
        QVERIFY(c->running());
        QVERIFY(!c->action()->isEnabled()); // one replay at a time
        QVERIFY2(opened.wait(120000), qPrintable(errors_.join("\n")));
        QVERIFY(!progress.isEmpty());
        QVERIFY(!c->running());
        QVERIFY(c->action()->isEnabled());
        auto* cw = opened.at(0).at(0).value<gui::CompareWindow*>();
        QVERIFY(cw);
        QSignalSpy loaded(cw, &gui::CompareWindow::loaded);
        QVERIFY(cw->comparison() || loaded.wait(60000));
        QVERIFY(cw->comparison());
        const analysis::Comparison& cmp = *cw->comparison();
        // A is the replay under the recorded settings, B the what-if: model against model, both
        // labelled as replays, never as measurements. The real run is the third, thin curve.
        QCOMPARE(cmp.a.label, std::string("what-if: recorded settings (PyTorch defaults) replay of "
                                          "sim.fragscope"));
        QVERIFY(cmp.a.whatIf);
        QCOMPARE(cmp.b.label,
                 std::string("what-if: max_split_size_mb:128 replay of sim.fragscope"));
        QVERIFY(cmp.b.whatIf);
        QVERIFY(cmp.b.synthetic);
        QVERIFY(cw->titleB()->text().contains("what-if: max_split_size_mb:128 replay of "
                                              "sim.fragscope"));
        QVERIFY(cw->titleB()->text().contains("not measured"));
        QVERIFY(cw->titleA()->text().contains("what-if: recorded settings"));
        QVERIFY(cw->windowTitle().startsWith("What-if replay of sim.fragscope"));
        QVERIFY(cw->windowTitle().contains("against the replay under the recorded settings"));
        const analysis::Comparison* real = cw->referenceComparison();
        QVERIFY(real);
        QCOMPARE(QFileInfo(QString::fromStdString(real->b.path)).fileName(),
                 QString("sim.fragscope"));
        QVERIFY(!real->b.whatIf);
        QCOMPARE(cw->reservedPlot()->graphCount(), 3);
        QCOMPARE(cw->reservedPlot()->graph(2)->name(), QString("real run (measured)"));
        QCOMPARE(cw->reservedPlot()->graph(2)->data()->size(), int(real->rows.size()));
        QCOMPARE(cw->summaryTable()->columnCount(), 5);
        // The recorded replay is exact here: A's curve is the real run's.
        for (size_t k = 0; k < real->rows.size(); ++k)
            QCOMPARE(real->rows[k].a.reserved, real->rows[k].b.reserved);
        // The fidelity verdict: a simulated run is complete and reproduced exactly.
        QVERIFY(cw->whatIf());
        QVERIFY(cw->whatIf()->fidelity.reproduced);
        QVERIFY(cw->fidelityLabel()->isVisible());
        const QString fid = cw->fidelityLabel()->text();
        QVERIFY2(fid.contains("Trace: complete"), qPrintable(fid));
        QVERIFY(fid.contains("reproduces the real run"));
        QVERIFY(fid.contains("not measured"));
        QVERIFY(fid.contains("A is the replay under the recorded settings"));
        QVERIFY(fid.contains("reproduces the real run at every segment event"));
        // Both heatmaps show their session.
        QVERIFY(cw->heatmapA()->track() >= 0);
        QVERIFY(cw->heatmapB()->track() >= 0);
        QTRY_VERIFY_WITH_TIMEOUT(cw->heatmapB()->isRefined(), 30000);
        shot(cw, "whatif-compare.png");

        // Zooming A's heatmap zooms B's to the same frames, and the plots follow.
        const render::Viewport full = cw->heatmapA()->viewport();
        const int64_t span = full.t1 - full.t0;
        render::Viewport z = full;
        z.t0 = full.t0 + span / 4;
        z.t1 = full.t0 + span / 2;
        cw->heatmapA()->setViewport(z);
        const render::Viewport a = cw->heatmapA()->viewport();
        const render::Viewport b = cw->heatmapB()->viewport();
        // The replay keeps the recorded times and frames: the same instants on both sides.
        QVERIFY(std::abs(b.t0 - a.t0) <= 1);
        QVERIFY(std::abs(b.t1 - a.t1) <= 1);
        QCOMPARE(cw->reservedPlot()->xAxis->range().lower, cw->axis(0).toX(a.t0));
        QCOMPARE(cw->fragmentationPlot()->xAxis->range().upper, cw->axis(0).toX(a.t1));
        // And the other way round: B's heatmap moves A's.
        render::Viewport zb = b;
        zb.t0 = full.t0 + span / 8;
        zb.t1 = full.t0 + span / 3;
        cw->heatmapB()->setViewport(zb);
        QVERIFY(std::abs(cw->heatmapA()->viewport().t0 - zb.t0) <= 1);
        QVERIFY(std::abs(cw->heatmapA()->viewport().t1 - zb.t1) <= 1);
        shot(cw, "whatif-compare-zoomed.png");
        QVERIFY2(errors_.isEmpty(), qPrintable(errors_.join("\n")));
    }

    // Real snapshots: a complete trace is reproduced and says so; an incomplete one (its ring
    // buffer starts after 447 blocks were allocated) says it is not a replay of the whole run,
    // in the warning frame, whatever settings were asked for. flexgen-oom is incomplete (460
    // blocks before the trace) although the replay matches its traced part: its frame said both
    // "reproduces the real run" and "not a replay of the whole run" (issue 50); now only the
    // latter.
    void realTraceVerdicts_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<bool>("complete");
        QTest::addColumn<bool>("reproduced");
        QTest::newRow("decomfl") << "decomfl.pickle" << true << true;
        QTest::newRow("bcrafton") << "cs336-bcrafton.pickle" << false << false;
        QTest::newRow("flexgen-oom") << "flexgen-oom-v2.0-format.pickle" << false << true;
    }
    void realTraceVerdicts()
    {
        QFETCH(QString, file);
        QFETCH(bool, complete);
        QFETCH(bool, reproduced);
        FSTEST_REQUIRE_DATA("pytorch-snapshots/" + file);
        const QString session = dir_.filePath(QFileInfo(file).completeBaseName() + ".fragscope");
        if (!QFileInfo::exists(session))
            QCOMPARE(fstest::runCli({"import", fstest::dataDir() + "/pytorch-snapshots/" + file,
                                     "-o", session})
                         .exitCode,
                     0);
        auto w = window(session);
        gui::WhatIfController* c = w->whatIf();
        QVERIFY2(c->action()->isEnabled(), qPrintable(c->disabledReason()));
        QSignalSpy opened(c, &gui::WhatIfController::compareOpened);
        alloc::RunSpec spec;
        spec.label = "expandable_segments:True";
        spec.config = alloc::Config::parse(spec.label);
        c->start(spec);
        QVERIFY2(opened.wait(120000), qPrintable(errors_.join("\n")));
        auto* cw = opened.at(0).at(0).value<gui::CompareWindow*>();
        QSignalSpy loaded(cw, &gui::CompareWindow::loaded);
        QVERIFY(cw->comparison() || loaded.wait(60000));
        const QString fid = cw->fidelityLabel()->text();
        QCOMPARE(cw->whatIf()->fidelity.complete, complete);
        QCOMPARE(cw->whatIf()->fidelity.reproduced, reproduced);
        QVERIFY2(fid.contains(complete ? "Trace: complete" : "<b>incomplete</b>"), qPrintable(fid));
        // One statement about fidelity (issue 50: a partial trace's frame said both "reproduces
        // the real run" and "not a replay of the whole run").
        QVERIFY2(fid.contains(complete ? "<b>exact: "
                                       : "<b>partial trace, so the model is not "
                                         "checked against the whole run"),
                 qPrintable(fid));
        if (!complete) QVERIFY2(!fid.contains("reproduces the real run"), qPrintable(fid));
        QVERIFY(cw->fidelityLabel()->styleSheet().contains(complete ? "#e8f3e8" : "#fff3d6"));
        QVERIFY(cw->titleB()->text().contains("what-if: expandable_segments:True replay of " +
                                              QFileInfo(session).fileName()));
        QTRY_VERIFY_WITH_TIMEOUT(cw->heatmapB()->isRefined(), 30000);
        shot(cw, qPrintable("whatif-compare-" + QFileInfo(file).completeBaseName() + ".png"));
    }

    // The recorded settings alone check the model: B (the replay) against the real run A, no
    // third curve.
    void recordedSettingsAloneChecksTheModel()
    {
        auto w = window(sim_);
        gui::WhatIfController* c = w->whatIf();
        QSignalSpy opened(c, &gui::WhatIfController::compareOpened);
        alloc::RunSpec spec;
        spec.recordedConfig = true;
        c->start(spec);
        QVERIFY2(opened.wait(120000), qPrintable(errors_.join("\n")));
        auto* cw = opened.at(0).at(0).value<gui::CompareWindow*>();
        QSignalSpy loaded(cw, &gui::CompareWindow::loaded);
        QVERIFY(cw->comparison() || loaded.wait(60000));
        QCOMPARE(QFileInfo(QString::fromStdString(cw->comparison()->a.path)).fileName(),
                 QString("sim.fragscope"));
        QVERIFY(cw->comparison()->b.whatIf);
        QVERIFY(!cw->referenceComparison());
        QCOMPARE(cw->reservedPlot()->graphCount(), 2);
        QVERIFY(cw->windowTitle().contains("the model against the real run"));
        QVERIFY(!cw->fidelityLabel()->text().contains("A is the replay"));
    }

    // File › Compare with…: what cannot be read is reported by the main window, naming the
    // file, and its compare window closes instead of standing empty.
    void compareWithReportsWhatItCannotRead()
    {
        auto w = window(sim_);
        const QString junk = dir_.filePath("notes.txt");
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a trace\n");
        f.close();
        errors_.clear();
        QPointer<gui::CompareWindow> cw = w->compareWith(sim_, junk);
        QVERIFY(cw);
        QTRY_VERIFY_WITH_TIMEOUT(!errors_.isEmpty(), 60000);
        QVERIFY2(errors_.front().startsWith("Cannot compare: ") && errors_.front().contains(junk),
                 qPrintable(errors_.front()));
        QTRY_VERIFY_WITH_TIMEOUT(cw.isNull(), 10000); // closed (deleted on close)
        errors_.clear();
    }

    void cancelLeavesNothing()
    {
        auto w = window(sim_);
        gui::WhatIfController* c = w->whatIf();
        QSignalSpy cancelled(c, &gui::WhatIfController::cancelled);
        QSignalSpy opened(c, &gui::WhatIfController::compareOpened);
        alloc::RunSpec spec;
        spec.config = alloc::Config::parse("expandable_segments:True");
        c->start(spec);
        QVERIFY(c->progressDialog());
        c->cancel();
        QVERIFY(cancelled.wait(60000));
        QCOMPARE(opened.count(), 0);
        QVERIFY(!c->running());
        QVERIFY(c->action()->isEnabled());
        QVERIFY2(errors_.isEmpty(), qPrintable(errors_.join("\n")));
    }
};

QTEST_MAIN(TstWhatIfGui)
#include "tst_whatif_gui.moc"
