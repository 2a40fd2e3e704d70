#include "ranks_window.h"

#include "core/format.h"
#include "core/import/open_input.h"
#include "render/render.h"
#include "widgets/heatmap_widget.h"
#include "widgets/rank_frames_model.h"
#include "widgets/replot_queue.h"

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace fs::gui {

namespace {

QColor rankColor(int i)
{
    static const QColor palette[] = {
        QColor(31, 119, 180),  QColor(255, 127, 14), QColor(44, 160, 44),   QColor(214, 39, 40),
        QColor(148, 103, 189), QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127)};
    return palette[static_cast<size_t>(i) % std::size(palette)];
}

QString bytes(uint64_t b)
{
    return QString::fromStdString(humanBytes(b));
}

QString ms(int64_t ns)
{
    return QStringLiteral("%1 ms").arg(static_cast<double>(ns) / 1e6, 0, 'f', 3);
}

QString eventText(const analysis::RankEvent& e, int64_t begin)
{
    QString t = QObject::tr("rank %1").arg(e.rank);
    if (e.frame >= 0) t += QObject::tr(", frame %1").arg(e.frame);
    if (e.time != kNoTime)
        t += QObject::tr(" at %1 s").arg(static_cast<double>(e.time - begin) / 1e9, 0, 'f', 3);
    return t;
}

struct AlignChoice
{
    const char* label;
    analysis::RankAlignMode mode;
};
const AlignChoice kAlignChoices[] = {
    {"Auto (wall clock, else frame)", analysis::RankAlignMode::Auto},
    {"Wall clock", analysis::RankAlignMode::WallClock},
    {"First common frame", analysis::RankAlignMode::Frame},
    {"None (each file's own clock)", analysis::RankAlignMode::None},
};

} // namespace

struct RanksWindow::Loaded
{
    std::vector<std::shared_ptr<const render::Scene>> scenes; // in the files' order
    std::shared_ptr<const analysis::RankRun> run;
    QString error; // set when the engine refused the files as one job's ranks
};

RanksWindow::RanksWindow(const QStringList& files, QWidget* parent)
    : QWidget(parent, Qt::Window), files_(files)
{
    setWindowTitle(tr("Ranks — %n file(s)", nullptr, static_cast<int>(files.size())));
    auto* lay = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    headline_ = new QLabel(tr("Loading %n rank(s)…", nullptr, static_cast<int>(files.size())));
    headline_->setWordWrap(true);
    headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(headline_, 1);
    top->addWidget(new QLabel(tr("Align:")), 0, Qt::AlignTop);
    align_ = new QComboBox;
    for (const AlignChoice& c : kAlignChoices)
        align_->addItem(tr(c.label));
    align_->setEnabled(false);
    connect(align_, &QComboBox::activated, this,
            [this](int i) { setAlignMode(kAlignChoices[i].mode); });
    top->addWidget(align_, 0, Qt::AlignTop);
    lay->addLayout(top);
    status_ = new QLabel;
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    lay->addWidget(status_);

    auto* split = new QSplitter(Qt::Vertical);
    summary_ = new QTableWidget(0, 10);
    summary_->setHorizontalHeaderLabels({tr("Rank"), tr("File"), tr("Offset"), tr("Clock"),
                                         tr("Peak reserved"), tr("Max F"), tr("Collapses"),
                                         tr("First collapse"), tr("OOMs"), tr("First OOM")});
    summary_->verticalHeader()->setVisible(false);
    // Compact rows, so that eight ranks fit without scrolling.
    const int rowHeight = fontMetrics().height() + 6;
    summary_->verticalHeader()->setDefaultSectionSize(rowHeight);
    summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(summary_);
    auto* lanesBox = new QWidget;
    lanesLayout_ = new QVBoxLayout(lanesBox);
    lanesLayout_->setContentsMargins(0, 0, 0, 0);
    lanesScroll_ = new QScrollArea;
    lanesScroll_->setWidgetResizable(true);
    lanesScroll_->setWidget(lanesBox);
    split->addWidget(lanesScroll_);
    plot_ = new QCustomPlot;
    plot_->yAxis->setLabel(tr("reserved (GiB)"));
    plot_->xAxis->setLabel(tr("time on the shared axis (s)"));
    plot_->legend->setVisible(true);
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot_->axisRect()->setRangeZoom(Qt::Horizontal);
    plot_->axisRect()->setRangeDrag(Qt::Horizontal);
    plot_->setMinimumHeight(150);
    connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
            [this](const QCPRange& r) {
                if (linking_ || !run_) return;
                const int64_t b = sharedBegin();
                setWindow(b + static_cast<int64_t>(r.lower * 1e9),
                          b + static_cast<int64_t>(r.upper * 1e9), -1);
            });
    split->addWidget(plot_);
    frames_ = new views::RankFramesModel(this);
    framesView_ = new QTableView;
    framesView_->setModel(frames_);
    framesView_->setSelectionBehavior(QAbstractItemView::SelectRows);
    framesView_->setSelectionMode(QAbstractItemView::SingleSelection);
    framesView_->verticalHeader()->setVisible(false);
    framesView_->verticalHeader()->setDefaultSectionSize(rowHeight);
    connect(framesView_, &QTableView::clicked, this, [this](const QModelIndex& i) {
        selectFrame(i.data(views::RankFramesModel::FrameIndexRole).toLongLong());
    });
    split->addWidget(framesView_);
    split->setSizes({195, 420, 180, 175});
    lay->addWidget(split, 1);
    resize(1280, 1040);
    start(analysis::RankAlignMode::Auto);
}

