#include "plot_widgets.h"
#include "time_cursor.h"

#include "graphs_overlay.h"
#include "replot_queue.h"

#include "core/analysis/metrics.h"

#include <QPainter>
#include <QTimer>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace fs::views {

// ---- timelines -------------------------------------------------------------------------------

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    plot_ = new QCustomPlot(this);
    lay->addWidget(plot_);
    // The time cursor's own layer, buffered: moving the cursor repaints that layer only (a
    // full replot of a long run's panels takes tens of ms).
    plot_->addLayer(QStringLiteral("cursor"), plot_->layer(QStringLiteral("overlay")),
                    QCustomPlot::limAbove);
    plot_->layer(QStringLiteral("cursor"))->setMode(QCPLayer::lmBuffered);
    // A click sets the time cursor; a press on the cursor line drags it instead of the axis.
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        pressPos_ = e->position();
        if (!scene_ || rects_.empty() || e->button() != Qt::LeftButton) return;
        const QCPAxis* x = rects_.front()->axis(QCPAxis::atBottom);
        if (cursor_ != kNoTime && !(e->modifiers() & Qt::ControlModifier) &&
            std::fabs(x->coordToPixel(toX(cursor_)) - e->position().x()) <= 5) {
            scrubbing_ = true;
            plot_->setInteraction(QCP::iRangeDrag, false);
        }
    });
    connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
        if (scrubbing_) emit cursorRequested(toTime(e->position().x()));
    });
    connect(plot_, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
        if (scrubbing_) {
            scrubbing_ = false;
            plot_->setInteraction(QCP::iRangeDrag, true);
            return;
        }
        if (scene_ && !rects_.empty() && e->button() == Qt::LeftButton &&
            !(e->modifiers() & Qt::ControlModifier) &&
            (e->position() - pressPos_).manhattanLength() < 4)
            emit cursorRequested(toTime(e->position().x()));
    });
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        if (!scene_ || rects_.empty() || e->button() != Qt::LeftButton ||
            !(e->modifiers() & Qt::ControlModifier))
            return;
        emit timeClicked(toTime(e->position().x()));
    });
    connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent* e) {
        if (!scene_ || rects_.empty()) return;
        emit timeClicked(toTime(e->position().x()));
    });
}

int TimelineWidget::graphCount() const
{
    return plot_->graphCount();
}

void TimelineWidget::setDark(bool dark)
{
    dark_ = dark;
    rebuild();
}

double TimelineWidget::toX(int64_t t) const
{
    return render::timelineX(*scene_, t);
}

void TimelineWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    // A new scene starts on its whole span, not the old range: that may be in another unit (a
    // live recording grows from ms to s) or belong to another session. rebuild() deletes the
    // old axis rects with the layout.
    rects_.clear();
    rebuild();
}

void TimelineWidget::setGraphs(std::shared_ptr<const analysis::GraphsReport> graphs)
{
    graphs_ = std::move(graphs);
    // On a later turn of the event loop: the report arrives with the Graphs panel's own work
    // and repaint, and the two together kept the loop from input for ~100 ms on a long run.
    if (graphsPending_) return;
    graphsPending_ = true;
    QTimer::singleShot(0, this, [this] {
        graphsPending_ = false;
        rebuild();
    });
}

void TimelineWidget::setSelection(const Selection& s)
{
    sel_ = s;
    if (rects_.empty()) return; // nothing drawn yet: rebuild() draws it
    // Only the selection band changes: the graphs and collapse bands stay (a rebuild of a long
    // run's panels took ~20 ms of the GUI thread, at every click).
    drawSelection();
    queueReplot(plot_);
}

void TimelineWidget::drawSelection()
{
    for (QCPAbstractItem* it : selectionItems_)
        plot_->removeItem(it);
    selectionItems_.clear();
    if (!scene_ || sel_.from == kNoTime || sel_.to == kNoTime) return;
    selectionItems_ = render::addSelectionBand(*plot_, rects_, toX(sel_.from), toX(sel_.to));
}

void TimelineWidget::setTimeRange(int64_t t0, int64_t t1)
{
    if (!scene_ || rects_.empty()) return;
    rects_.front()->axis(QCPAxis::atBottom)->setRange(toX(t0), toX(t1));
    queueReplot(plot_);
}

std::pair<int64_t, int64_t> TimelineWidget::timeRange() const
{
    if (!scene_ || rects_.empty()) return {0, 0};
    const QCPRange r = rects_.front()->axis(QCPAxis::atBottom)->range();
    return {render::timelineTime(*scene_, r.lower), render::timelineTime(*scene_, r.upper)};
}

