// The GUI's compare mode (app/gui/compare_window.h) on two simulated seeds: it shows what
// fs::analysis::compareSessions computed (rows, overlaid plots drawn as steps with a linked x
// range, heatmaps side by side zooming with them, in one time unit), takes what File › Open
// takes, ends a shorter run where its data ends, draws no borrowed collapses on a what-if's
// heatmap, a third session as a thin curve, and reports a bad file instead of failing.
#include "compare_window.h"
#include "core/format.h"
#include "core/store/ingest.h"
#include "testutil.h"
#include "widgets/heatmap_widget.h"

#include <QLabel>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <qcustomplot.h>

class TstCompareWindow : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString a_, b_;

    QString tight_; // 30 GiB: frames collapse (the simulator's toy coherence model)

    static void waitLoaded(fs::gui::CompareWindow& w, bool ok = true)
    {
        QSignalSpy spy(&w, &fs::gui::CompareWindow::loaded);
        QVERIFY(spy.wait(120000));
        QCOMPARE(spy.at(0).at(0).toBool(), ok);
    }

    // A hand-built session of `end` ns without frames: a 20 MiB segment from 0, 4 MiB allocated
    // until `end`.
    QString timed(const char* name, int64_t end)
    {
        const QString path = dir_.filePath(name);
        fs::IngestOptions o;
        o.path = path.toStdString();
        o.sourceKind = "simulator";
        fs::Ingest ing(o);
        ing.begin();
        for (auto [t, type] :
             {std::pair{int64_t{0}, fs::EventType::RegionCreate},
              std::pair{int64_t{0}, fs::EventType::Alloc}, std::pair{end, fs::EventType::Free}}) {
            fs::Event e;
            e.type = type;
            e.time = t;
            e.address = 0x100000000;
            e.size = type == fs::EventType::RegionCreate ? 20 << 20 : 4 << 20;
            e.requestedSize = type == fs::EventType::Alloc ? e.size : 0;
            e.level = fs::Level::Framework;
            ing.add(e);
        }
        ing.end();
        return path;
    }

