// The time cursor on the plot views (plot_widgets.h): the timelines' cursor line and values,
// the histogram and memory map at the cursor, the kernel lane's cursor, OOM marks, clicks and
// tooltips.
#include "plot_widgets.h"
#include "replot_queue.h"
#include "time_cursor.h"
#include "tooltip.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QToolTip>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace fs::views {

namespace {
QString bytes(uint64_t b)
{
    return QString::fromStdString(render::formatBytes(static_cast<double>(b)));
}
} // namespace

// ---- timelines -------------------------------------------------------------------------------

int64_t TimelineWidget::toTime(double pixelX) const
{
    return render::timelineTime(*scene_,
                                rects_.front()->axis(QCPAxis::atBottom)->pixelToCoord(pixelX));
}

void TimelineWidget::setCursor(int64_t t)
{
    if (t == cursor_) return;
    cursor_ = t;
    placeCursor();
}

void TimelineWidget::setOoms(std::vector<int64_t> times)
{
    if (times == ooms_) return;
    ooms_ = std::move(times);
    if (!scene_ || rects_.empty()) return; // rebuild() draws them
    // Only the lines change (a rebuild of a long run's panels is tens of ms).
    render::setOomLines(*plot_, rects_, *scene_, ooms_, oomMarks_);
    queueReplot(plot_);
}

void TimelineWidget::placeCursor()
{
    if (!scene_ || rects_.empty()) return;
    QCPLayer* layer = plot_->layer(QStringLiteral("cursor"));
    if (cursorLines_.empty()) {
        for (QCPAxisRect* r : rects_) {
            auto* l = new QCPItemStraightLine(plot_);
            l->setLayer(layer);
            l->setClipAxisRect(r);
            for (auto* pos : {l->point1, l->point2})
                render::placeOnPanel(pos, r, true);
            l->setPen(QPen(QColor(255, 160, 20), 1.5));
            l->setSelectable(false);
            cursorLines_.push_back(l);
            auto* text = new QCPItemText(plot_);
            text->setLayer(layer);
            text->setClipAxisRect(r);
            text->position->setAxisRect(r);
            text->position->setType(QCPItemPosition::ptAxisRectRatio);
            text->position->setCoords(0.995, 0.04);
            text->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
            QFont f = font();
            f.setPointSizeF(std::max(6.5, f.pointSizeF() * 0.8));
            text->setFont(f);
            text->setColor(dark_ ? QColor(240, 240, 240) : QColor(20, 20, 20));
            text->setBrush(dark_ ? QColor(32, 33, 36, 215) : QColor(255, 255, 255, 215));
            text->setPadding(QMargins(4, 1, 4, 1));
            text->setSelectable(false);
            text->setVisible(false);
            cursorTexts_.push_back(text);
        }
    }
    const bool on = cursor_ != kNoTime;
    for (size_t i = 0; i < cursorTexts_.size() && i < static_cast<size_t>(cursorText_.size());
         ++i) {
        cursorTexts_[i]->setText(cursorText_[static_cast<int>(i)]);
        cursorTexts_[i]->setVisible(on);
    }
    for (QCPItemStraightLine* l : cursorLines_) {
        l->setVisible(on);
        if (!on) continue;
        l->point1->setCoords(toX(cursor_), 0);
        l->point2->setCoords(toX(cursor_), 1);
    }
    if (!on)
        for (QCPItemText* t : cursorTexts_)
            t->setVisible(false);
    // The cursor layer alone, unless a whole redraw is queued: that draws the cursor too, and
    // after a rebuild QCPLayer::replot() would redraw the whole plot at once (the other layers'
    // buffers are gone: 20-33 ms of the GUI thread on a long run, then the queued one again).
    if (!replotPending(plot_)) layer->replot();
}

void TimelineWidget::setCursorValues(const CursorSnapshot& s)
{
    if (!scene_ || !s.scene || s.scene->engine != scene_->engine || !s.blocks) return;
    const analysis::State& st = s.blocks->state;
    QStringList v;
    v << tr("reserved %1 · allocated %2 · cached, unused %3 · largest free %4")
             .arg(bytes(st.reservedBytes), bytes(st.allocatedBytes), bytes(st.freeBytes),
                  bytes(st.largestFreeFragmentBytes));
    if (st.pendingFreeBlocks > 0) // neither allocated nor free (docs/analysis.md)
        v.back() += tr(" · pending free %1").arg(bytes(st.pendingFreeBytes));
    v << tr("F %1").arg(st.fragmentationRatio, 0, 'f', 3);
    v << tr("fragment entropy %1 bits · event-size %2 bits")
             .arg(st.fragmentEntropyBits, 0, 'f', 2)
             .arg(st.eventSizeEntropyBits, 0, 'f', 2);
    if (!metric_.empty()) {
        // The ruled metric of the frame at the cursor (the 4th panel's series).
        QString m;
        if (const analysis::FrameInfo* f = scene_->frame(s.frame)) {
            const QString name = QString::fromStdString(metric_);
            const auto it = f->metrics.find(metric_);
            if (it != f->metrics.end())
                m = tr("%1 %2 (frame %3)").arg(name).arg(it->second, 0, 'g', 4).arg(f->index);
        }
        v << (m.isEmpty() ? tr("no frame at the cursor") : m);
    }
    cursorText_ = v;
    placeCursor();
}

