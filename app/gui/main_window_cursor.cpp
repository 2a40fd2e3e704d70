// MainWindow: the time cursor shared by every view, the Go menu (stepping, Jump to), the block
// list, call sites and search (docs/gui.md "Time cursor", "Call sites", "Search").
#include "main_window.h"

#include "core/settings/settings.h"
#include "render/scene_explore.h"
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
#include <QElapsedTimer>
#include <QLineEdit>
#include <QMenuBar>
#include <QPointer>
#include <QStatusBar>
#include <QTableView>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>

namespace fs::gui {

using views::Selection;

namespace {

QString when(const render::Scene& s, int64_t t)
{
    return QString::fromStdString(render::formatTime(t - s.timeBegin(), s.summary.timeAxis));
}

} // namespace

QWidget* MainWindow::buildCentral()
{
    auto* w = new QWidget(this);
    auto* v = new QVBoxLayout(w);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(0);
    cursorBar_ = new views::CursorBar(w);
    v->addWidget(cursorBar_);
    v->addWidget(heatmap_, 1);
    return w;
}

void MainWindow::buildExploreDocks()
{
    cursor_ = new views::TimeCursor(this);
    cursorWorker_ = new views::CursorWorker(this);
    originalPalette_ = QApplication::palette();
    try {
        const settings::Settings st = settings::loadUser();
        fragmentedRule_ = st.fragmented;
        categoryRules_ = st.categoryRules;
    } catch (const std::exception&) {
        // A settings file that does not parse: the defaults (the rules editor says why).
    }
    blockList_ = new views::BlockList(this);
    callSites_ = new views::CallSitesPanel(this);
    callSites_->setCategoryRules(categoryRules_);
    search_ = new views::SearchPanel(this);
    auto add = [this](QWidget* w, const QString& title, const QString& name, const char* beside) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(name);
        d->setWidget(w);
        QDockWidget* other = findChild<QDockWidget*>(QLatin1String(beside));
        addDockWidget(other ? dockWidgetArea(other) : Qt::LeftDockWidgetArea, d);
        if (other) tabifyDockWidget(other, d);
        if (other) other->raise();
    };
    add(blockList_, tr("Blocks at cursor"), QStringLiteral("blocksDock"), "framesDock");
    add(callSites_, tr("Call sites"), QStringLiteral("callSitesDock"), "kernelsDock");
    add(search_, tr("Search"), QStringLiteral("searchDock"), "detailsDock");
    if (auto* i = findChild<QDockWidget*>(QStringLiteral("inspectorDock"))) i->raise();
    // The new tabs must not take the timelines' height; the inspector's answer (the ranked
    // precursors) gets more of the right column than the histogram.
    auto* tl = findChild<QDockWidget*>(QStringLiteral("timelineDock"));
    auto* insp = findChild<QDockWidget*>(QStringLiteral("inspectorDock"));
    auto* hist = findChild<QDockWidget*>(QStringLiteral("histogramDock"));
    if (tl) resizeDocks({tl}, {340}, Qt::Vertical);
    if (insp && hist) resizeDocks({insp, hist}, {520, 220}, Qt::Vertical);
    if (auto* frames = findChild<QDockWidget*>(QStringLiteral("framesDock")); frames && insp)
        resizeDocks({frames, insp}, {400, 600}, Qt::Horizontal);

