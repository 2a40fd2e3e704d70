#include "heatmap_widget.h"

#include "worker_priority.h"

#include <QApplication>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPointer>
#include <QThreadPool>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace fs::views {

namespace {
// What a raster request shows before its full-resolution image (HeatmapWidget::startRaster).
enum class Pass { Preview, Coarse, None };
} // namespace

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent)
{
    setFocusPolicy(Qt::StrongFocus);
    setMouseTracking(true);
    setMinimumSize(320, 240);
    setAccessibleName(QStringLiteral("VA heatmap"));
}

HeatmapWidget::~HeatmapWidget()
{
    if (cancel_) cancel_->store(true);
}

void HeatmapWidget::setScene(std::shared_ptr<const render::Scene> scene, int level)
{
    scene_ = std::move(scene);
    level_ = level;
    sel_ = {};
    fit();
}

void HeatmapWidget::setLevel(int level)
{
    level_ = level;
    fit();
}

void HeatmapWidget::setDark(bool dark)
{
    dark_ = dark;
    update();
}

render::RenderOptions HeatmapWidget::options() const
{
    render::RenderOptions o;
    o.level = level_;
    o.from = vp_.t0;
    o.to = vp_.t1;
    o.y0 = vp_.y0;
    o.y1 = vp_.y1;
    o.selFrom = sel_.from;
    o.selTo = sel_.to;
    o.selAlloc = sel_.allocId;
    o.marker = sel_.marker;
    o.frame = sel_.frame;
    o.theme = dark_ ? render::Theme::darkTheme() : render::Theme::light();
    o.title = false;
    return o;
}

QRectF HeatmapWidget::plotArea() const
{
    return render::plotRect(render::View::Heatmap, rect(), options());
}

render::Viewport HeatmapWidget::clamp(render::Viewport vp) const
{
    if (!scene_ || level_ < 0) return vp;
    const render::Viewport full = render::fullViewport(*scene_, level_);
    const int64_t minT = std::min<int64_t>(1000, full.t1 - full.t0);
    int64_t span = std::clamp<int64_t>(vp.t1 - vp.t0, minT, full.t1 - full.t0);
    vp.t0 = std::clamp(vp.t0, full.t0, full.t1 - span);
    vp.t1 = vp.t0 + span;
    const double minY = std::min(4096.0, full.y1);
    const double yspan = std::clamp(vp.y1 - vp.y0, minY, full.y1 - full.y0);
    vp.y0 = std::clamp(vp.y0, full.y0, full.y1 - yspan);
    vp.y1 = vp.y0 + yspan;
    return vp;
}

void HeatmapWidget::setViewport(render::Viewport vp)
{
    vp = clamp(vp);
    if (vp == vp_ && (!raster_.isNull() || refined_)) return;
    vp_ = vp;
    requestRaster();
    emit viewportChanged(vp_);
}

void HeatmapWidget::fit()
{
    if (!scene_ || level_ < 0) {
        raster_ = {};
        update();
        return;
    }
    raster_ = {};
    rasterVp_ = {};
    vp_ = {};
    setViewport(render::fullViewport(*scene_, level_));
}

void HeatmapWidget::zoomToTime(int64_t a, int64_t b)
{
    const int64_t margin = std::max<int64_t>(1, (b - a) / 2);
    render::Viewport vp = vp_;
    vp.t0 = a - margin;
    vp.t1 = b + margin;
    setViewport(vp);
}

void HeatmapWidget::setSelection(const Selection& s)
{
    sel_ = s;
    if (scene_ && s.from != kNoTime && (s.to < vp_.t0 || s.from > vp_.t1)) {
        // Scroll to the selection, keeping the zoom when it fits.
        const int64_t span = vp_.t1 - vp_.t0;
        render::Viewport vp = vp_;
        if (s.to - s.from < span) {
            vp.t0 = s.from - (span - (s.to - s.from)) / 2;
            vp.t1 = vp.t0 + span;
            setViewport(vp);
        } else {
            zoomToTime(s.from, s.to);
        }
    }
    update();
}

void HeatmapWidget::requestRaster()
{
    refined_ = false;
    update(); // until the worker answers, paintEvent stretches the last raster onto vp_
    if (!scene_ || level_ < 0) return;
    // One raster job at a time. A request while one runs stops its full-resolution pass (its
    // coarse image, if already out, stays on screen) and runs after it: each job shows at least
    // its coarse image, so views refreshed faster than a raster takes (a live recording) still
    // progress instead of cancelling every job before it delivers anything.
    if (rasterBusy_) {
        rasterPending_ = true;
        if (cancel_) cancel_->store(true);
        return;
    }
    startRaster();
}

