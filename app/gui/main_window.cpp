#include "main_window.h"

#include "compare_window.h"
#include "ranks_window.h"
#include "study_window.h"
#include "whatif_controller.h"

#include "core/analysis/history.h"
#include "core/versions.h"
#include "widgets/correlation_table.h"
#include "widgets/cursor_bar.h"
#include "widgets/frames_model.h"
#include "widgets/graphs_panel.h"
#include "widgets/heatmap_widget.h"
#include "widgets/oom_list.h"
#include "widgets/panels.h"
#include "widgets/plot_widgets.h"
#include "widgets/worker_pool.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QInputDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTableView>
#include <QTimer>
#include <QToolBar>

namespace fs::gui {

using views::Selection;

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent)
{
    setWindowTitle(QStringLiteral("fragscope"));
    setAcceptDrops(true);
    setDockNestingEnabled(true);
    loader_ = new SessionLoader(this);
    selection_ = new views::SelectionModel(this);
    reportError_ = [this](const QString& title, const QString& text) {
        // Non-modal: the window keeps running and tests never block on it.
        auto* box = new QMessageBox(QMessageBox::Critical, title, text, QMessageBox::Ok, this);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();
    };
    dark_ = QApplication::palette().color(QPalette::Window).lightness() < 128;
    heatmap_ = new views::HeatmapWidget(this);
    setCentralWidget(buildCentral()); // the heatmap under the cursor bar
    buildDocks();
    buildExploreDocks();
    buildMenus();
    buildExploreMenus();

    auto* sb = statusBar();
    healthLabel_ = new QLabel(this);
    syntheticLabel_ = new QLabel(this);
    syntheticLabel_->setStyleSheet(QStringLiteral(
        "QLabel { background: #c58a00; color: black; padding: 0 6px; font-weight: bold; }"));
    syntheticLabel_->hide();
    axisLabel_ = new QLabel(this);
    liveLabel_ = new QLabel(this);
    liveLabel_->setStyleSheet(QStringLiteral(
        "QLabel { background: #c02020; color: white; padding: 0 6px; font-weight: bold; }"));
    liveLabel_->hide();
    liveTimer_ = new QTimer(this);
    liveTimer_->setInterval(kLiveRefreshMs);
    connect(liveTimer_, &QTimer::timeout, this, &MainWindow::refreshLive);
    progress_ = new QProgressBar(this);
    progress_->setMaximumWidth(220);
    progress_->setRange(0, 100);
    progress_->hide();
    cancelButton_ = new QPushButton(tr("Cancel"), this);
    cancelButton_->hide();
    sb->addWidget(healthLabel_, 1);
    sb->addPermanentWidget(liveLabel_);
    sb->addPermanentWidget(syntheticLabel_);
    sb->addPermanentWidget(axisLabel_);
    sb->addPermanentWidget(progress_);
    sb->addPermanentWidget(cancelButton_);
    connect(cancelButton_, &QPushButton::clicked, loader_, &SessionLoader::cancel);

    connect(loader_, &SessionLoader::started, this, [this](const QString& p) {
        if (loader_->live()) return; // live refreshes come and go several times a second
        progress_->setValue(0);
        progress_->show();
        cancelButton_->show();
        statusBar()->showMessage(tr("Loading %1…").arg(QFileInfo(p).fileName()));
    });
    connect(loader_, &SessionLoader::summaryRead, this,
            [this](const QString& p, const SessionSummary& sum) {
                if (loader_->live()) return;
                statusBar()->showMessage(
                    tr("Loading %1: %2 events, %3 allocations, %4 frames, %5 device(s)%6…")
                        .arg(QFileInfo(p).fileName())
                        .arg(sum.events)
                        .arg(sum.allocations)
                        .arg(sum.frames)
                        .arg(sum.devices.size())
                        .arg(sum.synthetic ? tr(", synthetic") : QString()));
            });
    connect(loader_, &SessionLoader::imported, this,
            [this](const QString& in, const QString& session, bool reused) {
                statusBar()->showMessage(
                    (reused ? tr("%1 unchanged: opening its session %2…")
                            : tr("Imported %1 into %2; loading…"))
                        .arg(QFileInfo(in).fileName(), QDir::toNativeSeparators(session)));
            });
    connect(loader_, &SessionLoader::progress, this, [this](int pct, const QString& stage) {
        progress_->setValue(pct);
        progress_->setFormat(stage + QStringLiteral(" %p%"));
    });
    // A session read without its stored index: the heatmap's level-of-detail picture of every
    // block until the first look (the other views have nothing to show before it).
    connect(loader_, &SessionLoader::previewed, this,
            [this](const QString& p, std::shared_ptr<const render::Scene> s) {
                previewing_ = true;
                heatmap_->setScene(std::move(s), 0);
                if (!scene_) // the cursor bar said "No session." above the picture
                    cursorBar_->setMessage(tr("Loading %1…").arg(QFileInfo(p).fileName()));
                heatmap_->setNote(tr("First look at %1: every block, at reduced resolution, "
                                     "while the session is indexed")
                                      .arg(QFileInfo(p).fileName()));
            });
    connect(loader_, &SessionLoader::loaded, this,
            [this](const QString& p, std::shared_ptr<const render::Scene> s) {
                if (s->live) {
                    if (recording() && p == recordingPath_) showLive(p, std::move(s));
                    return;
                }
                endPreview(false);
                progress_->hide();
                cancelButton_->hide();
                statusBar()->clearMessage();
                setScene(p, std::move(s));
            });
    // The complete scene after the first look (same engine): only the views that need the
    // allocation records or the OOM diagnoses take it; the heatmap, the timelines and the
    // frames table keep drawing what they have (no second replot).
    connect(loader_, &SessionLoader::completed, this,
            [this](const QString&, std::shared_ptr<const render::Scene> s) {
                if (!scene_ || scene_->engine != s->engine) return;
                scene_ = std::move(s);
                fillTrackBox(); // the pools' entries come with the records
                syncing_ = true;
                for (views::Panel* panel : panels_)
                    if (panel->needsCompleteScene()) panel->showScene(scene_, track_);
                syncing_ = false;
                onSelection(selection_->current());
                exploreCompleted();
                updateStatus();
                emit sceneReplaced();
            });
    connect(loader_, &SessionLoader::failed, this, [this](const QString& p, const QString& msg) {
        if (loader_->live()) {
            // Before the recorder's first commit the file is not a session yet: keep waiting.
            if (recording()) statusBar()->showMessage(tr("Waiting for the first events…"), 2000);
            return;
        }
        endPreview(true);
        progress_->hide();
        cancelButton_->hide();
        statusBar()->showMessage(tr("Could not open %1").arg(QFileInfo(p).fileName()), 8000);
        reportError_(tr("Cannot open session"), msg);
    });
    connect(loader_, &SessionLoader::cancelled, this, [this](const QString& p) {
        endPreview(true);
        progress_->hide();
        cancelButton_->hide();
        statusBar()->showMessage(tr("Loading %1 cancelled; still showing the previous session")
                                     .arg(QFileInfo(p).fileName()),
                                 8000);
    });
    connect(selection_, &views::SelectionModel::changed, this, &MainWindow::onSelection);
    connect(heatmap_, &views::HeatmapWidget::allocationClicked, this, [this](int64_t id) {
        Selection s = selection_->current();
        s.allocId = id;
        selection_->select(s);
    });
    connect(heatmap_, &views::HeatmapWidget::viewportChanged, this,
            [this](const render::Viewport& vp) {
                if (!syncing_ && !previewing_) timeline_->setTimeRange(vp.t0, vp.t1);
            });
    connect(timeline_, &views::TimelineWidget::timeClicked, this, [this](int64_t t) {
        if (!scene_) return;
        if (const analysis::FrameInfo* f = scene_->frameAt(t))
            selection_->selectFrame(*scene_, f->index);
    });
    connect(inspector_, &views::CollapseInspector::precursorActivated, this,
            [this](int row, int64_t t, int64_t alloc) {
                Selection s = selection_->current();
                s.precursor = row;
                s.allocId = alloc;
                s.marker = t;
                selection_->select(s);
                // Show the precursor's instant with a little context around it.
                const int64_t span = std::max<int64_t>(
                    1000, (heatmap_->viewport().t1 - heatmap_->viewport().t0) / 4);
                heatmap_->zoomToTime(t - span / 2, t + span / 2);
            });

    QSettings st;
    // First start: most of the screen (the views need room), not the widgets' minimum size.
    if (!restoreGeometry(st.value(QStringLiteral("window/geometry")).toByteArray()))
        if (const QScreen* scr = QGuiApplication::primaryScreen())
            resize(scr->availableGeometry().size() * 0.9);
    restoreState(st.value(QStringLiteral("window/state")).toByteArray());
    if (st.contains(QStringLiteral("view/dark")))
        dark_ = st.value(QStringLiteral("view/dark")).toBool();
    setDark(dark_);
    updateStatus();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildDocks()
{
    auto dock = [this](const QString& title, const QString& name, QWidget* w,
                       Qt::DockWidgetArea area) {
        auto* d = new QDockWidget(title, this);
        d->setObjectName(name); // saveState/restoreState find docks by object name
        d->setWidget(w);
        addDockWidget(area, d);
        return d;
    };
    framesModel_ = new views::FramesModel(this);
    framesProxy_ = new QSortFilterProxyModel(this);
    framesProxy_->setSourceModel(framesModel_);
    framesProxy_->setSortRole(views::FramesModel::SortRole);
    framesView_ = new QTableView(this);
    framesView_->setModel(framesProxy_);
    framesView_->setSortingEnabled(true);
    // Column widths from the first rows: measuring every row of a long run stalls the window.
    framesView_->horizontalHeader()->setResizeContentsPrecision(64);
    framesView_->sortByColumn(views::FramesModel::Index, Qt::AscendingOrder);
    framesView_->setSelectionBehavior(QAbstractItemView::SelectRows);
    framesView_->setSelectionMode(QAbstractItemView::SingleSelection);
    framesView_->verticalHeader()->hide();
    framesView_->verticalHeader()->setDefaultSectionSize(20);
    connect(framesView_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                if (syncing_ || !cur.isValid() || !scene_) return;
                const qlonglong f =
                    framesProxy_->data(cur, views::FramesModel::FrameIndexRole).toLongLong();
                selection_->selectFrame(*scene_, f);
            });
    auto* framesDock =
        dock(tr("Frames"), QStringLiteral("framesDock"), framesView_, Qt::LeftDockWidgetArea);

    inspector_ = new views::CollapseInspector(this);
    auto* inspDock = dock(tr("Collapse inspector"), QStringLiteral("inspectorDock"), inspector_,
                          Qt::RightDockWidgetArea);
    details_ = new views::AllocationDetails(this);
    auto* detDock = dock(tr("Allocation details"), QStringLiteral("detailsDock"), details_,
                         Qt::RightDockWidgetArea);
    tabifyDockWidget(inspDock, detDock);
    oomList_ = new views::OomList(this);
    tabifyDockWidget(
        detDock, dock(tr("OOMs"), QStringLiteral("oomDock"), oomList_, Qt::RightDockWidgetArea));
    correlations_ = new views::CorrelationTable(this);
    tabifyDockWidget(detDock, dock(tr("Correlations"), QStringLiteral("correlationDock"),
                                   correlations_, Qt::RightDockWidgetArea));
    // An OOM drives the views like a collapse: its frame, its instant marked and zoomed to.
    connect(oomList_, &views::OomList::oomActivated, this, [this](int64_t t) {
        if (!scene_) return;
        if (const analysis::FrameInfo* f = scene_->frameAt(t))
            selection_->selectFrame(*scene_, f->index);
        Selection s = selection_->current();
        s.marker = t;
        selection_->select(s);
        const int64_t span =
            std::max<int64_t>(1000, (heatmap_->viewport().t1 - heatmap_->viewport().t0) / 4);
        heatmap_->zoomToTime(t - span / 2, t + span / 2);
    });
    // CUDA graphs and pools: the replay lane on the timelines and the selected graph's pool
    // outlined on the heatmap come from the panel's report.
    graphs_ = new views::GraphsPanel(this);
    tabifyDockWidget(detDock, dock(tr("Graphs"), QStringLiteral("graphsDock"), graphs_,
                                   Qt::RightDockWidgetArea));
    connect(graphs_, &views::GraphsPanel::reportReady, this,
            [this](auto r) { timeline_->setGraphs(std::move(r)); });
    connect(graphs_, &views::GraphsPanel::poolOutlined, this,
            [this](const views::PoolOutline& o) { heatmap_->setPoolOutline(o); });
    inspDock->raise();

    histogram_ = new views::HistogramWidget(this);
    auto* histDock = dock(tr("Fragment histogram"), QStringLiteral("histogramDock"), histogram_,
                          Qt::RightDockWidgetArea);
    memmap_ = new views::MemMapWidget(this);
    auto* mapDock =
        dock(tr("Memory map"), QStringLiteral("memmapDock"), memmap_, Qt::RightDockWidgetArea);
    tabifyDockWidget(histDock, mapDock);
    histDock->raise();

    timeline_ = new views::TimelineWidget(this);
    auto* tlDock =
        dock(tr("Timelines"), QStringLiteral("timelineDock"), timeline_, Qt::BottomDockWidgetArea);
    kernels_ = new views::KernelLaneWidget(this);
    auto* kDock = dock(tr("Kernels and graph launches"), QStringLiteral("kernelsDock"), kernels_,
                       Qt::LeftDockWidgetArea);
    splitDockWidget(framesDock, kDock, Qt::Vertical);
    resizeDocks({framesDock, inspDock}, {430, 520}, Qt::Horizontal);
    resizeDocks({tlDock}, {380}, Qt::Vertical);
    resizeDocks({inspDock, histDock}, {440, 300}, Qt::Vertical);
    resizeDocks({framesDock, kDock}, {520, 110}, Qt::Vertical);
    panels_ = {heatmap_, histogram_, memmap_,       inspector_, details_,
               kernels_, oomList_,   correlations_, graphs_};
}