    connect(cursor_, &views::TimeCursor::moved, this, [this](qint64 t) { onCursorMoved(t); });
    connect(cursorWorker_, &views::CursorWorker::ready, this, &MainWindow::onSnapshot);
    connect(cursorWorker_, &views::CursorWorker::attributesLoaded, this, [this] {
        if (scene_ && cursor_->isSet())
            cursorWorker_->request(scene_, track_, cursor_->time(), selection_->current().frame);
    });
    auto toCursor = [this](qint64 t) { setCursorTime(t); };
    connect(heatmap_, &views::HeatmapWidget::cursorRequested, this, toCursor);
    connect(timeline_, &views::TimelineWidget::cursorRequested, this, toCursor);
    connect(kernels_, &views::KernelLaneWidget::cursorRequested, this, toCursor);
    // A block clicked on the heatmap: its details in front.
    connect(heatmap_, &views::HeatmapWidget::allocationClicked, this, [this] {
        if (auto* d = findChild<QDockWidget*>(QStringLiteral("detailsDock"))) d->raise();
    });
    auto selectBlock = [this](int64_t id) {
        Selection s = selection_->current();
        s.allocId = id;
        selection_->select(s);
        heatmap_->setFragmentHighlight(0, 0);
        // Its whole life on the heatmap.
        if (const auto a = scene_ ? scene_->allocation(id) : std::nullopt)
            heatmap_->showSpan(a->allocNs,
                               a->freeNs == analysis::kAlive ? scene_->timeEnd() : a->freeNs,
                               a->address, a->size);
    };
    connect(blockList_, &views::BlockList::blockSelected, this, selectBlock);
    auto highlightFragment = [this](quint64 address, quint64 size) {
        heatmap_->setFragmentHighlight(address, size);
    };
    connect(blockList_, &views::BlockList::fragmentSelected, this, highlightFragment);
    connect(search_, &views::SearchPanel::fragmentFound, this, highlightFragment);
    connect(search_, &views::SearchPanel::blockSelected, this,
            [this, selectBlock](qint64 id, qint64 at) {
                if (at != kNoTime) setCursorTime(at);
                selectBlock(id);
            });
    connect(search_, &views::SearchPanel::highlightChanged, this, [this](const QString& q) {
        highlight_ = q;
        updateHeatmapStyle();
    });
    connect(callSites_, &views::CallSitesPanel::colouringChanged, this,
            [this](analysis::Colouring c) {
                colourBy_ = c;
                updateHeatmapStyle();
            });
    connect(callSites_, &views::CallSitesPanel::searchRequested, this, [this](const QString& q) {
        if (auto* d = findChild<QDockWidget*>(QStringLiteral("searchDock"))) d->raise();
        search_->search(q);
    });
}