void HeatmapWidget::startRaster()
{
    rasterBusy_ = true;
    rasterPending_ = false;
    const QRectF plot = plotArea();
    const double dpr = devicePixelRatioF();
    const int w = std::max(1, static_cast<int>(plot.width() * dpr));
    const int h = std::max(1, static_cast<int>(plot.height() * dpr));
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    QPointer<HeatmapWidget> self(this);
    auto scene = scene_;
    auto cancel = cancel_;
    const render::Viewport vp = vp_;
    const int level = level_;
    auto post = [self, vp, path = scene_->path](QImage img, bool fine, bool last) {
        QMetaObject::invokeMethod(
            qApp,
            [self, img = std::move(img), vp, fine, last, path] {
                if (!self) return; // only one job runs: whatever it sends is for this widget
                // An image of another session is never shown, one of an older refresh of the
                // same recording is (stretched onto the current viewport, until the next).
                if (!img.isNull() && self->scene_ && self->scene_->path == path) {
                    self->raster_ = img;
                    self->rasterVp_ = vp;
                    self->refined_ = fine && !self->rasterPending_ && vp == self->vp_;
                    self->update();
                    emit self->rasterShown();
                }
                if (!last) return;
                self->rasterBusy_ = false;
                if (self->rasterPending_ && self->scene_ && self->level_ >= 0)
                    self->startRaster();
                else if (self->refined_)
                    emit self->refinedChanged();
            },
            Qt::QueuedConnection);
    };
    // A raster costs blocks in view + pixels (estimated from the share of the run in view).
    // When the blocks dominate (a zoomed-out view of millions) and the engine's level-of-detail
    // grid is there, its preview (O(pixels)) goes first; when the pixels dominate, a coarse
    // exact pass (a sixteenth of them) does. Otherwise a first image would cost about as much
    // as the full one (building the grid costs more) and only delay it: the full one comes
    // at once.
    const double share =
        static_cast<double>(vp.t1 - vp.t0) /
        static_cast<double>(std::max<int64_t>(1, scene_->timeEnd() - scene_->timeBegin()));
    const double blocks =
        static_cast<double>(scene_->levels[static_cast<size_t>(level)].allocations) * share;
    const double pixels = static_cast<double>(w) * h;
    const Pass first = blocks < 0.5 * pixels                                   ? Pass::Coarse
                       : blocks >= 4.0 * pixels && scene_->previewReady(level) ? Pass::Preview
                                                                               : Pass::None;
    QThreadPool::globalInstance()->start([scene, cancel, vp, level, w, h, post, first] {
        lowerWorkerPriority();
        if (first == Pass::Preview) {
            // The engine's level-of-detail image first (O(pixels), whatever the blocks), then
            // the exact one; the exact one is shown even when a newer request came meanwhile
            // (stretched onto the new viewport, not marked refined).
            post(render::heatmapImage(
                     scene->heatmapPreview(level, vp.t0, vp.t1, vp.y0, vp.y1, w, h)),
                 false, false);
            if (cancel->load()) {
                post(QImage(), false, true);
                return;
            }
        } else if (first == Pass::Coarse) {
            // The coarse pass (a quarter of the pixels each way) always completes.
            QImage coarse =
                render::heatmapRaster(*scene, level, vp, std::max(1, w / 4), std::max(1, h / 4));
            if (cancel->load()) {
                post(std::move(coarse), false, true);
                return;
            }
            post(std::move(coarse), false, false);
        }
        QImage fine = render::heatmapRaster(*scene, level, vp, w, h);
        // A cancelled full raster after a coarse one is dropped; otherwise it is shown (on a
        // newer viewport stretched, not marked refined).
        post(cancel->load() && first == Pass::Coarse ? QImage() : std::move(fine), true, true);
    });
}

QImage HeatmapWidget::placeholder() const
{
    // The last raster, moved and scaled to where its viewport lies in the current one.
    const QRectF plot = plotArea();
    QImage img(std::max(1, static_cast<int>(plot.width())),
               std::max(1, static_cast<int>(plot.height())), QImage::Format_RGB32);
    img.fill(render::outsideColor());
    if (raster_.isNull()) return img;
    const double sx = img.width() / static_cast<double>(std::max<int64_t>(1, vp_.t1 - vp_.t0));
    const double sy = img.height() / std::max(1e-9, vp_.y1 - vp_.y0);
    const QRectF target(
        static_cast<double>(rasterVp_.t0 - vp_.t0) * sx, (vp_.y1 - rasterVp_.y1) * sy,
        static_cast<double>(rasterVp_.t1 - rasterVp_.t0) * sx, (rasterVp_.y1 - rasterVp_.y0) * sy);
    QPainter p(&img);
    p.drawImage(target, raster_);
    return img;
}

void HeatmapWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    if (!scene_ || level_ < 0) {
        p.fillRect(rect(), palette().window());
        p.setPen(palette().text().color());
        p.drawText(rect(), Qt::AlignCenter,
                   scene_ ? tr("This session has no allocations to draw.")
                          : tr("Open a session (File › Open, or drop a .fragscope file here)"));
        return;
    }
    if (rasterVp_ == vp_ && !raster_.isNull()) {
        render::paint(p, rect(), *scene_, render::View::Heatmap, options(), &raster_);
    } else {
        const QImage ph = placeholder();
        render::paint(p, rect(), *scene_, render::View::Heatmap, options(), &ph);
    }
    paintPoolOutline(p, plotArea(), vp_, scene_->levels[static_cast<size_t>(level_)],
                     scene_->timeEnd(), outline_);
    if (boxing_) {
        p.setPen(QPen(QColor(255, 255, 255), 1, Qt::DashLine));
        p.setBrush(QColor(255, 255, 255, 40));
        p.drawRect(box_);
    }
    if (!refined_) {
        p.setPen(QColor(255, 255, 255));
        p.drawText(plotArea().adjusted(6, 4, -6, -4), Qt::AlignRight | Qt::AlignBottom,
                   tr("refining…"));
    }
}

void HeatmapWidget::setPoolOutline(const PoolOutline& o)
{
    outline_ = o;
    update();
}

bool HeatmapWidget::toData(const QPointF& pt, int64_t& t, double& y) const
{
    const QRectF plot = plotArea();
    if (!plot.contains(pt)) return false;
    const double fx = (pt.x() - plot.left()) / plot.width();
    const double fy = (plot.bottom() - pt.y()) / plot.height();
    t = vp_.t0 + static_cast<int64_t>(fx * static_cast<double>(vp_.t1 - vp_.t0));
    y = vp_.y0 + fy * (vp_.y1 - vp_.y0);
    return true;
}

void HeatmapWidget::zoomAround(double fx, double fy, double factorT, double factorY)
{
    render::Viewport vp = vp_;
    const double st = static_cast<double>(vp.t1 - vp.t0);
    const double ct = static_cast<double>(vp.t0) + fx * st;
    vp.t0 = static_cast<int64_t>(ct - fx * st * factorT);
    vp.t1 = static_cast<int64_t>(ct + (1 - fx) * st * factorT);
    const double sy = vp.y1 - vp.y0;
    const double cy = vp.y0 + fy * sy;
    vp.y0 = cy - fy * sy * factorY;
    vp.y1 = cy + (1 - fy) * sy * factorY;
    setViewport(vp);
}

void HeatmapWidget::wheelEvent(QWheelEvent* e)
{
    const QRectF plot = plotArea();
    const double fx = std::clamp((e->position().x() - plot.left()) / plot.width(), 0.0, 1.0);
    const double fy = std::clamp((plot.bottom() - e->position().y()) / plot.height(), 0.0, 1.0);
    const double steps = e->angleDelta().y() / 120.0;
    const double factor = std::pow(0.8, steps);
    if (e->modifiers() & Qt::ControlModifier)
        zoomAround(fx, fy, 1.0, factor);
    else
        zoomAround(fx, fy, factor, 1.0);
    e->accept();
}

void HeatmapWidget::mousePressEvent(QMouseEvent* e)
{
    pressPos_ = e->position();
    pressVp_ = vp_;
    boxing_ = e->button() == Qt::RightButton ||
              (e->button() == Qt::LeftButton && (e->modifiers() & Qt::ShiftModifier));
    dragging_ = !boxing_ && e->button() == Qt::LeftButton;
    box_ = QRectF(pressPos_, pressPos_);
    setFocus();
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* e)
{
    if (boxing_) {
        box_ = QRectF(pressPos_, e->position()).normalized().intersected(plotArea());
        update();
        return;
    }
    if (!dragging_) return;
    const QRectF plot = plotArea();
    const QPointF d = e->position() - pressPos_;
    render::Viewport vp = pressVp_;
    const auto dt =
        static_cast<int64_t>(-d.x() / plot.width() * static_cast<double>(vp.t1 - vp.t0));
    const double dy = d.y() / plot.height() * (vp.y1 - vp.y0);
    vp.t0 += dt;
    vp.t1 += dt;
    vp.y0 += dy;
    vp.y1 += dy;
    setViewport(vp);
}