RanksWindow::~RanksWindow() = default;

void RanksWindow::setAlignMode(analysis::RankAlignMode mode)
{
    for (int i = 0; i < static_cast<int>(std::size(kAlignChoices)); ++i)
        if (kAlignChoices[i].mode == mode) align_->setCurrentIndex(i);
    start(mode);
}

// The engines' work runs off the GUI thread; the result arrives as one immutable value.
void RanksWindow::start(analysis::RankAlignMode mode)
{
    if (jobs_->busy()) return;
    align_->setEnabled(false);
    std::vector<std::string> inputs;
    for (const QString& f : files_)
        inputs.push_back(f.toStdString());
    jobs_->start(
        [this, inputs, scenes = fileScenes_, mode](const views::Job& job) {
            auto l = std::make_shared<Loaded>();
            l->scenes = scenes;
            for (size_t i = l->scenes.size(); i < inputs.size(); ++i) {
                if (job.cancelled()) return std::shared_ptr<const Loaded>(); // delivers nothing
                job.post([this, i, n = inputs.size()] {
                    status_->setText(tr("Loading rank file %1 of %2…").arg(i + 1).arg(n));
                });
                std::string session = inputs[i];
                if (import::needsImportForViewing(session))
                    session = import::importForViewing(session).session;
                l->scenes.push_back(render::loadScene(session));
            }
            std::vector<analysis::RankInput> in;
            for (size_t i = 0; i < inputs.size(); ++i)
                in.push_back({inputs[i], l->scenes[i]->engine, l->scenes[i]->ooms});
            try {
                l->run =
                    std::make_shared<const analysis::RankRun>(analysis::analyseRanks(in, mode));
            } catch (const analysis::RankAlignError& e) {
                l->error = QString::fromStdString(e.what());
            }
            return std::shared_ptr<const Loaded>(std::move(l));
        },
        [this](std::shared_ptr<const Loaded> l) { present(std::move(l)); },
        [this](const QString& error) { fail(error); });
}

void RanksWindow::fail(const QString& error)
{
    headline_->setText(
        tr("<b>Cannot open these files as ranks:</b> %1").arg(error.toHtmlEscaped()));
    status_->clear();
    emit loaded(false, error);
}