void MainWindow::buildExploreMenus()
{
    QMenu* help = nullptr;
    QMenu* view = nullptr;
    QAction* nextCollapse = nullptr;
    for (QAction* a : menuBar()->actions()) {
        if (a->text() == tr("&Help")) help = a->menu();
        if (a->text() == tr("&View")) view = a->menu();
    }
    if (view)
        for (QAction* a : view->actions())
            if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_J)) nextCollapse = a;
    auto* go = new QMenu(tr("&Go"), this);
    menuBar()->insertMenu(help ? help->menuAction() : nullptr, go);
    auto* prevEvent = go->addAction(tr("◀ Previous allocator event"), QKeySequence(Qt::Key_Comma),
                                    this, [this] { stepEvent(-1); });
    prevEvent->setIconText(tr("◀ event"));
    auto* nextEvent = go->addAction(tr("Next allocator event ▶"), QKeySequence(Qt::Key_Period),
                                    this, [this] { stepEvent(1); });
    nextEvent->setIconText(tr("event ▶"));
    auto* prevFrame = go->addAction(tr("◀◀ Previous frame"), QKeySequence(Qt::Key_BracketLeft),
                                    this, [this] { stepFrame(-1); });
    prevFrame->setIconText(tr("◀◀ frame"));
    auto* nextFrame = go->addAction(tr("Next frame ▶▶"), QKeySequence(Qt::Key_BracketRight), this,
                                    [this] { stepFrame(1); });
    nextFrame->setIconText(tr("frame ▶▶"));
    for (QAction* a : {prevEvent, nextEvent, prevFrame, nextFrame})
        a->setToolTip(a->text() + QStringLiteral(" (") + a->shortcut().toString() +
                      QLatin1Char(')'));
    go->addSeparator();
    jumpMenu_ = go->addMenu(tr("&Jump to"));
    struct Entry
    {
        QString text;
        QKeySequence key;
        Jump jump;
    };
    const Entry entries[] = {
        {tr("Max fragmentation (F)"), QKeySequence(Qt::CTRL | Qt::Key_1), Jump::MaxRatio},
        {tr("Peak reserved"), QKeySequence(Qt::CTRL | Qt::Key_2), Jump::PeakReserved},
        {tr("Smallest largest free block"), QKeySequence(Qt::CTRL | Qt::Key_3), Jump::MinLargest},
        {tr("Next OOM"), QKeySequence(Qt::Key_O), Jump::NextOom},
        {tr("Previous OOM"), QKeySequence(Qt::SHIFT | Qt::Key_O), Jump::PreviousOom},
        {tr("Next collapse"), QKeySequence(), Jump::NextCollapse},
        {tr("Previous collapse"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_J),
         Jump::PreviousCollapse}};
    for (const Entry& e : entries) {
        QAction* a = nullptr;
        if (e.jump == Jump::NextCollapse && nextCollapse) {
            jumpMenu_->addAction(nextCollapse); // View's Ctrl+J, one action for one shortcut
            a = nextCollapse;
        } else {
            a = jumpMenu_->addAction(e.text, e.key, this, [this, j = e.jump] {
                if (!jump(j)) statusBar()->showMessage(tr("No such moment in this track"), 3000);
            });
        }
        jumpActions_ << a;
    }
    oomMenu_ = jumpMenu_->addMenu(tr("&OOMs"));
    oomMenu_->setEnabled(false);
    go->addSeparator();
    go->addAction(tr("&Search blocks…"), QKeySequence::Find, this, [this] {
        if (auto* d = findChild<QDockWidget*>(QStringLiteral("searchDock"))) {
            d->show();
            d->raise();
        }
        search_->edit()->setFocus();
        search_->edit()->selectAll();
    });
    cursorBar_->setActions({prevEvent, nextEvent, prevFrame, nextFrame}, jumpMenu_);
    if (view) {
        view->addSeparator();
        QMenu* layout = view->addMenu(tr("&Layout"));
        layout->addAction(tr("&Default"), this, [this] { applyLayout(Layout::Default); });
        layout->addAction(tr("&Inspector first"), this,
                          [this] { applyLayout(Layout::InspectorFirst); });
        layout->addAction(tr("&Explore (block list, call sites)"), this,
                          [this] { applyLayout(Layout::Explore); });
        view->addAction(tr("Reset &layout"), this, [this] { applyLayout(Layout::Default); });
        for (const char* name : {"blocksDock", "callSitesDock", "searchDock"})
            if (auto* d = findChild<QDockWidget*>(QLatin1String(name)))
                view->addAction(d->toggleViewAction());
    }
    defaultLayout_ = saveState(); // before the saved layout is restored: View › Reset layout
}

bool MainWindow::exploreBusy() const
{
    return (cursorWorker_ && cursorWorker_->busy()) || (callSites_ && callSites_->busy()) ||
           (search_ && search_->busy());
}

void MainWindow::setCursorTime(int64_t t)
{
    if (!scene_ || t == kNoTime) return;
    cursor_->setTime(std::clamp(t, scene_->timeBegin(), scene_->timeEnd()));
}

void MainWindow::onCursorMoved(int64_t t)
{
    heatmap_->setTimeCursor(t);
    timeline_->setCursor(t);
    kernels_->setCursor(t);
    callSites_->setCursor(t);
    search_->setCursor(t);
    if (scene_ && t != kNoTime)
        cursorWorker_->request(scene_, track_, t, selection_->current().frame);
}

