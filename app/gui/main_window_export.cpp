// Export view / Export report / --screenshots: everything is drawn by fragscope_render with the
// window's current state, so a report image is what the user sees.
#include "main_window.h"

#include "compare_window.h"
#include "report_window.h"
#include "whatif_controller.h"
#include "whatif_dialog.h"

#include "core/analysis/report_format.h"
#include "core/settings/settings.h"

#include <algorithm>
#include <optional>

#include "widgets/correlation_table.h"
#include "widgets/frames_model.h"
#include "widgets/heatmap_widget.h"
#include "widgets/oom_list.h"
#include "widgets/panels.h"
#include "widgets/plot_widgets.h"
#include "widgets/replot_queue.h"

#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStatusBar>
#include <QTableView>
#include <QThread>
#include <QTreeWidget>

namespace fs::gui {

render::RenderOptions MainWindow::renderOptions(render::View v) const
{
    render::RenderOptions o;
    o.track = track_;
    const auto& sel = selection_->current();
    o.frame = sel.frame;
    o.selFrom = sel.from;
    o.selTo = sel.to;
    o.selAlloc = sel.allocId;
    o.marker = sel.marker;
    if (v == render::View::Heatmap) {
        const auto& vp = heatmap_->viewport();
        o.from = vp.t0;
        o.to = vp.t1;
        o.y0 = vp.y0;
        o.y1 = vp.y1;
    }
    if (v == render::View::Timeline) {
        // The timelines as shown: their time range and the replay lane.
        const auto [t0, t1] = timeline_->timeRange();
        if (t1 > t0) {
            o.from = t0;
            o.to = t1;
        }
        o.graphs = timeline_->graphs();
    }
    if ((v == render::View::Histogram || v == render::View::MemMap) && sel.frame < 0 &&
        sel.to != kNoTime)
        o.at = sel.to;
    o.theme = render::Theme::light(); // reports print on white
    return o;
}

bool MainWindow::exportView(render::View v, const QString& path, QSize size, QString* error) const
{
    if (!scene_) {
        if (error) *error = tr("no session is open");
        return false;
    }
    return render::exportView(path, size, *scene_, v, renderOptions(v), error);
}

bool MainWindow::exportReport(const QString& dir, QString* error)
{
    if (!scene_) {
        if (error) *error = tr("no session is open");
        return false;
    }
    QDir().mkpath(dir);
    for (render::View v : {render::View::Heatmap, render::View::Timeline, render::View::Histogram,
                           render::View::MemMap})
        for (const char* ext : {"png", "svg"})
            if (!exportView(v,
                            QStringLiteral("%1/%2.%3")
                                .arg(dir, QLatin1String(render::viewName(v)), QLatin1String(ext)),
                            QSize(1600, 900), error))
                return false;
    // The text report: the engine's (what `fragscope report` prints), on a worker.
    const QString file = dir + QStringLiteral("/report.txt");
    computeReport(*reportJobs_, scene_, reportOptions(),
                  [this, file](std::shared_ptr<const analysis::Report> r, const QString& err) {
                      QString why = err;
                      if (r) {
                          const std::string text = analysis::reportText(*r);
                          QFile f(file);
                          if (!f.open(QIODevice::WriteOnly) ||
                              f.write(text.data(), static_cast<qint64>(text.size())) < 0)
                              why = file + QStringLiteral(": cannot write");
                      }
                      emit reportExported(file, why);
                  });
    return true;
}

analysis::ReportOptions MainWindow::reportOptions() const
{
    try {
        return settings::loadUser().reportOptions(); // the burst gap and window `report` uses
    } catch (const std::exception&) {
        return {};
    }
}

ReportWindow* MainWindow::showReport()
{
    if (!scene_) {
        reportError_(tr("Report"), tr("Open a session first."));
        return nullptr;
    }
    auto* w = new ReportWindow(scene_, reportOptions(), this);
    w->setAttribute(Qt::WA_DeleteOnClose);
    w->show();
    return w;
}

void MainWindow::showExportDialog()
{
    if (!scene_) {
        reportError_(tr("Export view"), tr("Open a session first."));
        return;
    }
    QDialog dlg(this);
    dlg.setWindowTitle(tr("Export view"));
    auto* form = new QFormLayout(&dlg);
    auto* view = new QComboBox(&dlg);
    view->addItem(tr("VA heatmap (current zoom)"), static_cast<int>(render::View::Heatmap));
    view->addItem(tr("Timelines"), static_cast<int>(render::View::Timeline));
    view->addItem(tr("Fragment histogram (selected frame vs the one before)"),
                  static_cast<int>(render::View::Histogram));
    view->addItem(tr("Memory map (selected frame)"), static_cast<int>(render::View::MemMap));
    auto* w = new QSpinBox(&dlg);
    auto* h = new QSpinBox(&dlg);
    w->setRange(200, 20000);
    h->setRange(150, 20000);
    w->setValue(1600);
    h->setValue(900);
    w->setSuffix(QStringLiteral(" px"));
    h->setSuffix(QStringLiteral(" px"));
    auto* sizeRow = new QHBoxLayout;
    sizeRow->addWidget(w);
    sizeRow->addWidget(h);
    auto* path =
        new QLineEdit(QDir::home().filePath(QStringLiteral("fragscope-heatmap.png")), &dlg);
    auto* browse = new QPushButton(tr("Browse…"), &dlg);
    auto* pathRow = new QHBoxLayout;
    pathRow->addWidget(path, 1);
    pathRow->addWidget(browse);
    form->addRow(tr("View"), view);
    form->addRow(tr("Size (width × height)"), sizeRow);
    form->addRow(tr("File (.png, .svg, .pdf)"), pathRow);
    auto* bb = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, &dlg);
    form->addRow(bb);
    connect(view, &QComboBox::currentIndexChanged, &dlg, [view, path] {
        QFileInfo fi(path->text());
        const QString name = QString::fromLatin1(
            render::viewName(static_cast<render::View>(view->currentData().toInt())));
        path->setText(fi.dir().filePath(
            QStringLiteral("fragscope-%1.%2")
                .arg(name, fi.suffix().isEmpty() ? QStringLiteral("png") : fi.suffix())));
    });
    connect(browse, &QPushButton::clicked, &dlg, [&dlg, path] {
        const QString p = QFileDialog::getSaveFileName(&dlg, tr("Export to"), path->text(),
                                                       tr("PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"));
        if (!p.isEmpty()) path->setText(p);
    });
    connect(bb, &QDialogButtonBox::accepted, &dlg, &QDialog::accept);
    connect(bb, &QDialogButtonBox::rejected, &dlg, &QDialog::reject);
    if (dlg.exec() != QDialog::Accepted) return;
    QString err;
    if (!exportView(static_cast<render::View>(view->currentData().toInt()), path->text(),
                    QSize(w->value(), h->value()), &err))
        reportError_(tr("Export failed"), err);
    else
        statusBar()->showMessage(tr("Wrote %1").arg(path->text()), 6000);
}

