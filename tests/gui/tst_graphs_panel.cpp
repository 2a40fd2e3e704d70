// The Graphs panel (views/widgets/graphs_panel.h): on a simulated decode-graphs session it shows
// the figures `fragscope graphs --json` prints (one engine call behind both), the timelines get a
// replay lane, selecting a graph outlines its pool's regions on the heatmap and plots its
// replays against F. With FRAGSCOPE_SHOTS=DIR the window is saved as DIR/gui-graphs.png.
#include "main_window.h"
#include "widgets/graphs_panel.h"
#include "widgets/heatmap_widget.h"
#include "widgets/plot_widgets.h"

#include "testutil.h"

#include <QApplication>
#include <QDockWidget>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QSettings>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include <qcustomplot.h>

using namespace fs;

class TstGraphsPanel : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString session_;

private slots:
    void initTestCase()
    {
        QCoreApplication::setOrganizationName(QStringLiteral("fragscope-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_graphs_panel"));
        QSettings().clear();
        session_ = dir_.filePath("decode.fragscope");
        const auto r = fstest::runCli({"simulate", "-o", session_, "--workload", "decode-graphs",
                                       "--replays", "600", "--no-index"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    void panelShowsTheCliFigures()
    {
        const auto cli = fstest::runCli({"graphs", session_, "--json"});
        QCOMPARE(cli.exitCode, 0);
        const QJsonObject o = QJsonDocument::fromJson(cli.out).object();
        const QJsonArray graphs = o["graphs"].toArray();
        QCOMPARE(graphs.size(), 10); // nine batch sizes and the draft

        gui::MainWindow w;
        w.resize(1500, 950);
        w.show();
        // The panel closed while its report arrives (its columns are fitted when it is shown,
        // below).
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("graphsDock"));
        QVERIFY(dock);
        dock->hide();
        w.openFile(session_);
        QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), 60000);
        views::GraphsPanel* panel = w.graphsPanel();
        QVERIFY(panel);
        QTRY_VERIFY_WITH_TIMEOUT(panel->report() != nullptr, 60000);
        QVERIFY(!panel->table()->isVisible());
        const views::GraphsModel* m = panel->model();
        QCOMPARE(m->rowCount(), graphs.size());
        using M = views::GraphsModel;
        auto raw = [&](int row, int col) { return m->data(m->index(row, col), M::RawRole); };
        for (int i = 0; i < graphs.size(); ++i) {
            const QJsonObject g = graphs[i].toObject();
            QCOMPARE(raw(i, M::Graph).toString(), g["graph"].toString());
            QCOMPARE(raw(i, M::Replays).toLongLong(), g["replays"].toInteger());
            const QJsonObject d = g["replay_ns"].toObject();
            QCOMPARE(raw(i, M::P50).toLongLong(), d["p50"].toInteger());
            QCOMPARE(raw(i, M::P99).toLongLong(), d["p99"].toInteger());
            QCOMPARE(raw(i, M::Max).toLongLong(), d["max"].toInteger());
            QCOMPARE(raw(i, M::Jitter).toDouble(), d["jitter"].toDouble());
            QCOMPARE(raw(i, M::Captures).toLongLong(), g["captures"].toInteger());
            QCOMPARE(raw(i, M::PoolBytes).toULongLong(),
                     static_cast<qulonglong>(g["pool_reserved_bytes"].toInteger()));
            QCOMPARE(raw(i, M::RhoF).toDouble(),
                     g["replay_vs_fragmentation"].toObject()["spearman"].toDouble());
            // The text shown is the engine's formatting of the same figure.
            QVERIFY(!m->data(m->index(i, M::P50)).toString().isEmpty());
        }
        // The sharing line is the report's: the same saving as the CLI.
        const qint64 saved = o["sharing_all"].toObject()["peak_reserved_saved_bytes"].toInteger();
        QVERIFY(saved > 0);
        QCOMPARE(panel->report()->sharingAll.peakReservedSavedBytes, saved);
        QVERIFY(panel->summary()->text().contains("sharing"));

        // The replay lane on the timelines.
        QTRY_VERIFY_WITH_TIMEOUT(w.timeline()->hasReplayLane(), 10000);

        // Selecting a graph outlines its pool and plots its replays (one point each).
        panel->selectGraph(6); // decode bs=4
        const analysis::GraphInfo& g = panel->report()->graphs[6];
        const analysis::PoolInfo* pool = panel->report()->poolOf(g);
        QVERIFY(pool);
        QCOMPARE(w.heatmap()->poolOutline().regions.size(), pool->regions.size());
        QVERIFY(!w.heatmap()->poolOutline().regions.empty());
        QCOMPARE(panel->scatter()->graph(0)->dataCount(), static_cast<int>(g.replay.count));
        // Columns fitted to their text once the panel is in view (a hidden table is fitted
        // when shown: sized hidden, Qt measures every row of a long run's thousands).
        dock->show();
        dock->raise();
        QTRY_VERIFY(panel->table()->isVisible());
        QApplication::processEvents();
        QTableView* table = panel->table();
        std::vector<int> shown;
        for (int c = 0; c < M::ColumnCount; ++c)
            shown.push_back(table->columnWidth(c));
        table->resizeColumnsToContents();
        for (int c = 0; c < M::ColumnCount; ++c)
            QCOMPARE(shown[size_t(c)], table->columnWidth(c));
        if (const QByteArray shots = qgetenv("FRAGSCOPE_SHOTS"); !shots.isEmpty()) {
            QApplication::processEvents();
            w.grab().save(QString::fromLocal8Bit(shots) + "/gui-graphs.png");
        }
    }
};

QTEST_MAIN(TstGraphsPanel)
#include "tst_graphs_panel.moc"