void MainWindow::onSnapshot(std::shared_ptr<const views::CursorSnapshot> s)
{
    // One of this session and track (the complete scene replaces the first look's: same engine).
    if (!scene_ || !s->scene || s->scene->engine != scene_->engine || s->track != track_) return;
    snapshot_ = s;
    histogram_->setSnapshot(s);
    memmap_->setSnapshot(s);
    timeline_->setCursorValues(*s);
    cursorBar_->setSnapshot(*s, fragmentedRule_, stateOnly_);
    if (!s->blocks) {
        blockList_->setMessage(render::canExplore(*scene_) ? tr("No blocks on this track.")
                                                           : tr("Reading the session…"));
    } else {
        const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
        const auto& b = *s->blocks;
        const analysis::BlockCounts n = analysis::countRows(b.rows);
        const QString pending = n.pending > 0 ? tr(", %1 pending frees").arg(n.pending) : QString();
        QString head = stateOnly_
                           ? tr("End state (the only instant this snapshot records): "
                                "%1 blocks and %2 free fragments%3")
                                 .arg(n.blocks)
                                 .arg(n.fragments)
                                 .arg(pending)
                           : tr("%1 blocks and %2 free fragments%3 at %4%5")
                                 .arg(n.blocks)
                                 .arg(n.fragments)
                                 .arg(pending)
                                 .arg(when(*scene_, s->time))
                                 .arg(s->frame >= 0 ? tr(" (frame %1)").arg(s->frame) : QString());
        if (ld.pool)
            head += tr(", pool %1 only")
                        .arg(QString::fromStdString(analysis::poolLabel(*ld.pool, ld.level)));
        if (!b.attributes) head += tr(" · reading tags and call sites…");
        blockList_->setRows(b.rows, s->time, scene_->timeBegin(), scene_->summary.timeAxis,
                            ld.level, head);
        blockList_->selectAllocation(selection_->current().allocId);
    }
    emit cursorShown(s->time);
}

void MainWindow::stepEvent(int dir)
{
    if (!scene_ || !render::canExplore(*scene_)) return;
    const int64_t from = cursor_->isSet() ? cursor_->time() : scene_->timeBegin();
    const int64_t t = render::stepEvent(*scene_, track_, from, dir);
    if (t == kNoTime) {
        statusBar()->showMessage(
            dir < 0 ? tr("No earlier allocator event") : tr("No later allocator event"), 3000);
        return;
    }
    setCursorTime(t);
    const render::Viewport vp = heatmap_->viewport();
    if (t < vp.t0 || t > vp.t1)
        heatmap_->zoomToTime(t - (vp.t1 - vp.t0) / 4, t + (vp.t1 - vp.t0) / 4);
}

void MainWindow::stepFrame(int dir)
{
    if (!scene_) return;
    const int64_t t = cursor_->isSet() ? cursor_->time() : scene_->timeBegin();
    const analysis::FrameInfo* pick = nullptr;
    for (const auto& f : scene_->frames) {
        if (f.start == kNoTime) continue;
        if (dir > 0 && f.end > t && (!pick || f.end < pick->end)) pick = &f;
        if (dir < 0 && f.end < t && (!pick || f.end > pick->end)) pick = &f;
    }
    if (!pick) {
        statusBar()->showMessage(
            scene_->frames.empty() ? tr("This session has no frames") : tr("No frame there"), 3000);
        return;
    }
    selection_->selectFrame(*scene_, pick->index); // the cursor follows to its end
}

bool MainWindow::jump(Jump j)
{
    if (!scene_) return false;
    int64_t t = kNoTime;
    switch (j) {
    case Jump::MaxRatio:
        if (jumps_) t = jumps_->maxRatioTime;
        break;
    case Jump::PeakReserved:
        if (jumps_) t = jumps_->peakReservedTime;
        break;
    case Jump::MinLargest:
        if (jumps_) t = jumps_->minLargestTime;
        break;
    case Jump::NextOom:
    case Jump::PreviousOom: {
        const std::vector<int64_t> ooms = render::oomTimes(*scene_);
        if (ooms.empty()) return false;
        const int64_t c = cursor_->isSet() ? cursor_->time() : kNoTime;
        if (j == Jump::NextOom) {
            const auto it = std::upper_bound(ooms.begin(), ooms.end(), c);
            t = it == ooms.end() ? ooms.front() : *it; // wraps, as Ctrl+J does
        } else {
            const auto it = std::lower_bound(ooms.begin(), ooms.end(), c);
            t = it == ooms.begin() ? ooms.back() : *std::prev(it);
        }
        Selection s = selection_->current();
        if (const analysis::FrameInfo* f = scene_->frameAt(t)) {
            selection_->selectFrame(*scene_, f->index);
            s = selection_->current();
        }
        s.marker = t; // the cursor follows the marked instant
        selection_->select(s);
        break;
    }
    case Jump::NextCollapse:
    case Jump::PreviousCollapse: {
        if (scene_->collapses.empty()) return false;
        const int64_t cur = selection_->current().frame;
        const analysis::Collapse* pick = nullptr;
        for (const auto& c : scene_->collapses) {
            if (j == Jump::NextCollapse && c.firstFrame > cur) {
                pick = &c;
                break;
            }
            if (j == Jump::PreviousCollapse && c.firstFrame < cur) pick = &c;
        }
        if (!pick)
            pick = j == Jump::NextCollapse ? &scene_->collapses.front() : &scene_->collapses.back();
        selection_->selectFrame(*scene_, pick->firstFrame);
        return true;
    }
    }
    if (t == kNoTime) return false;
    setCursorTime(t);
    const render::Viewport vp = heatmap_->viewport();
    if (t < vp.t0 || t > vp.t1)
        heatmap_->zoomToTime(t - (vp.t1 - vp.t0) / 4, t + (vp.t1 - vp.t0) / 4);
    return true;
}