void RanksWindow::present(std::shared_ptr<const Loaded> l)
{
    fileScenes_ = l->scenes;
    align_->setEnabled(true);
    if (!l->run) { // refused: the engine's reason, and the Align box to show them anyway
        run_.reset();
        frames_->resetData(nullptr);
        headline_->setText(
            tr("<b>These files cannot be lined up as the ranks of one job.</b> %1<br>Choose "
               "<i>None</i> under Align to show them side by side anyway.")
                .arg(l->error.toHtmlEscaped()));
        status_->clear();
        emit loaded(false, l->error);
        return;
    }
    run_ = l->run;
    // Scenes by rank, as the run lists the ranks.
    scenes_.clear();
    for (const analysis::RankSummary& r : run_->ranks)
        for (const auto& scene : fileScenes_)
            if (scene->engine == r.engine) scenes_.push_back(scene);
    const int64_t b = sharedBegin();
    QString head;
    head += run_->firstCollapse ? tr("<b>First to collapse: %1.</b>")
                                      .arg(eventText(*run_->firstCollapse, b).toHtmlEscaped())
                                : tr("<b>No rank collapsed.</b>");
    head += QStringLiteral(" ");
    head += run_->firstOom
                ? tr("<b>First OOM: %1.</b>").arg(eventText(*run_->firstOom, b).toHtmlEscaped())
                : tr("No rank hit an OOM.");
    if (run_->peakReservedMinRank >= 0)
        head += tr(" Peak reserved %1 (rank %2) … %3 (rank %4), spread %5.")
                    .arg(bytes(run_->peakReservedMin))
                    .arg(run_->peakReservedMinRank)
                    .arg(bytes(run_->peakReservedMax))
                    .arg(run_->peakReservedMaxRank)
                    .arg(bytes(run_->peakReservedSpread()));
    if (std::any_of(run_->ranks.begin(), run_->ranks.end(),
                    [](const analysis::RankSummary& r) { return r.engine->summary().synthetic; }))
        head += tr(" <i>Synthetic data.</i>");
    headline_->setText(head);
    QStringList st;
    st << tr("Aligned by %1.").arg(QString::fromStdString(run_->basis).toHtmlEscaped());
    for (const std::string& n : run_->notes) {
        QString note = QString::fromStdString(n).toHtmlEscaped() + QStringLiteral(".");
        note[0] = note[0].toUpper();
        st << note;
    }
    status_->setText(st.join(QStringLiteral(" ")));
    setWindowTitle(tr("Ranks — %1 … (%2 ranks)")
                       .arg(QFileInfo(QString::fromStdString(run_->ranks.front().path)).fileName())
                       .arg(run_->ranks.size()));
    fillSummary();
    buildLanes();
    fillPlot();
    frames_->resetData(run_);
    framesView_->resizeColumnsToContents();
    // The lanes are linked over the span every rank covers (files shown with --align none may
    // have none: each lane then shows its own run).
    commonBegin_ = INT64_MIN;
    commonEnd_ = INT64_MAX;
    int64_t e = b + 1;
    for (const analysis::RankSummary& r : run_->ranks) {
        commonBegin_ = std::max(commonBegin_, r.timeBegin);
        commonEnd_ = std::min(commonEnd_, r.timeEnd);
        e = std::max(e, r.timeEnd);
    }
    if (commonEnd_ > commonBegin_)
        setWindow(commonBegin_, commonEnd_, -1);
    else {
        for (auto* lane : lanes_)
            lane->fit();
        setWindow(b, e, -1);
        status_->setText(status_->text() +
                         tr(" The ranks share no time span: their lanes are not linked."));
    }
    emit loaded(true, {});
}

int64_t RanksWindow::sharedBegin() const
{
    int64_t b = INT64_MAX;
    for (const analysis::RankSummary& r : run_->ranks)
        b = std::min(b, r.timeBegin);
    return b;
}

void RanksWindow::fillSummary()
{
    const int64_t b = sharedBegin();
    summary_->setRowCount(static_cast<int>(run_->ranks.size()));
    int row = 0;
    for (const analysis::RankSummary& r : run_->ranks) {
        const QStringList cells = {
            QString::number(r.rank),
            QFileInfo(QString::fromStdString(r.path)).fileName(),
            (r.offsetNs >= 0 ? QStringLiteral("+") : QString()) + ms(r.offsetNs),
            QString::fromStdString(r.identity.clockSource.empty() ? std::string("-")
                                                                  : r.identity.clockSource),
            bytes(r.peakReservedBytes),
            QString::number(r.maxFragmentationRatio, 'f', 4),
            QString::number(r.collapses.size()),
            r.collapses.empty() ? QStringLiteral("-") : eventText(r.collapses.front(), b),
            QString::number(r.ooms.size()),
            r.ooms.empty() ? QStringLiteral("-") : eventText(r.ooms.front(), b)};
        const bool first = (run_->firstCollapse && run_->firstCollapse->rank == r.rank) ||
                           (run_->firstOom && run_->firstOom->rank == r.rank);
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (first) item->setBackground(QColor(220, 40, 40, 90));
            if (c == 0) item->setForeground(rankColor(row));
            summary_->setItem(row, c, item);
        }
        ++row;
    }
    summary_->resizeColumnsToContents();
}