QStringList TimelineWidget::cursorValues() const
{
    QStringList out;
    for (const QCPItemText* t : cursorTexts_)
        if (t->visible()) out << t->text();
    return out;
}

// ---- histogram and memory map ----------------------------------------------------------------

void HistogramWidget::setSnapshot(std::shared_ptr<const CursorSnapshot> s)
{
    snap_ = std::move(s);
    rebuild();
}

void MemMapWidget::setSnapshot(std::shared_ptr<const CursorSnapshot> s)
{
    snap_ = std::move(s);
    cacheValid_ = false;
    update();
}

int64_t MemMapWidget::shownAt() const
{
    return snap_ && snap_->scene == scene_ ? snap_->time : kNoTime;
}

// ---- kernel lane -----------------------------------------------------------------------------

std::pair<int64_t, int64_t> KernelLaneWidget::window() const
{
    if (!scene_) return {0, 1};
    const analysis::FrameInfo* f = scene_->frame(sel_.frame);
    if (f && f->start != kNoTime) return {f->start, f->end};
    if (sel_.from != kNoTime) return {sel_.from, sel_.to};
    return {scene_->timeBegin(), scene_->timeEnd()};
}

QRectF KernelLaneWidget::lane() const
{
    return QRectF(110, 22, width() - 120, 22);
}

void KernelLaneWidget::setCursor(int64_t t)
{
    if (t == cursor_) return;
    cursor_ = t;
    update();
}

void KernelLaneWidget::setOoms(std::vector<int64_t> times)
{
    ooms_ = std::move(times);
    update();
}

void KernelLaneWidget::mousePressEvent(QMouseEvent* e)
{
    mouseMoveEvent(e);
}

void KernelLaneWidget::mouseMoveEvent(QMouseEvent* e)
{
    // Click or drag along the lanes: the time cursor follows.
    if (!scene_ || !(e->buttons() & Qt::LeftButton)) return;
    const QRectF l = lane();
    const auto [t0, t1] = window();
    const double fx = std::clamp((e->position().x() - l.left()) / l.width(), 0.0, 1.0);
    emit cursorRequested(t0 + static_cast<int64_t>(fx * static_cast<double>(t1 - t0)));
}

QString KernelLaneWidget::describeAt(const QPointF& pt) const
{
    if (!scene_) return {};
    const QRectF l = lane();
    const QRectF g(110, 50, width() - 120, 14);
    const auto [t0, t1] = window();
    const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
    auto X = [&](int64_t t) { return l.left() + static_cast<double>(t - t0) / span * l.width(); };
    const TimeAxis ax = scene_->summary.timeAxis;
    auto dur = [&](int64_t a, int64_t b) {
        return QString::fromStdString(render::formatTime(b - a, ax));
    };
    auto at = [&](int64_t t) {
        return QString::fromStdString(render::formatTime(t - scene_->timeBegin(), ax));
    };
    // The kernel under the pointer, or the nearest within 2 px (narrow kernels are merged).
    if (pt.y() >= l.top() - 4 && pt.y() <= l.bottom()) {
        const analysis::KernelSpan* best = nullptr;
        double bestD = 3;
        for (const auto& k : kernels_) {
            const double x0 = X(std::max(k.start, t0)),
                         x1 = std::max(x0 + 1, X(std::min(k.end, t1)));
            const double d = pt.x() < x0 ? x0 - pt.x() : pt.x() > x1 ? pt.x() - x1 : 0;
            if (d < bestD) {
                bestD = d;
                best = &k;
            }
        }
        if (best)
            return tr("%1\nstream %2 · %3 → %4 (%5)%6")
                .arg(QString::fromStdString(best->name))
                .arg(best->stream)
                .arg(at(best->start), at(best->end), dur(best->start, best->end))
                .arg(best->graphId ? tr(" · graph %1").arg(best->graphId) : QString());
    }
    if (pt.y() >= g.top() && pt.y() <= g.bottom())
        for (const auto& gl : launches_)
            if (pt.x() >= X(gl.start) - 1 && pt.x() <= X(gl.end) + 1)
                return tr("graph %1 launch\n%2 → %3 (%4)")
                    .arg(gl.graphId)
                    .arg(at(gl.start), at(gl.end), dur(gl.start, gl.end));
    return {};
}

bool KernelLaneWidget::event(QEvent* e)
{
    return showToolTipFor(this, e, [this](QPoint p) { return describeAt(p); }) || QWidget::event(e);
}

} // namespace fs::views
