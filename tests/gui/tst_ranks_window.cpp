// The ranks view (app/gui/ranks_window.h), offscreen: three simulated ranks of one job open as
// one view whose figures are the engine's (analyseRanks), lanes time aligned and linked, the
// frames table with a column per rank, and files of different jobs refused until Align is none.
#include "core/analysis/ranks.h"
#include "core/format.h"
#include "ranks_window.h"
#include "testutil.h"
#include "widgets/heatmap_widget.h"
#include "widgets/rank_frames_model.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDir>
#include <QImage>
#include <QLabel>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <qcustomplot.h>

using namespace fs;
using namespace fs::analysis;

class TestRanksWindow : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QStringList files_;
    QString junk_;                         // not a session
    std::shared_ptr<const RankRun> truth_; // the engine's answer, asked here directly

    static bool waitLoaded(gui::RanksWindow& w, bool& ok, QString& error)
    {
        QSignalSpy spy(&w, &gui::RanksWindow::loaded);
        if (!spy.wait(240000)) return false;
        ok = spy.first().at(0).toBool();
        error = spy.first().at(1).toString();
        return true;
    }

private slots:
    void initTestCase()
    {
        // 3 ranks of 20 frames x 8 steps; rank 1 (3 / 2) lacks 4 GiB and collapses first.
        const auto r =
            fstest::runCli({"simulate", "--ranks", "3", "--frames", "20", "--steps", "8",
                            "--rank-deficit", "4294967296", "-o", dir_.filePath("job.fragscope")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        // Given out of order: the view numbers them by their rank meta.
        for (int k : {2, 0, 1})
            files_ << dir_.filePath(QStringLiteral("job.rank%1.fragscope").arg(k));
        std::vector<RankInput> in;
        for (const QString& f : files_)
            in.push_back({f.toStdString(), Engine::open(f.toStdString()), nullptr});
        truth_ = std::make_shared<const RankRun>(analyseRanks(in));
        junk_ = dir_.filePath("junk.fragscope");
        QFile f(junk_);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a session");
        QVERIFY(truth_->firstCollapse);
        QCOMPARE(truth_->firstCollapse->rank, 1);
    }

    void showsTheEnginesAnswer()
    {
        gui::RanksWindow w(files_);
        w.show();
        bool ok = false;
        QString error;
        QVERIFY(waitLoaded(w, ok, error));
        QVERIFY2(ok, qPrintable(error));
        const auto run = w.run();
        QVERIFY(run);
        QCOMPARE(run->mode, RankAlignMode::WallClock);
        QCOMPARE(run->ranks.size(), size_t(3));
        QVERIFY(w.headline()->text().contains(QStringLiteral("First to collapse: rank %1, frame %2")
                                                  .arg(truth_->firstCollapse->rank)
                                                  .arg(truth_->firstCollapse->frame)));
        QVERIFY(w.status()->text().contains(QStringLiteral("wall clock")));
        // The summary table: one row per rank, in rank order, each with its engine's figures.
        QCOMPARE(w.summaryTable()->rowCount(), 3);
        for (int k = 0; k < 3; ++k) {
            const RankSummary& t = truth_->ranks[size_t(k)];
            QCOMPARE(run->ranks[size_t(k)].offsetNs, t.offsetNs);
            QCOMPARE(w.summaryTable()->item(k, 0)->text(), QString::number(k));
            QCOMPARE(w.summaryTable()->item(k, 4)->text(),
                     QString::fromStdString(humanBytes(t.peakReservedBytes)));
            QCOMPARE(w.summaryTable()->item(k, 8)->text(), QString::number(t.ooms.size()));
        }
        // One reserved curve per rank in the legend.
        QCOMPARE(w.reservedPlot()->legend->itemCount(), 3);
    }

    void framesTableHasARankDimension()
    {
        gui::RanksWindow w(files_);
        bool ok = false;
        QString error;
        QVERIFY(waitLoaded(w, ok, error) && ok);
        views::RankFramesModel* m = w.framesModel();
        QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(m->rowCount(), 20);
        QCOMPARE(m->columnCount(), 1 + 3 + 4);
        const int64_t f = truth_->firstCollapse->frame;
        const int row = m->rowOf(f);
        QVERIFY(row >= 0);
        // Rank 1's column (Frame, rank 0, rank 1, ...) marks the collapse, first of the ranks.
        QCOMPARE(m->index(row, views::RankFramesModel::FirstRank + 1).data().toString(),
                 QStringLiteral("collapse ★"));
        QCOMPARE(m->index(row, m->firstCollapseColumn()).data().toString(), QStringLiteral("1"));
        // Every frame row agrees with the engine's per-frame answer.
        for (const RankFrame& rf : truth_->frames) {
            const int r = m->rowOf(rf.frame);
            QVERIFY(r >= 0);
            QCOMPARE(m->index(r, m->firstCollapseColumn()).data().toString(),
                     rf.firstCollapseRank < 0 ? QString() : QString::number(rf.firstCollapseRank));
            QCOMPARE(m->index(r, m->firstOomColumn()).data().toString(),
                     rf.firstOomRank < 0 ? QString() : QString::number(rf.firstOomRank));
        }
    }

    void lanesAreTimeAlignedAndLinked()
    {
        gui::RanksWindow w(files_);
        w.resize(1200, 1000);
        w.show();
        bool ok = false;
        QString error;
        QVERIFY(waitLoaded(w, ok, error) && ok);
        const auto run = w.run();
        QCOMPARE(w.lanes().size(), size_t(3));
        auto aligned = [&] {
            const auto [t0, t1] = w.sharedWindow();
            for (size_t k = 0; k < 3; ++k) {
                const auto vp = w.lanes()[k]->viewport();
                if (vp.t0 + run->ranks[k].offsetNs != t0 || vp.t1 + run->ranks[k].offsetNs != t1)
                    return false;
            }
            return true;
        };
        QVERIFY(aligned());
        // Selecting a frame zooms every lane to it on the shared axis.
        const int64_t f = truth_->firstCollapse->frame;
        w.selectFrame(f);
        QVERIFY(aligned());
        const auto [t0, t1] = w.sharedWindow();
        for (const RankSummary& r : run->ranks)
            for (const FrameInfo& fi : r.engine->frames())
                if (fi.index == f)
                    QVERIFY(fi.start + r.offsetNs >= t0 && fi.end + r.offsetNs <= t1);
        QCOMPARE(w.framesTable()->currentIndex().row(), w.framesModel()->rowOf(f));
        // Zooming one lane moves the others: rank 2's view a second later.
        render::Viewport vp = w.lanes()[2]->viewport();
        vp.t0 += 1'000'000'000;
        vp.t1 += 1'000'000'000;
        w.lanes()[2]->setViewport(vp);
        QCOMPARE(w.sharedWindow().first, t0 + 1'000'000'000);
        QVERIFY(aligned());
    }

    void screenshotsShowTheFirstFailure()
    {
        // fragscope-gui --screenshots DIR A B C: the whole run, then the first collapse's frame
        // with rank 1's lane (the first to collapse) scrolled into view.
        QTemporaryDir out;
        gui::RanksWindow w(files_);
        QString error;
        const QStringList shots = w.writeScreenshots(out.path(), error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(shots, QStringList({out.filePath("ranks-overview.png"),
                                     out.filePath("ranks-first-failure.png")}));
        for (const QString& p : shots)
            QVERIFY(!QImage(p).isNull());
        QCOMPARE(w.framesTable()->currentIndex().row(),
                 w.framesModel()->rowOf(truth_->firstCollapse->frame));
        QVERIFY(!w.lanes()[1]->visibleRegion().isEmpty());
        // Files the engine refuses: its reason, and no picture.
        gui::RanksWindow bad({files_[0], junk_});
        QVERIFY(bad.writeScreenshots(out.filePath("bad"), error).isEmpty());
        QVERIFY2(error.contains(QStringLiteral("junk.fragscope")), qPrintable(error));
        QVERIFY(!QDir(out.filePath("bad")).exists());
    }

    void otherJobRefusedUntilAlignNone()
    {
        const auto r = fstest::runCli({"simulate", "--ranks", "2", "--frames", "3", "--steps", "2",
                                       "--seed", "5", "-o", dir_.filePath("other.fragscope")});
        QCOMPARE(r.exitCode, 0);
        gui::RanksWindow w({files_[1], dir_.filePath("other.rank1.fragscope")});
        bool ok = true;
        QString error;
        QVERIFY(waitLoaded(w, ok, error));
        QVERIFY(!ok);
        QVERIFY2(error.contains(QStringLiteral("job ids differ")), qPrintable(error));
        QVERIFY(!w.run());
        QVERIFY(w.headline()->text().contains(QStringLiteral("None")));
        QVERIFY(w.alignBox()->isEnabled());
        // Shown anyway, each on its own clock.
        QSignalSpy spy(&w, &gui::RanksWindow::loaded);
        w.setAlignMode(RankAlignMode::None);
        QVERIFY(spy.wait(240000));
        QVERIFY(spy.first().at(0).toBool());
        QCOMPARE(w.run()->mode, RankAlignMode::None);
        for (const RankSummary& s : w.run()->ranks)
            QCOMPARE(s.offsetNs, int64_t(0));
    }

    void snapshotsOpenAsRanks()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        // fragscope-gui rank0.pickle rank1.pickle: one real snapshot as both ranks (copies, so
        // that the imports land beside them). Imported first; ranked by the file names; PyTorch's
        // time_us is the wall clock, so they line up with offset 0 and equal figures.
        const QString src = fstest::dataDir() + "/pytorch-snapshots/cs336-silmont2000-small.pickle";
        for (int k : {1, 0})
            QVERIFY(QFile::copy(src, dir_.filePath(QStringLiteral("rank%1.pickle").arg(k))));
        gui::RanksWindow w({dir_.filePath("rank1.pickle"), dir_.filePath("rank0.pickle")});
        bool ok = false;
        QString error;
        QVERIFY(waitLoaded(w, ok, error));
        QVERIFY2(ok, qPrintable(error));
        const auto run = w.run();
        QCOMPARE(run->mode, RankAlignMode::WallClock);
        QCOMPARE(run->ranks[0].rank, 0);
        QVERIFY(run->ranks[0].path.ends_with("rank0.pickle"));
        QCOMPARE(run->ranks[1].offsetNs, int64_t(0));
        QCOMPARE(run->ranks[0].peakReservedBytes, run->ranks[1].peakReservedBytes);
        QVERIFY(w.status()->text().contains(QStringLiteral("time_us")));
        QVERIFY(w.headline()->text().contains(QStringLiteral("No rank collapsed")));
    }

    void badFileNamed()
    {
        gui::RanksWindow w({files_[0], junk_});
        bool ok = true;
        QString error;
        QVERIFY(waitLoaded(w, ok, error));
        QVERIFY(!ok);
        QVERIFY2(error.contains(QStringLiteral("junk.fragscope")), qPrintable(error));
    }
};

QTEST_MAIN(TestRanksWindow)
#include "tst_ranks_window.moc"