void RanksWindow::buildLanes()
{
    for (auto* w : lanes_)
        w->deleteLater();
    for (auto* w : laneTitles_)
        w->deleteLater();
    lanes_.clear();
    laneTitles_.clear();
    for (size_t i = 0; i < run_->ranks.size(); ++i) {
        const analysis::RankSummary& r = run_->ranks[i];
        auto* title = new QLabel(
            tr("<b>rank %1</b> — %2, offset %3")
                .arg(r.rank)
                .arg(QFileInfo(QString::fromStdString(r.path)).fileName().toHtmlEscaped())
                .arg(ms(r.offsetNs)));
        auto* lane = new views::HeatmapWidget;
        lane->setMinimumHeight(130); // the heatmap under its axis and legend stays readable
        const auto& scene = scenes_[i];
        lane->setScene(scene, scene->defaultTrack());
        const int k = static_cast<int>(i);
        connect(lane, &views::HeatmapWidget::viewportChanged, this,
                [this, k](const render::Viewport& vp) {
                    if (linking_ || !run_) return;
                    const int64_t off = run_->ranks[static_cast<size_t>(k)].offsetNs;
                    setWindow(vp.t0 + off, vp.t1 + off, k);
                });
        lanesLayout_->addWidget(title);
        lanesLayout_->addWidget(lane, 1);
        laneTitles_.push_back(title);
        lanes_.push_back(lane);
    }
}

void RanksWindow::fillPlot()
{
    plot_->clearGraphs();
    plot_->clearItems();
    const int64_t b = sharedBegin();
    double top = 0;
    for (size_t i = 0; i < run_->ranks.size(); ++i) {
        const analysis::RankSummary& r = run_->ranks[i];
        const render::Scene& s = *scenes_[i];
        const QColor color = rankColor(static_cast<int>(i));
        auto* g = plot_->addGraph();
        g->setName(tr("rank %1").arg(r.rank));
        g->setPen(QPen(color, 1.5));
        QVector<double> x, y;
        const int ti = s.defaultTrack();
        if (ti >= 0 && s.tracks[static_cast<size_t>(ti)].timeline) {
            const analysis::Timeline& tl = *s.tracks[static_cast<size_t>(ti)].timeline;
            for (size_t j = 0; j < tl.time.size(); ++j) {
                x << static_cast<double>(tl.time[j] + r.offsetNs - b) / 1e9;
                y << tl.reserved[j] / double(1ull << 30);
                top = std::max(top, y.back());
            }
        }
        g->setData(x, y, true);
        // Collapse onsets as dashed lines, OOMs as crosses on the rank's curve.
        for (const analysis::RankEvent& c : r.collapses) {
            if (c.time == kNoTime) continue;
            auto* line = new QCPItemStraightLine(plot_);
            const double at = static_cast<double>(c.time - b) / 1e9;
            line->point1->setCoords(at, 0);
            line->point2->setCoords(at, 1);
            line->setPen(QPen(color, 1, Qt::DashLine));
        }
        auto* o = plot_->addGraph();
        o->removeFromLegend();
        o->setLineStyle(QCPGraph::lsNone);
        o->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, color, 9));
        QVector<double> ox, oy;
        for (const analysis::RankEvent& e : r.ooms) {
            const double at = static_cast<double>(e.time - b) / 1e9;
            const auto it = std::lower_bound(x.begin(), x.end(), at);
            ox << at;
            oy << (it == x.end() ? (y.isEmpty() ? 0 : y.back()) : y[it - x.begin()]);
        }
        o->setData(ox, oy, true);
    }
    plot_->yAxis->setRange(0, std::max(1.0, top * 1.05));
    plot_->replot();
}

void RanksWindow::setWindow(int64_t t0, int64_t t1, int from)
{
    if (!run_ || t1 <= t0) return;
    linking_ = true;
    if (commonEnd_ > commonBegin_) {
        // Inside the span every rank covers, so that no lane clamps its part away.
        const int64_t span = std::min(t1 - t0, commonEnd_ - commonBegin_);
        t0 = std::clamp(t0, commonBegin_, commonEnd_ - span);
        t1 = t0 + span;
        for (size_t i = 0; i < lanes_.size(); ++i) {
            const int64_t off = run_->ranks[i].offsetNs;
            render::Viewport vp = lanes_[i]->viewport();
            if (vp.t1 <= vp.t0 || vp.y1 <= vp.y0)
                vp = render::fullViewport(*scenes_[i], scenes_[i]->defaultTrack());
            if (static_cast<int>(i) == from && vp.t0 == t0 - off && vp.t1 == t1 - off) continue;
            vp.t0 = t0 - off;
            vp.t1 = t1 - off;
            lanes_[i]->setViewport(vp);
        }
    }
    t0_ = t0;
    t1_ = t1;
    const int64_t b = sharedBegin();
    plot_->xAxis->setRange(static_cast<double>(t0 - b) / 1e9, static_cast<double>(t1 - b) / 1e9);
    views::queueReplot(plot_);
    linking_ = false;
}