void MainWindow::exportReportDialog()
{
    if (!scene_) {
        reportError_(tr("Export report"), tr("Open a session first."));
        return;
    }
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Export report into folder"));
    if (dir.isEmpty()) return;
    QString err;
    if (!exportReport(dir, &err))
        reportError_(tr("Export report failed"), err);
    else
        statusBar()->showMessage(tr("Images written to %1; computing report.txt…").arg(dir));
}

namespace {

// Lets queued results (loader, refined rasters) arrive; gives up after timeoutMs.
void settle(const std::function<bool()>& done, int timeoutMs)
{
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < timeoutMs) {
        QApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(5);
    }
    QApplication::processEvents();
    views::flushReplots(); // grab() paints what the plots last drew
}

} // namespace

QStringList MainWindow::writeScreenshots(const QString& dir)
{
    QStringList written;
    QDir().mkpath(dir);
    resize(1920, 1080);
    show();
    settle([] { return false; }, 200);
    auto shot = [&](const QString& name) {
        settle([this] { return heatmap_->isRefined() && !exploreBusy(); }, 20000);
        const QString p = QStringLiteral("%1/%2").arg(dir, name);
        if (grab().save(p)) written << p;
    };
    shot(QStringLiteral("gui-overview.png"));
    if (!scene_) return written;
    if (!scene_->collapses.empty()) {
        const int64_t f = scene_->collapses.front().firstFrame;
        // Two clicks, as a user would: the collapsed row in the frames table...
        const int row = framesModel_->rowOf(f);
        framesView_->setCurrentIndex(framesView_->model()->index(row, 0));
        shot(QStringLiteral("gui-collapse-selected.png"));
        // ...then zoom the heatmap onto that frame and its precursor window.
        const analysis::FrameInfo* fr = scene_->frame(f);
        const analysis::FrameInfo* before = scene_->frame(f - 2);
        heatmap_->zoomToTime(before ? before->start : fr->start, fr->end);
        shot(QStringLiteral("gui-collapse-zoomed.png"));
        if (inspector_->model()->rowCount() > 0) {
            inspector_->table()->selectRow(0);
            emit inspector_->table()->clicked(inspector_->model()->index(0, 0));
            shot(QStringLiteral("gui-precursor-selected.png"));
        }
    }
    // The allocation details of the largest allocation that has a call stack (imported
    // snapshots have them), in the dock's tab.
    if (track_ >= 0 && scene_->engine) {
        // Among the largest blocks live at the end, the first with a recorded stack.
        const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
        std::optional<analysis::AllocationInfo> pick;
        {
            const auto lock = scene_->engine->readLock();
            auto live = scene_->engine->liveAllocationsAt(ld.device, ld.level, scene_->timeEnd());
            std::sort(live.begin(), live.end(),
                      [](const auto& a, const auto& b) { return a.size > b.size; });
            for (size_t i = 0; i < live.size() && i < 64 && !pick; ++i)
                if (auto a = scene_->engine->allocation(live[i].id); a && !a->stack.empty())
                    pick = std::move(a);
        }
        if (pick) {
            views::Selection sel = selection_->current();
            sel.allocId = pick->id;
            sel.marker = pick->allocNs;
            selection_->select(sel);
            if (auto* dock = findChild<QDockWidget*>(QStringLiteral("detailsDock"))) dock->raise();
            shot(QStringLiteral("gui-allocation-stack.png"));
        }
    }
    // The OOM list, its first OOM activated (it drives the views like a collapse).
    if (oomList_ && oomList_->count() > 0) {
        if (auto* dock = findChild<QDockWidget*>(QStringLiteral("oomDock"))) dock->raise();
        emit oomList_->tree()->itemActivated(oomList_->tree()->topLevelItem(0), 0);
        shot(QStringLiteral("gui-oom.png"));
    }
    // The correlations, the strongest pair's scatter below them (sessions with frame metrics).
    if (auto* dock = findChild<QDockWidget*>(QStringLiteral("correlationDock"));
        dock && scene_->engine && !scene_->frames.empty()) {
        dock->show();
        dock->raise();
        settle(
            [this] {
                return correlations_->tree()->topLevelItemCount() > 0 && !correlations_->busy();
            },
            20000);
        if (correlations_->tree()->topLevelItemCount() > 0)
            shot(QStringLiteral("gui-correlations.png"));
    }
    exploreScreenshots(shot);
    // File > What-if replay...: the ranking of the recorded settings and the default
    // alternatives, as the dialog shows it once computed.
    if (whatIf_ && whatIf_->action()->isEnabled()) {
        whatIf_->showDialog();
        if (QPointer<WhatIfDialog> d = whatIf_->dialog()) {
            settle([d] { return !d || d->rankingDone(); }, 120000);
            if (d) {
                const QString p = dir + QStringLiteral("/gui-whatif-ranking.png");
                if (d->grab().save(p)) written << p;
                d->reject();
            }
        }
    }
    // A what-if replay under expandable segments, opened beside the real run as a user would
    // from File > What-if replay... (the dialog's first preset).
    if (whatIf_ && whatIf_->action()->isEnabled()) {
        CompareWindow* cw = nullptr;
        const auto conn = connect(whatIf_, &WhatIfController::compareOpened, this,
                                  [&cw](CompareWindow* w) { cw = w; });
        alloc::RunSpec spec;
        spec.label = "expandable_segments:True";
        spec.config = alloc::Config::parse(spec.label);
        whatIf_->start(spec);
        settle([&] { return cw != nullptr || !whatIf_->running(); }, 120000);
        disconnect(conn);
        if (cw) {
            cw->resize(1600, 1000);
            settle(
                [cw] {
                    return cw->comparison() && cw->heatmapA()->isRefined() &&
                           cw->heatmapB()->isRefined();
                },
                60000);
            const QString p = dir + QStringLiteral("/gui-whatif-compare.png");
            if (cw->grab().save(p)) written << p;
            cw->close();
        }
    }
    QString err;
    for (render::View v : {render::View::Heatmap, render::View::Histogram, render::View::Timeline,
                           render::View::MemMap}) {
        const QString p =
            QStringLiteral("%1/export-%2.png").arg(dir, QLatin1String(render::viewName(v)));
        if (exportView(v, p, QSize(1600, 900), &err)) written << p;
    }
    // The whole-session heatmap as well as the zoomed one.
    render::RenderOptions o = renderOptions(render::View::Heatmap);
    o.from = o.to = kNoTime;
    o.y0 = o.y1 = -1;
    const QString full = dir + QStringLiteral("/export-heatmap-full.png");
    if (render::exportView(full, QSize(1600, 900), *scene_, render::View::Heatmap, o, &err))
        written << full;
    return written;
}

} // namespace fs::gui
