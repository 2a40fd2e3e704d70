// The GUI's compare mode (app/gui/compare_window.h) on two simulated seeds: it shows what
// fs::alloc::compareSessions computed (rows, overlaid plots with a linked x range) and reports a
// bad file instead of failing.
#include "compare_window.h"
#include "testutil.h"

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
        const fs::alloc::Comparison* c = w.comparison();
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
        // Linked zoom: changing one plot's x range moves the other.
        w.reservedPlot()->xAxis->setRange(1.0, 3.0);
        QCOMPARE(w.fragmentationPlot()->xAxis->range().lower, 1.0);
        QCOMPARE(w.fragmentationPlot()->xAxis->range().upper, 3.0);
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