void RanksWindow::selectFrame(int64_t frame)
{
    if (!run_) return;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < run_->ranks.size(); ++i)
        if (const analysis::FrameInfo* f = scenes_[i]->frame(frame); f && f->start != kNoTime) {
            lo = std::min(lo, f->start + run_->ranks[i].offsetNs);
            hi = std::max(hi, f->end + run_->ranks[i].offsetNs);
        }
    if (const int row = frames_->rowOf(frame); row >= 0) {
        framesView_->selectRow(row);
        framesView_->scrollTo(frames_->index(row, 0), QAbstractItemView::PositionAtCenter);
    }
    if (lo >= hi) return;
    const int64_t pad = (hi - lo) / 10;
    setWindow(lo - pad, hi + pad, -1);
    const auto it =
        std::find_if(run_->frames.begin(), run_->frames.end(),
                     [frame](const analysis::RankFrame& f) { return f.frame == frame; });
    if (it == run_->frames.end()) return;
    const int first = it->firstCollapseRank >= 0 ? it->firstCollapseRank : it->firstOomRank;
    for (size_t i = 0; i < run_->ranks.size(); ++i)
        if (run_->ranks[i].rank == first) {
            lanesScroll_->ensureWidgetVisible(laneTitles_[i], 0, 0);
            lanesScroll_->ensureWidgetVisible(lanes_[i], 0, 0);
        }
}

QStringList RanksWindow::writeScreenshots(const QString& dir, QString& error)
{
    QStringList written;
    resize(1600, 1200);
    show();
    auto settle = [this](int msec) {
        // The lanes refine their heatmaps asynchronously: wait until each says it is done.
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < msec) {
            QApplication::processEvents(QEventLoop::AllEvents, 50);
            if (!jobs_->busy() &&
                std::all_of(lanes_.begin(), lanes_.end(),
                            [](views::HeatmapWidget* l) { return l->isRefined(); }))
                break;
            QThread::msleep(5);
        }
        QApplication::processEvents();
        views::flushReplots(); // grab() paints what the plots last drew
    };
    // The load started in the constructor ends with loaded() (queued: not missed here).
    bool done = false;
    QString why;
    const auto c = connect(this, &RanksWindow::loaded, this, [&](bool, const QString& e) {
        done = true;
        why = e;
    });
    QElapsedTimer t;
    t.start();
    while (!done && t.elapsed() < 600000) {
        QApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(5);
    }
    disconnect(c);
    if (!run_) {
        error = done ? why : tr("loading the ranks took over 10 minutes");
        return written;
    }
    QDir().mkpath(dir);
    auto shot = [&](const QString& name) {
        settle(20000);
        const QString p = QStringLiteral("%1/%2").arg(dir, name);
        if (grab().save(p)) written << p;
    };
    shot(QStringLiteral("ranks-overview.png"));
    // As a user would: the first failure's frame row clicked, every lane zoomed to it.
    const analysis::RankEvent* first = run_->firstCollapse ? &*run_->firstCollapse
                                       : run_->firstOom    ? &*run_->firstOom
                                                           : nullptr;
    if (first && first->frame >= 0) {
        selectFrame(first->frame);
        shot(QStringLiteral("ranks-first-failure.png"));
    }
    return written;
}

void openRanksDialog(QWidget* parent)
{
    const QStringList files = QFileDialog::getOpenFileNames(
        parent, QObject::tr("Open the ranks of one job"), {},
        QObject::tr("Sessions and snapshots (*.fragscope *.pickle *.pkl *.json *.gz "
                    "*.sqlite);;All files (*)"));
    if (files.size() < 2) return;
    auto* w = new RanksWindow(files, parent);
    w->setAttribute(Qt::WA_DeleteOnClose);
    w->show();
}

} // namespace fs::gui
