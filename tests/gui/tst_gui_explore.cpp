// Exploring any moment of a run (docs/gui.md "Time cursor", "Call sites", "Search", "Layout"):
// the views at the time cursor equal `fragscope state --at t`, the jumps land on the times
// `fragscope report` names, the stack filter puts the user's frame first on a shared snapshot,
// the call-site table adds up to the allocated bytes, search by address finds the block that
// held it, Ctrl+J moves the timelines, sessions without frames give their room to the block
// list, and `fragscope-gui --help` needs no display. Offscreen, on the fixture and on shared
// PyTorch snapshots (skipped without FRAGSCOPE_DATA).
#include "fixture.h"
#include "main_window.h"
#include "testutil.h"
#include "widgets/block_list.h"
#include "widgets/callsite_table.h"
#include "widgets/cursor_bar.h"
#include "widgets/heatmap_widget.h"
#include "widgets/panels.h"
#include "widgets/plot_widgets.h"
#include "widgets/search_panel.h"
#include "widgets/time_cursor.h"

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMenuBar>
#include <QSettings>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>

#include <qcustomplot.h>

using namespace fs;

namespace {

void waitIdle(gui::MainWindow& w)
{
    QTRY_VERIFY_WITH_TIMEOUT(w.scene() && !w.busy(), 120000);
    QApplication::processEvents();
}

// Moves the cursor and waits until every view shows it.
void cursorTo(gui::MainWindow& w, int64_t t)
{
    w.setCursorTime(t);
    QTRY_VERIFY_WITH_TIMEOUT(w.cursorSnapshot() && w.cursorSnapshot()->time == t && !w.busy(),
                             60000);
}

QJsonObject cliJson(const QStringList& args)
{
    const auto r = fstest::runCli(args);
    if (r.exitCode != 0) qWarning() << r.err;
    return QJsonDocument::fromJson(r.out).object();
}

QDockWidget* dock(gui::MainWindow& w, const char* name)
{
    return w.findChild<QDockWidget*>(QLatin1String(name));
}

QAction* actionWithShortcut(gui::MainWindow& w, const QKeySequence& k)
{
    for (QAction* a : w.findChildren<QAction*>())
        if (a->shortcut() == k) return a;
    return nullptr;
}

} // namespace