void MainWindow::buildMenus()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    // What Open takes, Compare with… takes too (compare_window.h imports a trace first).
    const QString inputs =
        tr("Sessions and traces (*.fragscope *.pickle *.pkl *.json *.json.gz *.sqlite);;"
           "fragscope sessions (*.fragscope);;All files (*)");
    file->addAction(tr("&Open…"), QKeySequence::Open, this, [this, inputs] {
        const QString p =
            QFileDialog::getOpenFileName(this, tr("Open session or trace"), {}, inputs);
        if (!p.isEmpty()) openFile(p);
    });
    recentMenu_ = file->addMenu(tr("Open &Recent"));
    rebuildRecentMenu();
    file->addAction(tr("&Import…"), QKeySequence(tr("Ctrl+I")), this, &MainWindow::importDialog);
    file->addAction(tr("&Compare with…"), this, [this, inputs] { // compare_window.h
        const QString a =
            !path_.isEmpty()
                ? path_
                : QFileDialog::getOpenFileName(this, tr("Compare: session A"), {}, inputs);
        if (a.isEmpty()) return;
        const QString b = QFileDialog::getOpenFileName(
            this, tr("Compare %1 with").arg(QFileInfo(a).fileName()), {}, inputs);
        if (!b.isEmpty()) compareWith(a, b);
    });
    file->addAction(tr("Open &ranks…"), this, [this] { openRanksDialog(this); }); // ranks_window.h
    whatIf_ = new WhatIfController(
        this, [this](const QString& title, const QString& text) { reportError_(title, text); });
    file->addAction(whatIf_->action());
    buildVideo(file);
    file->setToolTipsVisible(true); // a disabled entry says why
    QAction* attach = file->addAction(tr("&Attach…"), QKeySequence(tr("Ctrl+Shift+A")), this,
                                      &MainWindow::attachDialog);
    if (!fs::captureBuilt()) {
        attach->setEnabled(false);
        attach->setToolTip(QString::fromUtf8(fs::noCaptureReason()));
        file->setToolTipsVisible(true);
    }
    stopRecordingAction_ = file->addAction(tr("S&top recording"), QKeySequence(tr("Ctrl+Shift+T")),
                                           this, &MainWindow::stopRecording);
    stopRecordingAction_->setEnabled(false);
    markRecordingAction_ =
        file->addAction(tr("&Mark this moment"), QKeySequence(tr("Ctrl+Shift+M")), this,
                        &MainWindow::markRecording);
    markRecordingAction_->setToolTip(tr("Put a trigger mark in the recorded process's stream "
                                        "(fragscope mark): a flight recording writes a window "
                                        "around it"));
    markRecordingAction_->setEnabled(false);
    file->addSeparator();
    file->addAction(tr("&Export view…"), QKeySequence(tr("Ctrl+E")), this,
                    &MainWindow::showExportDialog);
    file->addAction(tr("Export &report…"), QKeySequence(tr("Ctrl+Shift+E")), this,
                    &MainWindow::exportReportDialog);
    connect(this, &MainWindow::reportExported, this, [this](const QString& p, const QString& err) {
        if (err.isEmpty())
            statusBar()->showMessage(tr("Report written to %1").arg(p), 6000);
        else
            reportError_(tr("Export report failed"), err);
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    auto* view = menuBar()->addMenu(tr("&View"));
    backAction_ = view->addAction(tr("&Back"), QKeySequence(Qt::ALT | Qt::Key_Left), selection_,
                                  &views::SelectionModel::back);
    forwardAction_ = view->addAction(tr("&Forward"), QKeySequence(Qt::ALT | Qt::Key_Right),
                                     selection_, &views::SelectionModel::forward);
    view->addAction(tr("&Fit heatmap"), QKeySequence(Qt::CTRL | Qt::Key_0), heatmap_,
                    &views::HeatmapWidget::fit);
    view->addAction(tr("Re&port…"), QKeySequence(tr("Ctrl+Shift+R")), this,
                    &MainWindow::showReport);
    view->addAction(tr("Next &collapse"), QKeySequence(Qt::CTRL | Qt::Key_J), this, [this] {
        if (!scene_ || scene_->collapses.empty()) return;
        const int64_t cur = selection_->current().frame;
        for (const auto& c : scene_->collapses)
            if (c.firstFrame > cur) {
                selection_->selectFrame(*scene_, c.firstFrame);
                return;
            }
        selection_->selectFrame(*scene_, scene_->collapses.front().firstFrame);
    });
    view->addAction(tr("Collapse &rules…"), QKeySequence(tr("Ctrl+R")), this,
                    &MainWindow::editRules);
    auto* darkAct = view->addAction(tr("&Dark theme"));
    darkAct->setCheckable(true);
    darkAct->setChecked(dark_);
    connect(darkAct, &QAction::toggled, this, [this](bool on) {
        setDark(on);
        QSettings().setValue(QStringLiteral("view/dark"), on);
    });
    view->addSeparator();
    for (auto* d : findChildren<QDockWidget*>())
        view->addAction(d->toggleViewAction());

    auto* tb = addToolBar(tr("Navigation"));
    tb->setObjectName(QStringLiteral("navigationToolbar"));
    tb->addAction(backAction_);
    tb->addAction(forwardAction_);
    tb->addSeparator();
    tb->addWidget(new QLabel(tr(" Track: "), this));
    trackBox_ = new QComboBox(this);
    trackBox_->setObjectName(QStringLiteral("trackBox"));
    trackBox_->setMinimumContentsLength(22);
    trackBox_->setSizeAdjustPolicy(QComboBox::AdjustToContents); // a pool's entry is longer
    trackBox_->setToolTip(tr("Device and allocation level shown by every view"));
    tb->addWidget(trackBox_);
    connect(trackBox_, qOverload<int>(&QComboBox::activated), this,
            [this](int i) { setTrack(trackBox_->itemData(i).toInt()); });
    tb->addAction(tr("Fit (F)"), heatmap_, &views::HeatmapWidget::fit);
    tb->addAction(tr("Rules…"), this, &MainWindow::editRules);

    auto* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Shortcuts"), QKeySequence::HelpContents, this, &MainWindow::showShortcuts);
    help->addAction(tr("&About fragscope"), this, &MainWindow::showAbout);
}

CompareWindow* MainWindow::compareWith(const QString& a, const QString& b)
{
    auto* w = new CompareWindow(a, b, this);
    w->setAttribute(Qt::WA_DeleteOnClose);
    connect(w, &CompareWindow::loaded, this, [this, w](bool ok, const QString& error) {
        if (ok) return;
        reportError_(tr("Cannot compare"), error);
        w->close();
    });
    w->show();
    return w;
}

void MainWindow::openFile(const QString& path)
{
    if (StudyWindow::openIfStudy(path)) return; // a `fragscope ab` study: its own window
    // Rules the user saved apply to every session; the worker evaluates them.
    loader_->setRules(views::RulesEditor::enabled(views::RulesEditor::load()));
    loader_->load(path);
}

void MainWindow::setScene(const QString& path, std::shared_ptr<const render::Scene> scene)
{
    path_ = path;
    addRecent(path);
    setWindowTitle(QStringLiteral("%1 — fragscope").arg(QFileInfo(path).fileName()));
    replaceScene(std::move(scene), false);
}

void MainWindow::endPreview(bool restore)
{
    if (!previewing_) return;
    previewing_ = false;
    heatmap_->setNote({});
    // A failed or cancelled load: the heatmap shows the session the other views show again.
    if (restore) heatmap_->setScene(scene_, scene_ ? track_ : -1);
    if (restore && !scene_) cursorBar_->setMessage(tr("No session."));
}

void MainWindow::replaceScene(std::shared_ptr<const render::Scene> scene, bool keepView)
{
    // keepView: the same session again (a live refresh, new collapse rules): the track, the
    // selection and a zoomed-in heatmap stay; a heatmap showing the whole run keeps showing the
    // whole (growing) run. Otherwise the defaults of a freshly opened session.
    const QString track = trackBox_->currentText();
    const render::Viewport vp = heatmap_->viewport();
    const bool following = !scene_ || (vp.t0 <= scene_->timeBegin() && vp.t1 >= scene_->timeEnd());
    // The replaced scene (millions of records and the engine's index) is freed on a worker
    // once every view has let go of it: freeing it here would stall the event loop.
    std::shared_ptr<const render::Scene> old = std::move(scene_);
    scene_ = std::move(scene);
    if (old) views::workerPool().start([o = std::move(old)]() mutable { o.reset(); });
    fillTrackBox();
    int idx = keepView ? trackBox_->findText(track) : -1;
    if (idx < 0) idx = trackBox_->findData(scene_->defaultTrack());
    trackBox_->setCurrentIndex(std::max(0, idx));
    for (views::Panel* panel : panels_)
        if (panel->follows() == views::Panel::Follows::Session) panel->showScene(scene_, track_);
    setTrack(idx >= 0 ? trackBox_->itemData(idx).toInt() : scene_->defaultTrack(), true);
    if (!keepView)
        selection_->clear();
    else if (!following)
        heatmap_->setViewport(vp);
    whatIf_->setSession(path_, scene_);
    exploreScene(keepView);
    updateStatus();
    emit sceneReplaced();
}

void MainWindow::fillTrackBox()
{
    // Each track, then its pools' entries (render::addPoolTracks) under it, indented.
    const QSignalBlocker block(trackBox_);
    const int current = trackBox_->currentData().toInt();
    trackBox_->clear();
    const auto& tracks = scene_->tracks;
    for (size_t i = 0; i < tracks.size(); ++i) {
        if (tracks[i].pool) continue;
        trackBox_->addItem(QString::fromStdString(tracks[i].label()), static_cast<int>(i));
        for (size_t j = 0; j < tracks.size(); ++j)
            if (tracks[j].pool && tracks[j].device == tracks[i].device &&
                tracks[j].level == tracks[i].level)
                trackBox_->addItem(QStringLiteral("    ") +
                                       QString::fromStdString(tracks[j].label()),
                                   static_cast<int>(j));
    }
    trackBox_->setCurrentIndex(std::max(0, trackBox_->findData(current)));
}

bool MainWindow::busy() const
{
    return loader_->busy() || stagesPending_ > 0 || exploreBusy();
}

void MainWindow::setTrack(int track, bool staged)
{
    endPreview(false); // a track picked while a load previews: the heatmap shows scene_ again
    track_ = track;
    // A pool's entry plots that pool's figures: the timelines' title says which.
    if (auto* dock = findChild<QDockWidget*>(QStringLiteral("timelineDock")))
        dock->setWindowTitle(track >= 0 && track < static_cast<int>(scene_->tracks.size()) &&
                                     scene_->tracks[static_cast<size_t>(track)].pool
                                 ? tr("Timelines — %1 only")
                                       .arg(QString::fromStdString(
                                           scene_->tracks[static_cast<size_t>(track)].label()))
                                 : tr("Timelines"));
    syncing_ = true;
    for (views::Panel* panel : panels_)
        if (panel->follows() == views::Panel::Follows::Track) panel->showScene(scene_, track);
    syncing_ = false;
    exploreLevel();
    const uint64_t gen = ++levelGeneration_;
    // Each step reads scene_ and track_ when it runs, and only while no later setTrack came.
    auto timelines = [this, gen] {
        if (gen != levelGeneration_) return;
        syncing_ = true;
        timeline_->setScene(scene_, track_);
        timeline_->setTimeRange(heatmap_->viewport().t0, heatmap_->viewport().t1);
        syncing_ = false;
    };
    auto frames = [this, gen] {
        if (gen != levelGeneration_) return;
        syncing_ = true;
        framesModel_->resetData(scene_, track_);
        framesView_->resizeColumnsToContents();
        syncing_ = false;
        onSelection(selection_->current());
        stagesPending_ = 0;
    };
    if (!staged) {
        timelines();
        frames();
        return;
    }
    onSelection(selection_->current());
    // A display frame (16 ms) apart: each step runs after the paint and replot the one before
    // posted, and after the timers and input already due, so the event loop gets turns in
    // between (a zero-time or 1 ms timer could be due before them and join two steps).
    constexpr int kStepMs = 16;
    stagesPending_ = 2;
    QTimer::singleShot(kStepMs, this, [this, timelines, frames] {
        timelines();
        QTimer::singleShot(kStepMs, this, frames);
    });
}

void MainWindow::applyRules(const std::vector<analysis::CollapseRule>& rules)
{
    loader_->setRules(rules); // the next load and every live refresh evaluate them too
    if (!scene_) return;
    // The scene is immutable and shared with the views and their workers: the engine computes
    // the new collapses into a new scene that shares the engine and the timelines (no
    // allocation record is copied), on a worker.
    const std::shared_ptr<const render::Scene> from = scene_;
    statusBar()->showMessage(tr("Re-evaluating collapses…"));
    rulesJobs_->start([from, rules](const views::Job&) { return from->withRules(rules); },
                      [this, from](std::shared_ptr<const render::Scene> copy) {
                          // A newer scene (a load, a live refresh) makes this one moot; newer
                          // rules supersede it in the tracker.
                          if (scene_ != from) return;
                          statusBar()->clearMessage();
                          replaceScene(std::move(copy), true);
                      });
}

void MainWindow::onSelection(const Selection& s)
{
    backAction_->setEnabled(selection_->canGoBack());
    forwardAction_->setEnabled(selection_->canGoForward());
    if (!scene_) return;
    syncing_ = true;
    const int row = framesModel_->rowOf(s.frame);
    if (row >= 0) {
        const QModelIndex idx = framesProxy_->mapFromSource(framesModel_->index(row, 0));
        framesView_->selectionModel()->setCurrentIndex(idx, QItemSelectionModel::ClearAndSelect |
                                                                QItemSelectionModel::Rows);
        framesView_->scrollTo(idx);
    } else {
        framesView_->clearSelection();
    }
    heatmap_->setSelection(s);
    timeline_->setSelection(s);
    histogram_->setSelection(s);
    memmap_->setSelection(s);
    inspector_->setSelection(s);
    details_->setSelection(s);
    kernels_->setSelection(s);
    syncing_ = false;
    exploreSelection(s);
}

void MainWindow::setDark(bool dark)
{
    dark_ = dark;
    applyPalette(dark);
    heatmap_->setDark(dark);
    timeline_->setDark(dark);
    histogram_->setDark(dark);
    memmap_->setDark(dark);
    graphs_->setDark(dark);
    correlations_->setDark(dark);
}

void MainWindow::updateStatus()
{
    if (!scene_) {
        healthLabel_->setText(
            tr("No session. File › Open, or drop a .fragscope file on the window."));
        axisLabel_->clear();
        syntheticLabel_->hide();
        return;
    }
    const auto& h = scene_->summary.health;
    QStringList parts;
    parts << tr("%1 events, %2 allocations, %3 frames, %4 collapse(s)")
                 .arg(scene_->summary.events)
                 .arg(scene_->summary.allocations)
                 .arg(scene_->frames.size())
                 .arg(scene_->collapses.size());
    parts << tr("capture: %1 dropped, %2 anomalies%3")
                 .arg(h.droppedRecords)
                 .arg(h.anomalyTotal())
                 .arg(h.endedAbruptly ? tr(", ENDED ABRUPTLY")
                      : h.recording   ? tr(", still recording")
                                      : QString());
    // A PyTorch snapshot whose trace ring buffer overflowed: said here, as info and report say it.
    QStringList notes;
    bool truncated = false;
    for (const analysis::TraceHistory& th : analysis::traceHistory(scene_->summary.meta))
        if (const std::string b = analysis::historyBadge(th); !b.empty()) {
            parts << QString::fromStdString(b);
            notes << QString::fromStdString(analysis::historyNote(th));
            truncated = true;
        }
    // A flight recording: only its windows are in the session.
    if (const std::string b = analysis::windowsBadge(scene_->summary.windows); !b.empty()) {
        parts << QString::fromStdString(b);
        notes << QString::fromStdString(analysis::windowsNote(scene_->summary.windows));
    }
    healthLabel_->setText(parts.join(QStringLiteral("  ·  ")));
    healthLabel_->setToolTip(notes.join(QLatin1Char('\n')));
    healthLabel_->setStyleSheet(h.endedAbruptly || h.droppedRecords > 0 || truncated
                                    ? QStringLiteral("color: #d02020;")
                                    : QString());
    syntheticLabel_->setText(tr("SYNTHETIC DATA"));
    syntheticLabel_->setToolTip(tr("Simulated session: a model, not a measurement"));
    syntheticLabel_->setVisible(scene_->summary.synthetic);
    axisLabel_->setText(scene_->summary.timeAxis == TimeAxis::Ordinal ? tr("time axis: ordinal")
                                                                      : tr("time axis: ns"));
}

QString MainWindow::statusText() const
{
    return healthLabel_->text() + QLatin1Char('|') +
           (syntheticLabel_->isVisibleTo(this) ? syntheticLabel_->text() : QString()) +
           QLatin1Char('|') + axisLabel_->text();
}

void MainWindow::addRecent(const QString& path)
{
    QSettings st;
    QStringList r = st.value(QStringLiteral("recentFiles")).toStringList();
    const QString abs = QFileInfo(path).absoluteFilePath();
    r.removeAll(abs);
    r.prepend(abs);
    while (r.size() > 10)
        r.removeLast();
    st.setValue(QStringLiteral("recentFiles"), r);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    recentMenu_->clear();
    const QStringList r = QSettings().value(QStringLiteral("recentFiles")).toStringList();
    for (const QString& p : r)
        recentMenu_->addAction(QFileInfo(p).fileName() + QStringLiteral("  —  ") + p, this,
                               [this, p] { openFile(p); });
    recentMenu_->setEnabled(!r.isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* e)
{
    QSettings st;
    st.setValue(QStringLiteral("window/geometry"), saveGeometry());
    st.setValue(QStringLiteral("window/state"), saveState());
    loader_->cancel();
    // A recording in progress is finished properly (SIGTERM), not killed with the window.
    if (attachProc_) {
        attachProc_->disconnect(this);
        attachProc_->terminate();
        attachProc_->waitForFinished(15000);
    }
    e->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e)
{
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e)
{
    const auto urls = e->mimeData()->urls();
    if (!urls.isEmpty() && urls.front().isLocalFile()) openFile(urls.front().toLocalFile());
}

void MainWindow::editRules()
{
    auto* dlg = new views::RulesEditor(views::RulesEditor::load(), this);
    dlg->setAttribute(Qt::WA_DeleteOnClose);
    connect(dlg, &views::RulesEditor::rulesChanged, this, &MainWindow::applyRules);
    dlg->open();
}

void MainWindow::showShortcuts()
{
    const QString text =
        tr("<table>"
           "<tr><td><b>Ctrl+O</b></td><td>open a session</td></tr>"
           "<tr><td><b>Ctrl+I</b></td><td>import a PyTorch snapshot, Kineto trace or nsys "
           "export</td></tr>"
           "<tr><td><b>Ctrl+Shift+A / Ctrl+Shift+T</b></td><td>attach to a process / stop "
           "recording and open the session</td></tr>"
           "<tr><td><b>Ctrl+Shift+M</b></td><td>mark this moment in the recorded process (a "
           "flight recording writes a window around it)</td></tr>"
           "<tr><td><b>Ctrl+E / Ctrl+Shift+E</b></td><td>export view / report</td></tr>"
           "<tr><td><b>Ctrl+Shift+W</b></td><td>what-if replay under other allocator "
           "settings, compared with the real run</td></tr>"
           "<tr><td><b>Alt+Left / Alt+Right</b></td><td>back / forward through selections</td></tr>"
           "<tr><td><b>Ctrl+J</b></td><td>next collapse</td></tr>"
           "<tr><td><b>Ctrl+R</b></td><td>collapse rules</td></tr>"
           "<tr><td><b>Ctrl+Shift+R</b></td><td>the session's report (what `fragscope report` "
           "prints)</td></tr>"
           "<tr><td colspan=2><br><b>Heatmap</b></td></tr>"
           "<tr><td>wheel</td><td>zoom time around the cursor (Ctrl+wheel: address)</td></tr>"
           "<tr><td>drag</td><td>pan</td></tr>"
           "<tr><td>Shift+drag, right-drag</td><td>box zoom</td></tr>"
           "<tr><td>F, Home, Ctrl+0</td><td>fit</td></tr>"
           "<tr><td>arrows, + / -</td><td>pan, zoom</td></tr>"
           "<tr><td>click</td><td>select the allocation under the cursor</td></tr>"
           "<tr><td colspan=2><br><b>Timelines</b>: drag pans, wheel zooms, double-click selects "
           "the frame</td></tr>"
           "</table>");
    auto* box = new QMessageBox(QMessageBox::NoIcon, tr("Shortcuts"), text, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::showAbout()
{
    const QString text =
        tr("<h3>fragscope %1</h3><p>GPU memory fragmentation over long generation runs, linked "
           "to quality collapses in the generated frames.</p>"
           "<p>Qt %2<br>SQLite %3<br>fmt %4<br>CUPTI %5</p>")
            .arg(QString::fromStdString(fragscopeVersion()), QString::fromLatin1(qVersion()),
                 QString::fromStdString(sqliteVersion()), QString::fromStdString(fmtVersion()),
                 QString::fromStdString(cuptiVersion()));
    auto* box = new QMessageBox(QMessageBox::Information, tr("About fragscope"), text,
                                QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

QString cliPath()
{
    // FRAGSCOPE_CLI: the CLI to run for Import and Attach (tests, side-by-side builds).
    if (qEnvironmentVariableIsSet("FRAGSCOPE_CLI")) return qEnvironmentVariable("FRAGSCOPE_CLI");
    const QString here = QCoreApplication::applicationDirPath();
    for (const QString& c :
         {here + QStringLiteral("/../fragscope"), here + QStringLiteral("/fragscope")})
        if (QFileInfo(c).isExecutable()) return QFileInfo(c).canonicalFilePath();
    return QStringLiteral("fragscope");
}

void MainWindow::importDialog()
{
    const QString in = QFileDialog::getOpenFileName(
        this, tr("Import"), {},
        tr("Importable files (*.pickle *.pkl *.json *.json.gz *.sqlite *.csv);;All files (*)"));
    if (in.isEmpty()) return;
    const QString out = QFileDialog::getSaveFileName(this, tr("Save imported session as"),
                                                     QFileInfo(in).completeBaseName() +
                                                         QStringLiteral(".fragscope"),
                                                     tr("fragscope sessions (*.fragscope)"));
    if (out.isEmpty()) return;
    auto* proc = new QProcess(this);
    statusBar()->showMessage(tr("Importing %1…").arg(QFileInfo(in).fileName()));
    connect(proc, &QProcess::finished, this, [this, proc, out](int code, QProcess::ExitStatus st) {
        proc->deleteLater();
        if (st == QProcess::NormalExit && code == 0)
            openFile(out);
        else
            reportError_(tr("Import failed"),
                         QString::fromLocal8Bit(proc->readAllStandardError()).trimmed());
    });
    proc->start(cliPath(), {QStringLiteral("import"), in, QStringLiteral("-o"), out});
}

void MainWindow::attachDialog()
{
    if (attachProc_) {
        reportError_(tr("Attach"),
                     tr("A recording is already running; stop it first (File › Stop recording)."));
        return;
    }
    // Offer what `fragscope ps` finds (processes under `fragscope launch`, `simulate --live`);
    // any other PID may be typed: the agent is then injected through gdb, best effort.
    QStringList items;
    {
        QProcess ps;
        ps.start(cliPath(), {QStringLiteral("ps"), QStringLiteral("--json")});
        if (ps.waitForFinished(3000) && ps.exitCode() == 0) {
            const auto arr = QJsonDocument::fromJson(ps.readAllStandardOutput())
                                 .object()
                                 .value(QStringLiteral("processes"))
                                 .toArray();
            for (const auto& v : arr) {
                const QJsonObject o = v.toObject();
                items << QStringLiteral("%1  [%2, %3]  %4")
                             .arg(o.value("pid").toInteger())
                             .arg(o.value("kind").toString(), o.value("state").toString(),
                                  o.value("command_line").toString().left(80));
            }
        }
    }
    bool ok = false;
    const QString choice = QInputDialog::getItem(
        this, tr("Attach to a running process"),
        items.isEmpty()
            ? tr("No process runs under 'fragscope launch' for this user. Type the process id of "
                 "a\n"
                 "generation run: the agent is injected through a debugger (best effort).")
            : tr("Attachable processes (or type another process id; the agent is then injected\n"
                 "through a debugger, best effort). fragscope records its allocator events into a\n"
                 "session file and opens it when you stop the recording or the process ends."),
        items, 0, true, &ok);
    if (!ok) return;
    const qint64 pid = choice.section(QLatin1Char(' '), 0, 0).toLongLong();
    if (pid <= 0) {
        reportError_(tr("Attach failed"), tr("'%1' does not start with a process id").arg(choice));
        return;
    }
    const QString out = QFileDialog::getSaveFileName(this, tr("Record into"),
                                                     QStringLiteral("attach-%1.fragscope").arg(pid),
                                                     tr("fragscope sessions (*.fragscope)"));
    if (out.isEmpty()) return;
    startRecording(pid, out);
}

bool MainWindow::startRecording(qint64 pid, const QString& out)
{
    if (attachProc_) return false;
    auto* proc = new QProcess(this);
    attachProc_ = proc;
    recordingPath_ = out;
    recordingPid_ = pid;
    live_ = std::make_shared<render::LiveScene>(out.toStdString());
    loader_->setRules(views::RulesEditor::enabled(views::RulesEditor::load()));
    stopRecordingAction_->setEnabled(true);
    markRecordingAction_->setEnabled(true);
    liveLabel_->setText(tr("● REC pid %1").arg(pid));
    liveLabel_->setToolTip(tr("Recording into %1; the views refresh every %2 ms. "
                              "File › Stop recording (Ctrl+Shift+T) finishes the session.")
                               .arg(out)
                               .arg(kLiveRefreshMs));
    liveLabel_->show();
    statusBar()->showMessage(tr("Recording process %1 into %2 — the views follow it live; File › "
                                "Stop recording (Ctrl+Shift+T) finishes the session")
                                 .arg(pid)
                                 .arg(out));
    connect(proc, &QProcess::finished, this, [this, proc, out](int code, QProcess::ExitStatus) {
        proc->deleteLater();
        liveTimer_->stop();
        liveLabel_->hide();
        recordingPid_ = 0;
        live_.reset();
        stopRecordingAction_->setEnabled(false);
        markRecordingAction_->setEnabled(false);
        statusBar()->clearMessage();
        if (loader_->busy() && loader_->live()) loader_->cancel();
        // The finished session, checked and with the analysis engine, replaces the live one.
        if (code == 0)
            openFile(out);
        else
            reportError_(tr("Attach failed"),
                         QString::fromLocal8Bit(proc->readAllStandardError()).trimmed());
    });
    proc->start(cliPath(),
                {QStringLiteral("attach"), QString::number(pid), QStringLiteral("-o"), out});
    liveTimer_->start();
    return true;
}

void MainWindow::refreshLive()
{
    // One refresh at a time: a slow read skips ticks rather than queueing them, and a load the
    // user started (File › Open) is never superseded by a refresh.
    if (!recording() || loader_->busy() || !QFileInfo::exists(recordingPath_)) return;
    loader_->refresh(live_, recordingPath_);
}

void MainWindow::showLive(const QString& path, std::shared_ptr<const render::Scene> scene)
{
    if (!scene_ || !scene_->live || path_ != path)
        setScene(path, std::move(scene));
    else
        replaceScene(std::move(scene), true);
    emit liveUpdated(scene_->summary.events);
}

void MainWindow::markRecording()
{
    if (!attachProc_ || recordingPid_ <= 0) return;
    auto* proc = new QProcess(this);
    connect(proc, &QProcess::finished, this, [this, proc](int code, QProcess::ExitStatus) {
        proc->deleteLater();
        if (code == 0)
            statusBar()->showMessage(tr("Marked process %1").arg(recordingPid_), 4000);
        else
            reportError_(tr("Mark failed"),
                         QString::fromLocal8Bit(proc->readAllStandardError()).trimmed());
    });
    proc->start(cliPath(), {QStringLiteral("mark"), QString::number(recordingPid_),
                            QStringLiteral("from the GUI")});
}

void MainWindow::stopRecording()
{
    // `fragscope attach` finishes the session on SIGTERM (the tail of the stream is still
    // ingested), then exits; the finished() handler opens the file.
    if (attachProc_) attachProc_->terminate();
}

} // namespace fs::gui