void HeatmapWidget::mouseReleaseEvent(QMouseEvent* e)
{
    const bool click = (e->position() - pressPos_).manhattanLength() < 4;
    if (boxing_) {
        boxing_ = false;
        int64_t ta, tb;
        double ya, yb;
        if (!click && box_.width() > 3 && box_.height() > 3 && toData(box_.topLeft(), ta, yb) &&
            toData(box_.bottomRight() - QPointF(0.5, 0.5), tb, ya))
            setViewport({ta, tb, ya, yb});
        update();
        return;
    }
    dragging_ = false;
    if (click && e->button() == Qt::LeftButton && scene_) {
        int64_t t;
        double y;
        uint64_t addr;
        const auto& ld = scene_->levels[static_cast<size_t>(level_)];
        if (toData(e->position(), t, y) && ld.yToAddress(y, addr))
            if (const auto a = scene_->allocationAt(level_, t, addr)) emit allocationClicked(a->id);
    }
}

void HeatmapWidget::keyPressEvent(QKeyEvent* e)
{
    render::Viewport vp = vp_;
    const int64_t st = vp.t1 - vp.t0;
    const double sy = vp.y1 - vp.y0;
    switch (e->key()) {
    case Qt::Key_F:
    case Qt::Key_Home:
        fit();
        return;
    case Qt::Key_Left:
        vp.t0 -= st / 10;
        vp.t1 -= st / 10;
        break;
    case Qt::Key_Right:
        vp.t0 += st / 10;
        vp.t1 += st / 10;
        break;
    case Qt::Key_Up:
        vp.y0 += sy / 10;
        vp.y1 += sy / 10;
        break;
    case Qt::Key_Down:
        vp.y0 -= sy / 10;
        vp.y1 -= sy / 10;
        break;
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        zoomAround(0.5, 0.5, 0.5, 1.0);
        return;
    case Qt::Key_Minus:
        zoomAround(0.5, 0.5, 2.0, 1.0);
        return;
    default:
        QWidget::keyPressEvent(e);
        return;
    }
    setViewport(vp);
}

void HeatmapWidget::resizeEvent(QResizeEvent*)
{
    if (scene_) requestRaster();
}

QString HeatmapWidget::describeAt(const QPointF& pt) const
{
    int64_t t;
    double y;
    if (!scene_ || level_ < 0 || !toData(pt, t, y)) return {};
    const auto& ld = scene_->levels[static_cast<size_t>(level_)];
    const TimeAxis ax = scene_->summary.timeAxis;
    uint64_t addr;
    const QString when = QString::fromStdString(render::formatTime(t - scene_->timeBegin(), ax));
    if (!ld.yToAddress(y, addr))
        return tr("%1\n(gap between regions: collapsed on this axis)").arg(when);
    if (const auto a = scene_->allocationAt(level_, t, addr)) {
        QString s =
            tr("allocation #%1%2\naddress %3, size %4 (requested %5)\nalive %6 → %7\nstream %8")
                .arg(a->id)
                .arg(a->tag.empty() ? QString()
                                    : QStringLiteral(" (%1)").arg(QString::fromStdString(a->tag)))
                .arg(QString::fromStdString(render::formatAddress(a->address)),
                     QString::fromStdString(render::formatBytes(static_cast<double>(a->size))),
                     a->requestedSize ? QString::fromStdString(render::formatBytes(
                                            static_cast<double>(a->requestedSize)))
                                      : tr("unknown"),
                     QString::fromStdString(
                         render::formatTime(a->allocNs - scene_->timeBegin(), ax)),
                     a->freeNs != analysis::kAlive ? QString::fromStdString(render::formatTime(
                                                         a->freeNs - scene_->timeBegin(), ax))
                                                   : tr("end (never freed)"))
                .arg(a->stream);
        return s;
    }
    for (const auto& fr : scene_->fragmentsAt(level_, t))
        if (addr >= fr.address && addr < fr.address + fr.size)
            return tr("free fragment at %1, %2\nat %3")
                .arg(QString::fromStdString(render::formatAddress(fr.address)),
                     QString::fromStdString(render::formatBytes(static_cast<double>(fr.size))),
                     when);
    return tr("%1 at %2\n(outside any live region)")
        .arg(QString::fromStdString(render::formatAddress(addr)), when);
}

bool HeatmapWidget::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(e);
        const QString s = describeAt(he->pos());
        if (s.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(he->globalPos(), s, this);
        return true;
    }
    return QWidget::event(e);
}

} // namespace fs::views