void MainWindow::updateHeatmapStyle()
{
    analysis::HeatmapStyle style;
    style.colouring = highlight_.isEmpty() ? colourBy_ : analysis::Colouring::Search;
    style.query = highlight_.toStdString();
    style.categoryRules = categoryRules_;
    const analysis::HeatmapStyle& now = heatmap_->style();
    if (now.colouring != style.colouring || now.query != style.query) heatmap_->setStyle(style);
}

void MainWindow::fillOomMenu()
{
    oomMenu_->clear();
    const std::vector<int64_t> ooms = scene_ ? render::oomTimes(*scene_) : std::vector<int64_t>{};
    heatmap_->setOoms(ooms);
    timeline_->setOoms(ooms);
    kernels_->setOoms(ooms);
    oomMenu_->setEnabled(!ooms.empty());
    if (!scene_ || !scene_->ooms) return;
    for (const auto& o : *scene_->ooms)
        oomMenu_->addAction(tr("%1 — %2, %3 requested")
                                .arg(when(*scene_, o.time), QString::fromStdString(o.cause),
                                     QString::fromStdString(render::formatBytes(
                                         static_cast<double>(o.requestedBytes)))),
                            this, [this, t = o.time] {
                                Selection s = selection_->current();
                                s.marker = t;
                                selection_->select(s);
                            });
}

namespace {

// Jump targets and whether only an end state is known, off the GUI thread (a timeline at the
// report's step: seconds on a long run).
struct Extras
{
    std::optional<analysis::JumpTargets> jumps;
    bool stateOnly = false;
};

} // namespace

void MainWindow::exploreLevel()
{
    if (!scene_) return;
    blockList_->setMessage(tr("Reading the blocks…"));
    callSites_->setScene(scene_, track_);
    search_->setScene(scene_, track_);
    heatmap_->setFragmentHighlight(0, 0);
    jumps_.reset();
    for (QAction* a : jumpActions_.mid(0, 3))
        a->setEnabled(false);
    // Not while recording: a timeline of the whole run every refresh would hold the engine's
    // read lock the refresh needs to write (the finished session computes them once).
    if (render::canExplore(*scene_) && !scene_->live) {
        jumpJobs_->start(
            [scene = scene_, track = track_](const views::Job&) {
                auto x = std::make_shared<Extras>();
                x->jumps = render::jumpTargets(*scene, track);
                x->stateOnly = render::stateOnly(*scene);
                return x;
            },
            [this](std::shared_ptr<Extras> x) {
                jumps_ = x->jumps;
                stateOnly_ = x->stateOnly;
                for (QAction* a : jumpActions_.mid(0, 3))
                    a->setEnabled(jumps_.has_value());
                heatmap_->setNote(
                    stateOnly_ ? tr("Only the end state is known: this snapshot has no trace, so "
                                    "every block is drawn from the one instant it records.")
                               : QString());
                if (snapshot_) onSnapshot(snapshot_); // says so
            });
    } else {
        jumpJobs_->cancel(); // an older track's targets are not this one's
    }
    if (cursor_->isSet()) cursorWorker_->request(scene_, track_, cursor_->time(), -1);
}