private slots:
    void initTestCase()
    {
        a_ = dir_.filePath("a.fragscope");
        b_ = dir_.filePath("b.fragscope");
        for (const auto& [path, seed] : {std::pair{a_, "3"}, std::pair{b_, "4"}})
            QCOMPARE(fstest::runCli(
                         {"simulate", "-o", path, "--frames", "5", "--steps", "3", "--seed", seed})
                         .exitCode,
                     0);
        tight_ = dir_.filePath("tight.fragscope");
        QCOMPARE(fstest::runCli({"simulate", "-o", tight_, "--frames", "6", "--steps", "3",
                                 "--capacity", "30G"})
                     .exitCode,
                 0);
    }

    void showsTheComparison()
    {
        fs::gui::CompareWindow w(a_, b_);
        QSignalSpy spy(&w, &fs::gui::CompareWindow::loaded);
        QVERIFY(spy.wait(60000));
        QVERIFY(spy.at(0).at(0).toBool());
        const fs::analysis::Comparison* c = w.comparison();
        QVERIFY(c);
        QVERIFY(c->byFrame);
        // One table row and one plot point per frame; A and B overlaid.
        QCOMPARE(w.rowsTable()->rowCount(), 5);
        QCOMPARE(w.reservedPlot()->graphCount(), 2);
        QCOMPARE(w.fragmentationPlot()->graphCount(), 2);
        QCOMPARE(w.reservedPlot()->graph(1)->data()->size(), 5);
        // The plotted value is the comparison's (GiB): frame 0 of B.
        QCOMPARE(w.reservedPlot()->graph(1)->data()->at(0)->value,
                 static_cast<double>(c->rows[0].b.reserved) / double(1ull << 30));
        // Reserved bytes and F change in steps: drawn as steps, not ramps.
        for (auto* p : {w.reservedPlot(), w.fragmentationPlot()})
            for (int g = 0; g < p->graphCount(); ++g)
                QCOMPARE(p->graph(g)->lineStyle(), QCPGraph::lsStepLeft);
        // Both heatmaps read time in one unit, the longer session's.
        QVERIFY(w.heatmapA()->unitSpan() > 0);
        QCOMPARE(w.heatmapA()->unitSpan(), w.heatmapB()->unitSpan());
        // Linked zoom: changing one plot's x range moves the other, and both heatmaps to the
        // same frames: x = 1 is frame 1's end, x = 3 frame 3's end, on each side's own clock.
        w.reservedPlot()->xAxis->setRange(1.0, 3.0);
        QCOMPARE(w.fragmentationPlot()->xAxis->range().lower, 1.0);
        QCOMPARE(w.fragmentationPlot()->xAxis->range().upper, 3.0);
        QVERIFY(w.axis(0).frames() && w.axis(1).frames());
        for (auto* h : {w.heatmapA(), w.heatmapB()}) {
            const auto& frames = h == w.heatmapA() ? w.axis(0) : w.axis(1);
            QCOMPARE(h->viewport().t0, frames.toTime(1.0));
            QCOMPARE(h->viewport().t1, frames.toTime(3.0));
        }
        // Zooming A's heatmap zooms B's to the same frames (the seeds' frames differ in time).
        fs::render::Viewport z = w.heatmapA()->viewport();
        z.t0 = w.axis(0).toTime(2.0);
        z.t1 = w.axis(0).toTime(4.0);
        w.heatmapA()->setViewport(z);
        QCOMPARE(w.heatmapB()->viewport().t0, w.axis(1).toTime(2.0));
        QCOMPARE(w.heatmapB()->viewport().t1, w.axis(1).toTime(4.0));
        QVERIFY(std::abs(w.reservedPlot()->xAxis->range().lower - 2.0) < 1e-6);
        // Two recordings: neither is a what-if, no verdict is shown.
        QVERIFY(!w.fidelityLabel()->isVisible());
        QVERIFY(!w.titleB()->text().contains("what-if"));
    }

    // Aligned by time, a shorter run ends where its data ends: A spans 1000 ns, B 400 ns; rows
    // every 10 ns (100 rows); B's curve has values up to 400 ns and gaps (NaN) after, never its
    // last value repeated; the table shows "–". Both sides in ns, and B's heatmap shows A's
    // time range even past its own end.
    void shorterRunEndsWhereItsDataEnds()
    {
        fs::gui::CompareWindow w(timed("long.fragscope", 1000), timed("short.fragscope", 400));
        waitLoaded(w);
        QVERIFY(!w.comparison()->byFrame);
        QCOMPARE(w.timeUnit(), QString("ns"));
        QVERIFY(w.reservedPlot()->xAxis->label().contains("(ns)"));
        const auto& b = *w.reservedPlot()->graph(1)->data();
        int present = 0;
        for (int k = 0; k < b.size(); ++k) {
            const double x = b.at(k)->key, v = b.at(k)->value;
            QCOMPARE(std::isnan(v), x > 400);
            present += std::isnan(v) ? 0 : 1;
        }
        QCOMPARE(present, 40);
        QCOMPARE(w.rowsTable()->item(99, 2)->text(), QString("–"));
        QCOMPARE(w.rowsTable()->item(99, 1)->text(), QString("20.00 MiB"));
        w.reservedPlot()->xAxis->setRange(0, 1000);
        QCOMPARE(w.heatmapB()->viewport().t1 - w.heatmapB()->viewport().t0, int64_t(1000));
    }

    // Compare with… takes what Open takes: a PyTorch snapshot is imported for viewing first.
    void takesWhatOpenTakes()
    {
        const QString generated = fstest::writeSnapshotFixtures(dir_.path());
        QVERIFY2(generated.isEmpty(), qPrintable(generated));
        fs::gui::CompareWindow w(a_, dir_.filePath("bursts.pickle"));
        waitLoaded(w);
        QVERIFY(w.comparison()->b.path.ends_with(".fragscope"));
        // Its default track, device 0: x, y, z and k's segments, 30 + 40 + 50 + 2 MiB at most.
        QCOMPARE(w.comparison()->b.device, 0u);
        QCOMPARE(w.comparison()->b.figures.peakReservedBytes, uint64_t(122) << 20);
    }

    // A what-if replay's heatmap draws none of the recorded run's collapses (its frames carry
    // the recorded run's metrics, not its own); the recorded run's heatmap keeps them. With a
    // third session, its curve is drawn thin beside A and B and its column is in the summary.
    void whatIfDrawsNoBorrowedCollapsesAndAThirdCurve()
    {
        const QString rep = dir_.filePath("tight-replay.fragscope");
        QCOMPARE(fstest::runCli({"whatif", tight_, "-o", rep}).exitCode, 0);
        fs::gui::CompareWindow w(tight_, rep, nullptr, b_);
        waitLoaded(w);
        QVERIFY(!w.scene(0)->collapses.empty());
        QVERIFY(w.scene(1)->collapses.empty());
        QCOMPARE(w.scene(1)->frames.size(), w.scene(0)->frames.size());
        QVERIFY(w.referenceComparison());
        QCOMPARE(w.reservedPlot()->graphCount(), 3);
        QCOMPARE(w.fragmentationPlot()->graph(2)->pen().widthF(), 1.0);
        QCOMPARE(w.summaryTable()->columnCount(), 5);
        QCOMPARE(w.summaryTable()->item(0, 4)->text(),
                 QString::fromStdString(
                     fs::humanBytes(w.referenceComparison()->b.figures.peakReservedBytes)));
    }

    // The axis mapping, worked by hand: frames 0, 1, 2 end at 100, 200, 400 ns. x = 0.5 is half
    // way from frame 0's end to frame 1's (150 ns); x = 1.5 -> 300; past the ends the end
    // segments' slopes go on: x = 3 -> 600, x = -1 -> 0. Without frames, x is seconds from the
    // start. Ends that do not grow with the index fall back to seconds.
    void axisMapping()
    {
        using fs::gui::CompareAxis;
        const CompareAxis f = CompareAxis::byFrame({{1, 200}, {0, 100}, {2, 400}}, 50);
        QVERIFY(f.frames());
        QCOMPARE(f.toTime(0.5), int64_t(150));
        QCOMPARE(f.toTime(1.5), int64_t(300));
        QCOMPARE(f.toTime(3.0), int64_t(600));
        QCOMPARE(f.toTime(-1.0), int64_t(0));
        QCOMPARE(f.toX(300), 1.5);
        QCOMPARE(f.toX(50), -0.5);
        const CompareAxis t = CompareAxis::byTime(1'000'000'000);
        QCOMPARE(t.toX(3'500'000'000), 2.5);
        QCOMPARE(t.toTime(0.25), int64_t(1'250'000'000));
        const CompareAxis bad = CompareAxis::byFrame({{0, 300}, {1, 200}}, 0);
        QVERIFY(!bad.frames());
        QCOMPARE(bad.toX(2'000'000'000), 2.0);
    }

    // What cannot be read, a damaged session or a file that is no trace, is named, and nothing
    // but the error is shown: no empty panes, no bare headers.
    void badFileIsReported_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QByteArray>("content");
        QTest::newRow("damaged session") << "junk.fragscope" << QByteArray("junk");
        QTest::newRow("no trace") << "notes.txt" << QByteArray("not a trace\n");
    }
    void badFileIsReported()
    {
        QFETCH(QString, name);
        QFETCH(QByteArray, content);
        const QString junk = dir_.filePath(name);
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(content);
        f.close();
        fs::gui::CompareWindow w(a_, junk);
        QSignalSpy spy(&w, &fs::gui::CompareWindow::loaded);
        QVERIFY(spy.wait(60000));
        QVERIFY(!spy.at(0).at(0).toBool());
        QVERIFY2(spy.at(0).at(1).toString().contains(name), qPrintable(spy.at(0).at(1).toString()));
        QVERIFY(!w.comparison());
        QVERIFY(!w.rowsTable()->isVisibleTo(&w));
        QVERIFY(!w.summaryTable()->isVisibleTo(&w));
    }
};

QTEST_MAIN(TstCompareWindow)
#include "tst_compare_window.moc"
