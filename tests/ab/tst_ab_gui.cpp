// The study view (app/gui/study_window.h) on a study written by `fragscope ab` on gen_frames.py:
// a row per collapse with its verdict, a curve per run, every run's frame of the selected
// collapse from the thumbnails, and a clear error for a folder that is no study.
#include "testutil.h"

#include "study_window.h"

#include <QComboBox>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <qcustomplot.h>

class TstAbGui : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString study_;

private slots:
    void initTestCase()
    {
        study_ = dir_.filePath("study");
        const auto r =
            fstest::runCli({"ab", "-o", study_, "--arms", "expandable", "--", "python3",
                            QStringLiteral(FRAGSCOPE_SOURCE_DIR) + "/tests/ab/gen_frames.py",
                            "--frames", "12", "--alloc-break", "4", "--content-break", "8"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    void showsTheStudy()
    {
        QCOMPARE(fs::gui::StudyWindow::studyFolder(study_ + "/study.json"), study_);
        QCOMPARE(fs::gui::StudyWindow::studyFolder(study_), study_);
        fs::gui::StudyWindow w(study_);
        QVERIFY2(w.ok(), qPrintable(w.error()));
        QCOMPARE(w.collapsesTable()->rowCount(), 2);
        QCOMPARE(w.collapsesTable()->item(0, 0)->text(), QString("4"));
        QCOMPARE(w.collapsesTable()->item(0, 1)->text(), QString("follows_allocator"));
        QCOMPARE(w.collapsesTable()->item(1, 1)->text(), QString("not_allocator"));
        QCOMPARE(w.plot()->graphCount(), 3); // baseline-1, repeat-1, expandable-1
        QCOMPARE(w.framesShown(), 3);        // frame 4 of every run
        QVERIFY(w.verdictLabel()->text().contains("follows_allocator"));
        w.selectCollapse(1);
        QVERIFY(w.verdictLabel()->text().contains("not_allocator"));
        // PSNR to the baseline: the repeat is identical everywhere (no finite PSNR), the
        // expandable run only differs at frame 4.
        w.setMetric("psnr_db");
        QCOMPARE(w.plot()->graphCount(), 1);
        QCOMPARE(w.plot()->graph(0)->dataCount(), 1);
    }

    void refusesWhatIsNoStudy()
    {
        QVERIFY(fs::gui::StudyWindow::studyFolder(dir_.path()).isEmpty());
        QTemporaryDir bad;
        QFile f(bad.filePath("study.json"));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"format\": \"fragscope-study\", \"schema_version\": 99}");
        f.close();
        fs::gui::StudyWindow w(bad.path());
        QVERIFY(!w.ok());
        QVERIFY2(w.error().contains("schema_version 99"), qPrintable(w.error()));
    }
};

QTEST_MAIN(TstAbGui)
#include "tst_ab_gui.moc"