void TimelineWidget::rebuild()
{
    QCPRange keep;
    const bool hadRange = !rects_.empty();
    if (hadRange) keep = rects_.front()->axis(QCPAxis::atBottom)->range();
    cursorLines_.clear();
    cursorTexts_.clear();
    render::TimelineChart c;
    c.track = scene_ ? track_ : -1;
    c.selFrom = sel_.from;
    c.selTo = sel_.to;
    c.ooms = ooms_;
    c.graphs = graphs_;
    c.theme = dark_ ? render::Theme::darkTheme() : render::Theme::light();
    c.font = render::chartFont();
    static const render::Scene kNone;
    const render::TimelinePlot built = render::buildTimeline(*plot_, scene_ ? *scene_ : kNone, c);
    queueReplot(plot_); // before placeCursor: the cursor is drawn with the rest
    rects_ = built.panels;
    selectionItems_ = built.selection;
    oomMarks_ = built.ooms;
    metric_ = built.metric;
    replayLane_ = built.replayLane;
    if (!rects_.empty()) {
        plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
        placeCursor();
        if (hadRange && keep.size() > 0) rects_.front()->axis(QCPAxis::atBottom)->setRange(keep);
    }
}

// ---- histogram -------------------------------------------------------------------------------

HistogramWidget::HistogramWidget(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    plot_ = new QCustomPlot(this);
    lay->addWidget(plot_);
}

void HistogramWidget::setDark(bool dark)
{
    dark_ = dark;
    rebuild();
}

void HistogramWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    snap_.reset();
    rebuild();
}

void HistogramWidget::setSelection(const Selection& s)
{
    sel_ = s; // the instant comes from the time cursor (setSnapshot)
}

void HistogramWidget::rebuild()
{
    cur_.clear();
    prev_.clear();
    // The engine's state at the time cursor, and at the end of the frame before when the cursor
    // is at a frame's end (CursorWorker computes both off the GUI thread).
    if (!scene_ || track_ < 0 || !snap_ || snap_->scene != scene_ || !snap_->blocks) {
        at_ = kNoTime;
        plot_->clearPlottables();
        plot_->clearItems();
        queueReplot(plot_);
        return;
    }
    at_ = snap_->time;
    render::HistogramChart h = render::histogramChart(
        *scene_, at_, snap_->previous ? snap_->frame : -1, snap_->blocks->state,
        snap_->previousFrame, snap_->previous ? &*snap_->previous : nullptr);
    h.theme = dark_ ? render::Theme::darkTheme() : render::Theme::light();
    h.font = render::chartFont();
    render::buildHistogram(*plot_, h);
    cur_ = h.current;
    prev_ = h.previous;
    queueReplot(plot_);
}

// ---- memory map ------------------------------------------------------------------------------

MemMapWidget::MemMapWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumSize(240, 200);
}

void MemMapWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    snap_.reset();
    cacheValid_ = false;
    update();
}

void MemMapWidget::setSelection(const Selection& s)
{
    sel_ = s; // the instant comes from the time cursor (setSnapshot)
}

void MemMapWidget::setDark(bool dark)
{
    dark_ = dark;
    cacheValid_ = false;
    update();
}

void MemMapWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    if (!scene_ || track_ < 0) {
        p.fillRect(rect(), palette().window());
        return;
    }
    if (!snap_ || snap_->scene != scene_ || !snap_->blocks) {
        p.fillRect(rect(), palette().window());
        return;
    }
    if (!cacheValid_ || cache_.size() != size()) {
        render::RenderOptions o;
        o.track = track_;
        const analysis::FrameInfo* f = scene_->frame(snap_->frame);
        o.frame = f && f->end == snap_->time ? f->index : -1;
        o.at = snap_->time;
        o.memmap = &snap_->memmap;
        o.state = &snap_->blocks->state;
        o.title = false;
        o.theme = dark_ ? render::Theme::darkTheme() : render::Theme::light();
        cache_ = QImage(size(), QImage::Format_ARGB32_Premultiplied);
        QPainter cp(&cache_);
        render::paint(cp, QRectF(QPointF(0, 0), QSizeF(size())), *scene_, render::View::MemMap, o);
        cacheValid_ = true;
    }
    p.drawImage(0, 0, cache_);
}

// ---- kernels lane ----------------------------------------------------------------------------

KernelLaneWidget::KernelLaneWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumHeight(90);
}

void KernelLaneWidget::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    sel_ = {};
    fetched_ = {0, -1};
    update();
}

void KernelLaneWidget::setSelection(const Selection& s)
{
    if (s.frame != sel_.frame) {
        shifted_.clear();
        if (scene_ && scene_->frame(s.frame))
            for (const auto& p : scene_->frameReport(s.frame).precursors)
                if (p.kind == analysis::PrecursorKind::KernelVariantShift && p.shift && p.score > 0)
                    shifted_ << QString::fromStdString(p.shift->variant);
    }
    sel_ = s;
    update();
}