class TstGuiExplore : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;

    QString imported(const QString& name)
    {
        const QString out = dir_.filePath(name + ".fragscope");
        if (QFileInfo::exists(out)) return out;
        const auto r = fstest::runCli(
            {"import", fstest::dataDir() + "/pytorch-snapshots/" + name + ".pickle", "-o", out});
        return r.exitCode == 0 ? out : QString();
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        QCoreApplication::setOrganizationName(QStringLiteral("fragscope-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_gui_explore"));
        QSettings().clear();
        qputenv("FRAGSCOPE_SETTINGS", dir_.filePath("settings.json").toLocal8Bit());
        fixture_ = dir_.filePath("fixture.fragscope");
        fstest::makeFixtureSession(fixture_.toStdString());
    }

    void cursorViewsEqualStateAt_data()
    {
        QTest::addColumn<QString>("session");
        QTest::newRow("fixture") << QString();
        QTest::newRow("decomfl") << QStringLiteral("decomfl");
    }
    void cursorViewsEqualStateAt()
    {
        QFETCH(QString, session);
        QString path = fixture_;
        if (!session.isEmpty()) {
            FSTEST_REQUIRE_DATA("pytorch-snapshots/" + session + ".pickle");
            path = imported(session);
            QVERIFY(!path.isEmpty());
        }
        gui::MainWindow w;
        w.resize(1920, 1080);
        w.show();
        w.openFile(path);
        waitIdle(w);
        const auto& s = *w.scene();
        // Three instants across the run, in ns as `state --at` takes them.
        for (int k = 1; k <= 3; ++k) {
            const int64_t t = s.timeBegin() + (s.timeEnd() - s.timeBegin()) * k / 4;
            cursorTo(w, t);
            const QJsonObject st =
                cliJson({"state", path, "--at", QString::number(t), "--json"})["states"]
                    .toArray()
                    .first()
                    .toObject();
            // Histogram: the engine's bins, the same fragments as the CLI counts.
            int64_t count = 0;
            for (const auto& b : w.histogram()->current())
                count += b.count;
            QCOMPARE(count, st["fragment_count"].toInteger());
            QCOMPARE(w.histogram()->shownAt(), t);
            QCOMPARE(w.memmap()->shownAt(), t);
            // The block list: every live block and fragment, as many as the CLI's state has.
            const auto* m = w.blockList()->model();
            QCOMPARE(m->fragments(), st["fragment_count"].toInteger());
            uint64_t largest = 0, allocated = 0, free = 0;
            for (int r = 0; r < m->rowCount(); ++r) {
                const auto& b = m->row(r);
                if (b.free) {
                    largest = std::max(largest, b.size);
                    free += b.size;
                } else {
                    allocated += b.size;
                }
            }
            QCOMPARE(m->blocks(), int64_t(w.cursorSnapshot()->blocks->state.liveAllocations));
            QCOMPARE(qint64(largest), st["largest_free_bytes"].toInteger());
            QCOMPARE(qint64(free), st["free_bytes"].toInteger());
            QCOMPARE(qint64(allocated), st["allocated_bytes"].toInteger() +
                                            st["allocated_outside_regions_bytes"].toInteger());
            // The readout and the timelines' crosshair say the same F.
            const QString f = QString::number(st["fragmentation_ratio"].toDouble(), 'f', 3);
            QVERIFY2(w.timeline()->cursorValues().join(' ').contains("F " + f),
                     qPrintable(w.timeline()->cursorValues().join(" | ")));
        }
    }

    void jumpsLandOnReportTimes_data()
    {
        QTest::addColumn<QString>("session");
        QTest::newRow("fixture") << QString();
        QTest::newRow("decomfl") << QStringLiteral("decomfl");
    }
    void jumpsLandOnReportTimes()
    {
        QFETCH(QString, session);
        QString path = fixture_;
        if (!session.isEmpty()) {
            FSTEST_REQUIRE_DATA("pytorch-snapshots/" + session + ".pickle");
            path = imported(session);
        }
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(path);
        waitIdle(w);
        QTRY_VERIFY_WITH_TIMEOUT(w.jumpTargets().has_value(), 60000);
        const QJsonObject track =
            cliJson({"report", path, "--json"})["tracks"].toArray().first().toObject();
        const auto& ld = w.scene()->tracks[size_t(w.track())];
        const auto& e = *w.scene()->engine;
        // Ctrl+1: max F, at the time the report names.
        actionWithShortcut(w, QKeySequence(Qt::CTRL | Qt::Key_1))->trigger();
        QCOMPARE(w.timeCursor()->time(), track["max_fragmentation_ratio_at_ns"].toInteger());
        // Ctrl+2: peak reserved; Ctrl+3: the smallest largest free block.
        actionWithShortcut(w, QKeySequence(Qt::CTRL | Qt::Key_2))->trigger();
        QCOMPARE(qint64(e.stateAt(ld.device, ld.level, w.timeCursor()->time()).reservedBytes),
                 track["peak_reserved_bytes"].toInteger());
        actionWithShortcut(w, QKeySequence(Qt::CTRL | Qt::Key_3))->trigger();
        QCOMPARE(
            qint64(e.stateAt(ld.device, ld.level, w.timeCursor()->time()).largestFreeFragmentBytes),
            track["min_largest_free_bytes"].toInteger());
        // The views follow the jump.
        QTRY_VERIFY_WITH_TIMEOUT(
            w.cursorSnapshot() && w.cursorSnapshot()->time == w.timeCursor()->time(), 60000);
    }

    void stepsByEventAndFrame()
    {
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        waitIdle(w);
        const auto& s = *w.scene();
        const auto& ld = s.tracks[size_t(w.track())];
        const int64_t t0 = fstest::fixtureFrameStart(5) + 1;
        w.setCursorTime(t0);
        // '.' / ',': the engine's next and previous allocator events.
        actionWithShortcut(w, QKeySequence(Qt::Key_Period))->trigger();
        const int64_t next = s.explorer->nextEvent(ld.device, ld.level, t0);
        QCOMPARE(w.timeCursor()->time(), next);
        actionWithShortcut(w, QKeySequence(Qt::Key_Comma))->trigger();
        QCOMPARE(w.timeCursor()->time(), s.explorer->previousEvent(ld.device, ld.level, next));
        // ']' / '[': the next and previous frame's end, selected.
        w.setCursorTime(t0);
        actionWithShortcut(w, QKeySequence(Qt::Key_BracketRight))->trigger();
        QCOMPARE(w.selection()->current().frame, int64_t(5));
        QCOMPARE(w.timeCursor()->time(), s.frame(5)->end);
        actionWithShortcut(w, QKeySequence(Qt::Key_BracketRight))->trigger();
        QCOMPARE(w.timeCursor()->time(), s.frame(6)->end);
        actionWithShortcut(w, QKeySequence(Qt::Key_BracketLeft))->trigger();
        QCOMPARE(w.selection()->current().frame, int64_t(5));
        // A frame selected in the table moves the cursor to its end; the histogram compares
        // with the frame before.
        w.selection()->selectFrame(s, 17);
        QTRY_VERIFY_WITH_TIMEOUT(
            w.cursorSnapshot() && w.cursorSnapshot()->time == s.frame(17)->end && !w.busy(), 60000);
        QVERIFY(!w.histogram()->previous().empty());
    }

    void ctrlJMovesTheTimelines()
    {
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        waitIdle(w);
        // Zoomed into the first frames, then Ctrl+J: the heatmap goes to the collapse (17) and
        // the timelines' shared axis with it.
        w.heatmap()->zoomToTime(fstest::fixtureFrameStart(0), fstest::fixtureFrameStart(2));
        QApplication::processEvents();
        actionWithShortcut(w, QKeySequence(Qt::CTRL | Qt::Key_J))->trigger();
        QCOMPARE(w.selection()->current().frame, int64_t(17));
        const auto vp = w.heatmap()->viewport();
        QVERIFY(vp.t0 <= w.scene()->frame(17)->start && vp.t1 >= w.scene()->frame(17)->end);
        const auto [a, b] = w.timeline()->timeRange();
        const int64_t tol = (vp.t1 - vp.t0) / 100;
        QVERIFY2(
            std::llabs(a - vp.t0) <= tol && std::llabs(b - vp.t1) <= tol,
            qPrintable(QStringLiteral("%1..%2 vs %3..%4").arg(a).arg(b).arg(vp.t0).arg(vp.t1)));
        // Ctrl+Shift+J: back to the previous collapse (the only one: itself, wrapping).
        actionWithShortcut(w, QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_J))->trigger();
        QCOMPARE(w.selection()->current().frame, int64_t(17));
    }

    void clicksMoveTheCursor()
    {
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        waitIdle(w);
        // A click on the heatmap sets the cursor there (and selects the block under it).
        auto* h = w.heatmap();
        const QRectF plot = h->plotArea();
        const QPoint pt(int(plot.left() + plot.width() * 0.3), int(plot.center().y()));
        int64_t t = 0;
        double y = 0;
        QVERIFY(h->toData(pt, t, y));
        QTest::mouseClick(h, Qt::LeftButton, {}, pt);
        QVERIFY(std::llabs(w.timeCursor()->time() - t) <=
                (h->viewport().t1 - h->viewport().t0) / 500);
        // Dragging along the time axis under the plot scrubs it.
        const QPoint a(int(plot.left() + plot.width() * 0.2), int(plot.bottom() + 12));
        const QPoint b(int(plot.left() + plot.width() * 0.7), int(plot.bottom() + 12));
        QTest::mousePress(h, Qt::LeftButton, {}, a);
        QMouseEvent move(QEvent::MouseMove, QPointF(b), h->mapToGlobal(QPointF(b)), Qt::NoButton,
                         Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(h, &move);
        QTest::mouseRelease(h, Qt::LeftButton, {}, b);
        const double fx = (b.x() - plot.left()) / plot.width();
        const int64_t want =
            h->viewport().t0 + int64_t(fx * double(h->viewport().t1 - h->viewport().t0));
        QVERIFY(std::llabs(w.timeCursor()->time() - want) <=
                (h->viewport().t1 - h->viewport().t0) / 500);
        QCOMPARE(h->timeCursor(), w.timeCursor()->time());
    }

    void stackFilterShowsUserFrameFirst()
    {
        // cs336-silmont2000-small records 48-frame stacks whose user line is frame 45, after
        // torch::unwind, allocator, dispatch and CPython frames.
        FSTEST_REQUIRE_DATA("pytorch-snapshots/cs336-silmont2000-small.pickle");
        const QString path = imported(QStringLiteral("cs336-silmont2000-small"));
        QVERIFY(!path.isEmpty());
        gui::MainWindow w;
        w.resize(1920, 1080);
        w.show();
        w.openFile(path);
        waitIdle(w);
        const auto& e = *w.scene()->engine;
        int64_t id = -1;
        for (int64_t i = 1; i <= w.scene()->summary.allocations && id < 0; ++i)
            if (auto a = e.allocation(i); a && a->stack.size() == 48) id = i;
        QVERIFY(id > 0);
        views::Selection s;
        s.allocId = id;
        w.selection()->select(s);
        QTreeWidget* tree = w.details()->tree();
        QTreeWidgetItem* site = nullptr;
        QTreeWidgetItem* stack = nullptr;
        for (int i = 0; i < tree->topLevelItemCount(); ++i) {
            if (tree->topLevelItem(i)->text(0) == "call site") site = tree->topLevelItem(i);
            if (tree->topLevelItem(i)->text(0) == "stack") stack = tree->topLevelItem(i);
        }
        QVERIFY(site && stack);
        QCOMPARE(site->text(1),
                 QStringLiteral("trace_peak_memory.py:12 custom_scaled_dot_product_attention"));
        // The user's frame first; the rest folded; every frame one click away.
        QVERIFY(stack->child(0)->text(1).startsWith("trace_peak_memory.py:12"));
        QVERIFY(stack->childCount() < 48);
        w.details()->setAllFrames(true);
        for (int i = 0; i < tree->topLevelItemCount(); ++i)
            if (tree->topLevelItem(i)->text(0) == "stack") stack = tree->topLevelItem(i);
        QCOMPARE(stack->childCount(), 48);
        QVERIFY(stack->child(0)->text(1).contains("torch::unwind"));
    }

    void callSitesAddUpAndColourTheHeatmap()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots/decomfl.pickle");
        const QString path = imported(QStringLiteral("decomfl"));
        gui::MainWindow w;
        w.resize(1920, 1080);
        w.show();
        w.openFile(path);
        waitIdle(w);
        dock(w, "callSitesDock")->show();
        dock(w, "callSitesDock")->raise();
        // decomfl's max F, 1.228 s after its start (the example).
        const int64_t t = w.scene()->timeBegin() + 1'227'800'000;
        cursorTo(w, t);
        QTRY_VERIFY_WITH_TIMEOUT(!w.callSites()->busy() && w.callSites()->model()->table() &&
                                     w.callSites()->model()->table()->to == t,
                                 60000);
        const auto* table = w.callSites()->model()->table();
        QVERIFY(table->stacksRecorded);
        QVERIFY(table->rows.size() > 3);
        uint64_t sum = 0;
        for (const auto& r : table->rows)
            sum += r.heldBytes;
        const auto& st = w.cursorSnapshot()->blocks->state;
        QCOMPARE(sum, st.allocatedBytes + st.allocatedOutsideBytes);
        QCOMPARE(table->heldBytes, sum);
        // Colouring the heatmap by call site: a legend of the top entries, "other" last.
        w.callSites()->setColourHeatmap(true);
        QTRY_VERIFY_WITH_TIMEOUT(!w.heatmap()->legend().empty() && w.heatmap()->isRefined(), 60000);
        QCOMPARE(int(w.heatmap()->style().colouring), int(analysis::Colouring::CallSite));
        QVERIFY(w.heatmap()->legend().size() <= 9);
        w.callSites()->setColourHeatmap(false);
        QTRY_VERIFY_WITH_TIMEOUT(w.heatmap()->legend().empty() && w.heatmap()->isRefined(), 60000);
        // Grouped by memory category (docs/analysis.md): the same bytes held, every row a
        // category; the heatmap coloured by category has a legend of categories.
        w.callSites()->setGroupBy(analysis::GroupBy::Category);
        QTRY_VERIFY_WITH_TIMEOUT(!w.callSites()->busy() && w.callSites()->model()->table() &&
                                     w.callSites()->model()->table()->by ==
                                         analysis::GroupBy::Category,
                                 60000);
        const auto* byCategory = w.callSites()->model()->table();
        QCOMPARE(byCategory->heldBytes, sum);
        analysis::MemoryCategory c{};
        for (const auto& r : byCategory->rows)
            QVERIFY2(analysis::parseMemoryCategory(r.label, c), r.label.c_str());
        // The window's rules (read once from the settings file) reach the table: a user rule
        // ":" -> workspace matches every stack frame ("name (file:line)"), so every block with
        // a stack goes there and the rest (decomfl has no tags or notes) to other; the bytes
        // held do not change. (A pattern of only '*' names nothing: docs/analysis.md.)
        w.callSites()->setCategoryRules({{":", analysis::MemoryCategory::Workspace}});
        auto onlyUserRule = [&] {
            const auto* tab = w.callSites()->model()->table();
            if (w.callSites()->busy() || !tab || tab->by != analysis::GroupBy::Category)
                return false;
            bool workspace = false;
            for (const auto& r : tab->rows) {
                if (r.heldBytes > 0 && r.label != "workspace" && r.label != "other") return false;
                workspace |= r.label == "workspace" && r.heldBytes > 0;
            }
            return workspace; // decomfl records stacks
        };
        QTRY_VERIFY_WITH_TIMEOUT(onlyUserRule(), 60000);
        QCOMPARE(w.callSites()->model()->table()->heldBytes, sum);
        w.callSites()->setCategoryRules({});
        QTRY_VERIFY_WITH_TIMEOUT(!w.callSites()->busy(), 60000);
        w.callSites()->setColourHeatmap(true);
        QTRY_VERIFY_WITH_TIMEOUT(int(w.heatmap()->style().colouring) ==
                                         int(analysis::Colouring::Category) &&
                                     !w.heatmap()->legend().empty() && w.heatmap()->isRefined(),
                                 60000);
        for (const auto& l : w.heatmap()->legend())
            QVERIFY2(analysis::parseMemoryCategory(l.label, c), l.label.c_str());
        w.callSites()->setColourHeatmap(false);
    }

    void searchFindsTheBlockThatHeldAnAddress()
    {
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        waitIdle(w);
        const int64_t t = fstest::fixtureFrameStart(20);
        cursorTo(w, t);
        // A block of the list, and an address inside it.
        const auto* m = w.blockList()->model();
        int row = -1;
        for (int r = 0; r < m->rowCount() && row < 0; ++r)
            if (!m->row(r).free && m->row(r).size > 64) row = r;
        QVERIFY(row >= 0);
        const auto block = m->row(row);
        auto* search = w.searchPanel();
        search->search(QStringLiteral("0x%1").arg(block.address + 40, 0, 16));
        QTRY_VERIFY_WITH_TIMEOUT(!search->busy() && search->results()->rowCount() > 0, 60000);
        QCOMPARE(search->results()->row(0).id, block.id);
        QVERIFY2(search->message().contains(QStringLiteral("#%1").arg(block.id)),
                 qPrintable(search->message()));
        QCOMPARE(w.selection()->current().allocId, block.id); // selected, outlined
        // A stack's file:line: the fixture's kept blocks (kv.py:88); highlighted on the heatmap.
        search->search(QStringLiteral("kv.py:88"));
        QTRY_VERIFY_WITH_TIMEOUT(!search->busy() && search->results()->rowCount() > 0, 60000);
        QCOMPARE(int(w.heatmap()->style().colouring), int(analysis::Colouring::Search));
        // A search that finds nothing says so, and highlights nothing.
        search->search(QStringLiteral("no_such_file.py:1"));
        QTRY_VERIFY_WITH_TIMEOUT(!search->busy() && search->message().startsWith("nothing found"),
                                 60000);
        QCOMPARE(search->results()->rowCount(), 0);
        QCOMPARE(int(w.heatmap()->style().colouring), int(analysis::Colouring::Occupancy));
        search->search(QStringLiteral("4XB"));
        QTRY_VERIFY_WITH_TIMEOUT(!search->busy() && search->message().contains("unknown size unit"),
                                 60000);
    }

    void sessionsWithoutFramesGiveTheirRoom()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots/decomfl.pickle");
        const QString path = imported(QStringLiteral("decomfl"));
        gui::MainWindow w;
        w.resize(1920, 1080);
        w.show();
        w.openFile(path);
        waitIdle(w);
        // No frames, no kernels: the frames table, inspector and kernel lane make way.
        QVERIFY(dock(w, "framesDock")->isHidden());
        QVERIFY(dock(w, "inspectorDock")->isHidden());
        QVERIFY(dock(w, "kernelsDock")->isHidden());
        QVERIFY(w.blockList()->isVisible());
        QVERIFY(w.callSites()->isVisible());
        QVERIFY(w.blockList()->height() > 150);
        // A session with frames brings them back.
        w.openFile(fixture_);
        waitIdle(w);
        QVERIFY(!dock(w, "framesDock")->isHidden());
        QVERIFY(!dock(w, "inspectorDock")->isHidden());
        QVERIFY(!dock(w, "kernelsDock")->isHidden());
        // View › Layout › Inspector first, then Reset layout.
        w.applyLayout(gui::MainWindow::Layout::InspectorFirst);
        QApplication::processEvents();
        QVERIFY(w.inspector()->isVisible());
        w.applyLayout(gui::MainWindow::Layout::Default);
        QVERIFY(!dock(w, "framesDock")->isHidden());
    }

    void inspectorShowsItsAnswerAt1080p()
    {
        gui::MainWindow w;
        w.resize(1920, 1080);
        w.show();
        w.openFile(fixture_);
        waitIdle(w);
        w.selection()->selectFrame(*w.scene(), 17);
        waitIdle(w);
        // The f-1 -> f diff: every row under its header; the precursors: several rows.
        auto* diff = w.inspector()->findChild<QTableWidget*>();
        QVERIFY(diff);
        const int rows = diff->rowCount();
        QCOMPARE(rows, 7);
        QVERIFY2(diff->viewport()->height() >= rows * diff->rowHeight(0),
                 qPrintable(QStringLiteral("%1 < %2")
                                .arg(diff->viewport()->height())
                                .arg(rows * diff->rowHeight(0))));
        QTableView* pre = w.inspector()->table();
        QVERIFY2(pre->viewport()->height() >= 4 * pre->rowHeight(0),
                 qPrintable(QString::number(pre->viewport()->height())));
    }

    void stateOnlySnapshotsSaySo()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots/flexgen-oom-v2.0-format.pickle");
        const QString path = imported(QStringLiteral("flexgen-oom-v2.0-format"));
        gui::MainWindow w;
        w.resize(1920, 1080);
        w.show();
        w.openFile(path);
        waitIdle(w);
        QTRY_VERIFY_WITH_TIMEOUT(w.stateOnly(), 60000);
        QTRY_VERIFY_WITH_TIMEOUT(w.cursorBar()->text().contains("end state"), 60000);
        QVERIFY(w.blockList()->headline().contains("End state"));
        // F 0.54 but 4 MiB free of 11 GiB: full, not fragmented (the honest headline).
        QVERIFY2(w.cursorBar()->headline().startsWith("not fragmented"),
                 qPrintable(w.cursorBar()->headline()));
        QVERIFY(!w.cursorBar()->fragmented());
        QCOMPARE(w.blockList()->model()->blocks(), int64_t(460));
    }

    void kernelLaneNamesItsKernels()
    {
        gui::MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        waitIdle(w);
        w.selection()->selectFrame(*w.scene(), 17);
        waitIdle(w);
        auto* lane = w.kernels();
        lane->repaint();
        // Frame 17's one kernel runs from 10 ms to 30 ms of the frame's 100 ms.
        const double x = 110 + (lane->width() - 120) * 0.2;
        QVERIFY2(lane->describeAt(QPointF(x, 30)).contains("gemm_fallback_kernel"),
                 qPrintable(lane->describeAt(QPointF(x, 30))));
        QVERIFY(lane->describeAt(QPointF(110 + (lane->width() - 120) * 0.9, 30)).isEmpty());
    }

    void darkThemeIsComplete()
    {
        gui::MainWindow w;
        const QPalette before = QApplication::palette();
        w.setDark(true);
        QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
        QVERIFY(QApplication::palette().color(QPalette::Base).lightness() < 80);
        QVERIFY(QApplication::palette().color(QPalette::Text).lightness() > 180);
        w.setDark(false);
        QCOMPARE(QApplication::palette().color(QPalette::Window), before.color(QPalette::Window));
    }

    // `--measure-open` (bench/gui/bench_gui_open): one JSON line whose cursor figures are in the
    // order their definitions imply, move by move: the worker's snapshot is part of the redraw,
    // and the redraw part of the time until every panel that follows the cursor is done.
    void measureOpenTimesTheCursor()
    {
        QProcess p;
        p.start(QStringLiteral(FRAGSCOPE_GUI), {"--measure-open", fixture_});
        QVERIFY(p.waitForFinished(240000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput().trimmed()).object();
        for (const char* k :
             {"cursor_compute_ms_median", "cursor_redraw_ms_median", "cursor_all_panels_ms_median",
              "cursor_redraw_ms_max", "cursor_max_event_loop_gap_ms", "max_event_loop_gap_ms"})
            QVERIFY2(j.contains(QLatin1String(k)), k);
        const double compute = j["cursor_compute_ms_median"].toDouble();
        const double redraw = j["cursor_redraw_ms_median"].toDouble();
        QVERIFY(redraw > 0); // the moves happened (0 when there were none)
        QVERIFY2(compute <= redraw, qPrintable(QString("%1 > %2").arg(compute).arg(redraw)));
        QVERIFY(redraw <= j["cursor_all_panels_ms_median"].toDouble());
        QVERIFY(redraw <= j["cursor_redraw_ms_max"].toDouble());
        QVERIFY(j["cursor_max_event_loop_gap_ms"].toInteger() >= 0);
        QVERIFY(j["cursor_max_event_loop_gap_ms"].toInteger() <=
                j["max_event_loop_gap_ms"].toInteger());
    }

    // The GUI never restarts itself (README.md "Huge pages"): `ps -o comm=` shows fragscope-gui
    // and its environment is the one it was started with.
    void keepsItsNameAndEnvironment()
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        env.insert("GLIBC_TUNABLES", "glibc.malloc.check=0");
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(FRAGSCOPE_GUI), {fixture_});
        QVERIFY(p.waitForStarted(30000));
        // The window is up once the process has read its session; a restart would have replaced
        // the image within its first milliseconds.
        QTest::qWait(1500);
        QCOMPARE(p.state(), QProcess::Running);
        const QString proc = QString("/proc/%1/").arg(p.processId());
        QFile comm(proc + "comm");
        QVERIFY(comm.open(QIODevice::ReadOnly));
        QCOMPARE(comm.readAll().trimmed(), QByteArray("fragscope-gui"));
        QFile envFile(proc + "environ");
        QVERIFY(envFile.open(QIODevice::ReadOnly));
        const QList<QByteArray> vars = envFile.readAll().split('\0');
        QVERIFY(vars.contains("GLIBC_TUNABLES=glibc.malloc.check=0"));
        for (const QByteArray& v : vars)
            QVERIFY2(!v.startsWith("FRAGSCOPE_SAVED_"), v.constData());
        p.kill();
        QVERIFY(p.waitForFinished(30000));
    }

    void helpNeedsNoDisplay()
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove("DISPLAY");
        env.remove("WAYLAND_DISPLAY");
        env.remove("QT_QPA_PLATFORM");
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(FRAGSCOPE_GUI), {"--help"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(p.readAllStandardOutput().contains("--measure-open"));
    }
};

QTEST_MAIN(TstGuiExplore)
#include "tst_gui_explore.moc"