void MainWindow::exploreScene(bool keepView)
{
    snapshot_.reset();
    fillOomMenu();
    const int64_t start = views::CursorWorker::defaultTime(*scene_);
    if (!keepView || !cursor_->isSet()) {
        shownFrame_ = -1;
        shownMarker_ = kNoTime;
        if (cursor_->time() == start)
            onCursorMoved(start); // the same instant of another session
        else
            cursor_->setTime(start);
        adaptLayout();
    } else {
        setCursorTime(cursor_->time()); // a live refresh: kept, within the grown session
        onCursorMoved(cursor_->time());
    }
}

void MainWindow::exploreCompleted()
{
    // The complete scene: the records are read, the OOMs diagnosed.
    fillOomMenu();
    exploreLevel();
    if (cursor_->isSet()) onCursorMoved(cursor_->time());
}

void MainWindow::exploreSelection(const Selection& s)
{
    // A selection that moved the heatmap (Ctrl+J, a frame, an OOM) moves the timelines' shared
    // axis with it.
    const render::Viewport vp = heatmap_->viewport();
    const auto [a, b] = timeline_->timeRange();
    const int64_t tol = std::max<int64_t>(1, (vp.t1 - vp.t0) / 1000);
    if (std::llabs(a - vp.t0) > tol || std::llabs(b - vp.t1) > tol)
        timeline_->setTimeRange(vp.t0, vp.t1);
    // The cursor follows a newly marked instant (precursor, OOM), else a new frame's end.
    if (s.marker != shownMarker_ && s.marker != kNoTime) {
        setCursorTime(s.marker);
    } else if (s.frame != shownFrame_ && scene_) {
        const analysis::FrameInfo* f = scene_->frame(s.frame);
        const int64_t before = cursor_->time();
        if (f && f->start != kNoTime) setCursorTime(f->end);
        // Already there: the same instant, now the selected frame's end (the histogram's
        // comparison with the frame before).
        if (f && cursor_->time() == before && before != kNoTime)
            cursorWorker_->request(scene_, track_, before, s.frame);
    }
    shownFrame_ = s.frame;
    shownMarker_ = s.marker;
    callSites_->setSelectionRange(s.from, s.to);
    blockList_->selectAllocation(s.allocId);
}

void MainWindow::exploreScreenshots(const std::function<void(const QString&)>& shot)
{
    if (!scene_ || track_ < 0) return;
    auto raise = [this](const char* name) {
        if (auto* d = findChild<QDockWidget*>(QLatin1String(name))) {
            d->show();
            d->raise();
        }
    };
    // The cursor at max F with the blocks and fragments there, the largest block selected.
    auto settle = [](const std::function<bool()>& done) {
        QElapsedTimer wait;
        wait.start();
        while (!done() && wait.elapsed() < 60000) {
            QApplication::processEvents(QEventLoop::AllEvents, 50);
            QThread::msleep(5);
        }
    };
    settle([this] { return jumps_.has_value(); });
    heatmap_->fit();
    if (jump(Jump::MaxRatio)) {
        // The block list of that instant (the worker's snapshot), not the one before.
        settle(
            [this] { return !exploreBusy() && snapshot_ && snapshot_->time == cursor_->time(); });
        raise("blocksDock");
        // The largest blocks first, the largest selected (its details and whole life shown).
        QTableView* t = blockList_->table();
        t->sortByColumn(views::BlockListModel::Size, Qt::DescendingOrder);
        t->scrollToTop();
        t->selectRow(0);
        heatmap_->fit();
        shot(QStringLiteral("gui-cursor.png"));
    }
    // The top call sites up to the cursor, the heatmap coloured by them (by tag when the
    // session recorded no stacks).
    applyLayout(Layout::Explore);
    callSites_->setGroupBy(
        snapshot_ && snapshot_->blocks &&
                std::none_of(snapshot_->blocks->rows.begin(), snapshot_->blocks->rows.end(),
                             [](const analysis::BlockRow& r) { return !r.site.empty(); })
            ? analysis::GroupBy::Tag
            : analysis::GroupBy::CallSite);
    callSites_->setColourHeatmap(true);
    shot(QStringLiteral("gui-callsites.png"));
    callSites_->setColourHeatmap(false);
    applyLayout(Layout::Default);
}

} // namespace fs::gui