QStringList KernelLaneWidget::newVariants() const
{
    // The engine's kernel summary of the frame: names that ran in no previous frame.
    QStringList out;
    if (!scene_ || !scene_->frame(sel_.frame)) return out;
    for (const auto& k : scene_->kernelsInFrame(sel_.frame))
        if (k.newInFrame) out << QString::fromStdString(k.name);
    return out;
}

void KernelLaneWidget::fetch(int64_t t0, int64_t t1)
{
    if (fetched_ == std::make_pair(t0, t1)) return;
    fetched_ = {t0, t1};
    kernels_.clear();
    launches_.clear();
    // Only a selected frame or range: the whole of a long run is millions of launches.
    if (sel_.frame < 0 && sel_.from == kNoTime) return;
    kernels_ = scene_->kernelSpans(t0, t1);
    launches_ = scene_->graphLaunches(t0, t1);
}

void KernelLaneWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    p.setPen(palette().text().color());
    if (!scene_) {
        return;
    }
    const analysis::FrameInfo* f = scene_->frame(sel_.frame);
    if (f && f->start == kNoTime) f = nullptr;
    const auto [t0, t1] = window();
    fetch(t0, t1);
    const QStringList fresh = newVariants();
    const QRectF lane = this->lane(), glane(110, 50, width() - 120, 14);
    p.drawText(QRectF(6, 4, width() - 12, 16), Qt::AlignLeft | Qt::AlignVCenter,
               f ? tr("frame %1: %2 kernel name(s)%3")
                       .arg(f->index)
                       .arg(f->distinctKernels)
                       .arg(fresh.isEmpty()
                                ? QString()
                                : tr("; NEW variant: %1").arg(fresh.join(QStringLiteral(", "))))
                 : tr("whole session (select a frame for its kernels)"));
    p.drawText(QRectF(6, lane.top(), 100, lane.height()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("kernels"));
    p.drawText(QRectF(6, glane.top(), 100, glane.height()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("graph launches"));
    p.drawRect(lane);
    const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
    auto X = [&](int64_t t) {
        return lane.left() + static_cast<double>(t - t0) / span * lane.width();
    };
    std::set<QString> freshSet(fresh.begin(), fresh.end());
    double lastX = -1;
    for (const auto& k : kernels_) {
        const double x0 = X(std::max(k.start, t0)), x1 = std::max(x0 + 1, X(std::min(k.end, t1)));
        if (x1 < lastX + 0.5) continue; // narrower than a pixel behind the previous one: merged
        lastX = x1;
        const QString name = QString::fromStdString(k.name);
        const bool isNew = freshSet.count(name) > 0;
        // A variant the engine reports as shifted: an orange mark above the kernel.
        if (shifted_.contains(name))
            p.fillRect(QRectF(x0, lane.top() - 4, std::max(2.0, x1 - x0), 4), QColor(240, 140, 20));
        p.fillRect(QRectF(x0, lane.top() + 2, x1 - x0, lane.height() - 4),
                   isNew ? render::collapseColor() : QColor(90, 140, 200));
    }
    for (const auto& g : launches_)
        p.fillRect(QRectF(X(std::max(g.start, t0)), glane.top(),
                          std::max(1.0, X(std::min(g.end, t1)) - X(std::max(g.start, t0))),
                          glane.height()),
                   QColor(120, 180, 90));
    // OOMs (red) and the time cursor (orange) across both lanes.
    for (int64_t t : ooms_)
        if (t >= t0 && t <= t1)
            p.fillRect(QRectF(X(t) - 0.5, lane.top() - 4, 1.5, glane.bottom() - lane.top() + 4),
                       QColor(220, 30, 30));
    if (cursor_ != kNoTime && cursor_ >= t0 && cursor_ <= t1)
        p.fillRect(QRectF(X(cursor_) - 0.75, lane.top() - 6, 1.5, glane.bottom() - lane.top() + 8),
                   QColor(255, 160, 20));
    p.setPen(palette().text().color());
    p.drawText(QRectF(110, 68, width() - 120, 16), Qt::AlignLeft | Qt::AlignVCenter,
               tr("%1 → %2   red: new variant, orange: variant shift")
                   .arg(QString::fromStdString(
                            render::formatTime(t0 - scene_->timeBegin(), scene_->summary.timeAxis)),
                        QString::fromStdString(render::formatTime(t1 - scene_->timeBegin(),
                                                                  scene_->summary.timeAxis))));
}

} // namespace fs::views
