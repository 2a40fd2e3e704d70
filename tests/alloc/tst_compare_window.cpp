// The GUI's compare mode (app/gui/compare_window.h) on two simulated seeds: it shows what
// fs::analysis::compareSessions computed (rows, overlaid plots with a linked x range, heatmaps side
// by side zooming with them) and reports a bad file instead of failing.
#include "compare_window.h"
#include "testutil.h"
#include "widgets/heatmap_widget.h"

#include <QLabel>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <qcustomplot.h>

class TstCompareWindow : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString a_, b_;

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

    void badFileIsReported()
    {
        const QString junk = dir_.filePath("junk.fragscope");
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("junk");
        f.close();
        fs::gui::CompareWindow w(a_, junk);
        QSignalSpy spy(&w, &fs::gui::CompareWindow::loaded);
        QVERIFY(spy.wait(60000));
        QVERIFY(!spy.at(0).at(0).toBool());
        QVERIFY(spy.at(0).at(1).toString().contains("junk.fragscope"));
        QVERIFY(!w.comparison());
    }
};

QTEST_MAIN(TstCompareWindow)
#include "tst_compare_window.moc"
