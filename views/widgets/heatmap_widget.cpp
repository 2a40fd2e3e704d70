#include "heatmap_widget.h"
#include "tooltip.h"

#include "render/scene_explore.h"

#include <QApplication>
#include <QFontMetricsF>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace fs::views {

namespace {
// What a raster request shows before its full-resolution image (HeatmapWidget::requestRaster).
enum class Pass { Preview, Coarse, None };

// The x of time t in a plot showing vp.
double xOf(const QRectF& plot, const render::Viewport& vp, int64_t t)
{
    return plot.left() + static_cast<double>(t - vp.t0) /
                             static_cast<double>(std::max<int64_t>(1, vp.t1 - vp.t0)) *
                             plot.width();
}
} // namespace

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent)
{
    setFocusPolicy(Qt::StrongFocus);
    setMouseTracking(true);
    setMinimumSize(320, 240);
    setAccessibleName(QStringLiteral("VA heatmap"));
    awaitTimer_->setSingleShot(true);
    awaitTimer_->setInterval(kAwaitMs);
    connect(awaitTimer_, &QTimer::timeout, this, [this] {
        standIn_ = {};
        update(); // no picture came from the worker in time: paintEvent paints one
    });
}

HeatmapWidget::~HeatmapWidget() = default; // the tracker stops a raster still running

void HeatmapWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    // A loader's preview replaced by its session's first look: the preview's picture stays on
    // screen (the same blocks, as the placeholder) until the first look's own comes.
    const bool fromPreview =
        scene_ && scene_->preview && scene && track_ >= 0 && track >= 0 &&
        scene->path == scene_->path && static_cast<size_t>(track) < scene->tracks.size() &&
        scene->tracks[static_cast<size_t>(track)].device == scene_->preview->device &&
        scene->tracks[static_cast<size_t>(track)].level == scene_->preview->level;
    const QImage kept = fromPreview ? raster_ : QImage();
    const render::Viewport keptVp = rasterVp_;
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    const QImage replaced = fromPreview ? base_ : QImage();
    base_ = {}; // the key does not name the scene
    fit();
    if (!kept.isNull()) {
        raster_ = kept;
        rasterVp_ = keptVp;
    }
    // The new scene's first picture (the kept preview, or the placeholder, under the new
    // axes) is painted on a worker; the picture it replaces stays until it comes.
    standIn_ = replaced;
    paintBaseBeside();
}

void HeatmapWidget::awaitPicture(QImage standIn)
{
    standIn_ = std::move(standIn);
    awaitTimer_->start(); // on its timeout paintEvent paints one, unless the worker's came
    update();
}

void HeatmapWidget::endAwait()
{
    awaitTimer_->stop();
    standIn_ = {};
}

void HeatmapWidget::paintBaseBeside()
{
    if (!scene_ || track_ < 0) {
        endAwait();
        update();
        return;
    }
    const BaseInputs in = baseInputs();
    baseJobs_->start([this, scene = scene_, in, picture = pictureForView()](const Job& job) {
        QImage base = paintBase(*scene, in, picture);
        job.post([this, base = std::move(base), key = in.key]() mutable {
            if (!takeBase(std::move(base), key)) endAwait(); // stale already: paintEvent paints it
            update();
        });
    });
    awaitPicture(base_.isNull() ? standIn_ : base_);
}

bool HeatmapWidget::takeBase(QImage base, const BaseKey& key)
{
    if (base.isNull() || !(key == baseKey())) return false;
    base_ = std::move(base);
    baseKey_ = key;
    baseFromWorker_ = true;
    endAwait();
    return true;
}

bool HeatmapWidget::pictureAwaited() const
{
    return awaitTimer_->isActive() && (rasterJobs_->busy() || baseJobs_->busy());
}

bool HeatmapWidget::paintStandIn(QPainter& p)
{
    if (!pictureAwaited()) {
        endAwait();
        return false;
    }
    if (!standIn_.isNull())
        p.drawImage(QRectF(rect()), standIn_); // scaled when the widget was resized since
    else
        p.fillRect(rect(), palette().window());
    return true;
}

void HeatmapWidget::setTrack(int track)
{
    track_ = track;
    fit();
}

void HeatmapWidget::setLinked(int64_t unitSpan)
{
    linked_ = true;
    unitSpan_ = unitSpan;
    update();
}

void HeatmapWidget::setDark(bool dark)
{
    dark_ = dark;
    update();
}

render::RenderOptions HeatmapWidget::options() const
{
    render::RenderOptions o;
    o.track = track_;
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
    o.occupancyLegend = legend_.empty();
    // A colouring's legend gets a column of its own beside the plot (over the plot it hid the
    // blocks it names); set with the style, before its raster comes, so the plot keeps its size.
    if (style_.colouring != analysis::Colouring::Occupancy) o.legendWidth = kLegendWidth;
    o.unitSpan = unitSpan_;
    return o;
}

QRectF HeatmapWidget::plotArea() const
{
    return render::plotRect(render::View::Heatmap, rect(), options());
}

render::Viewport HeatmapWidget::clamp(render::Viewport vp) const
{
    if (!scene_ || track_ < 0) return vp;
    const render::Viewport full = render::fullViewport(*scene_, track_);
    const int64_t minT = std::min<int64_t>(1000, full.t1 - full.t0);
    if (linked_) { // the other view's range, whatever this session's length
        vp.t1 = std::max(vp.t1, vp.t0 + std::max<int64_t>(minT, 1));
    } else {
        const int64_t span = std::clamp<int64_t>(vp.t1 - vp.t0, minT, full.t1 - full.t0);
        vp.t0 = std::clamp(vp.t0, full.t0, full.t1 - span);
        vp.t1 = vp.t0 + span;
    }
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
    if (!scene_ || track_ < 0) {
        raster_ = {};
        update();
        return;
    }
    raster_ = {};
    rasterVp_ = {};
    vp_ = {};
    setViewport(render::fullViewport(*scene_, track_));
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
    if (!scene_ || track_ < 0) return;
    // One raster job at a time. A request while one runs stops its full-resolution pass (its
    // coarse image, if already out, stays on screen) and runs after it: each job shows at least
    // its coarse image, so views refreshed faster than a raster takes (a live recording) still
    // progress instead of cancelling every job before it delivers anything (the tracker's
    // Follow mode).
    const QRectF plot = plotArea();
    const double dpr = devicePixelRatioF();
    const int w = std::max(1, static_cast<int>(plot.width() * dpr));
    const int h = std::max(1, static_cast<int>(plot.height() * dpr));
    auto scene = scene_;
    const render::Viewport vp = vp_;
    const int track = track_;
    using Legend = std::shared_ptr<const analysis::StyledRaster>;
    // Posts from the worker, with the base image around the raster painted there too (the
    // GUI thread then only copies it, unless the view changed meanwhile); run on the GUI thread
    // while the widget (its tracker) lives.
    auto post = [this, vp, path = scene_->path, scene, in = baseInputs()](
                    const Job& job, QImage img, bool fine, Legend legend = nullptr) {
        BaseInputs b = in;
        b.key.options.occupancyLegend = !legend || legend->legend.empty(); // as options() will
        QImage base = img.isNull() || job.cancelled() ? QImage() : paintBase(*scene, b, img);
        job.post([this, img = std::move(img), vp, fine, path, legend, base = std::move(base),
                  key = b.key]() mutable {
            // An image of another session is never shown, one of an older refresh of the
            // same recording is (stretched onto the current viewport, until the next).
            if (img.isNull() || !scene_ || scene_->path != path) return;
            legend_ = legend ? legend->legend : std::vector<analysis::LegendEntry>{};
            legendColours_ = legend ? render::legendColours(*legend) : std::vector<QColor>{};
            raster_ = img;
            rasterVp_ = vp;
            refined_ = fine && !rasterJobs_->superseded() && vp == vp_;
            key.rasterVp = vp;
            key.raster = raster_.cacheKey();
            if (takeBase(std::move(base), key)) {
                update();
            } else if (vp == vp_) {
                paintBaseBeside(); // the inputs changed while it ran (a resize, the OOMs)
            } else {               // an earlier viewport's, stretched onto this one by paintEvent
                update();
            }
            emit rasterShown();
            if (refined_) emit refinedChanged();
        });
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
        static_cast<double>(scene_->tracks[static_cast<size_t>(track)].allocations) * share;
    const double pixels = static_cast<double>(w) * h;
    if (!scene_->engine) {
        // A loader's preview (render::previewScene): its level-of-detail picture is all there is.
        rasterJobs_->start([scene, vp, track, w, h, post](const Job& job) {
            post(job,
                 render::heatmapImage(
                     scene->heatmapPreview(track, vp.t0, vp.t1, vp.y0, vp.y1, w, h)),
                 false);
        });
        return;
    }
    const Pass first = blocks < 0.5 * pixels                                   ? Pass::Coarse
                       : blocks >= 4.0 * pixels && scene_->previewReady(track) ? Pass::Preview
                                                                               : Pass::None;
    if (render::styled(*scene_, track, style_)) {
        // Coloured by a grouping, or one pool's blocks: the explorer's raster, in one pass.
        rasterJobs_->start([scene, vp, track, w, h, post, style = style_](const Job& job) {
            analysis::StyledRaster r;
            try {
                r = render::styledHeatmap(*scene, track, vp.t0, vp.t1, vp.y0, vp.y1, w, h, style);
            } catch (const std::invalid_argument&) { // a search that no longer parses
                auto plain = style;
                plain.colouring = analysis::Colouring::Occupancy;
                r = render::styledHeatmap(*scene, track, vp.t0, vp.t1, vp.y0, vp.y1, w, h, plain);
            }
            QImage img = render::styledImage(r);
            r.raster.occupancy.clear(); // the legend travels with the image, not the cells
            r.raster.reservedFraction.clear();
            r.raster.state.clear();
            r.category.clear();
            post(job, std::move(img), true,
                 std::make_shared<const analysis::StyledRaster>(std::move(r)));
        });
        return;
    }
    rasterJobs_->start([scene, vp, track, w, h, post, first](const Job& job) {
        if (first == Pass::Preview) {
            // The engine's level-of-detail image first (O(pixels), whatever the blocks), then
            // the exact one; the exact one is shown even when a newer request came meanwhile
            // (stretched onto the new viewport, not marked refined).
            post(job,
                 render::heatmapImage(
                     scene->heatmapPreview(track, vp.t0, vp.t1, vp.y0, vp.y1, w, h)),
                 false);
            if (job.cancelled()) return;
        } else if (first == Pass::Coarse) {
            // The coarse pass (a quarter of the pixels each way) always completes.
            QImage coarse =
                render::heatmapRaster(*scene, track, vp, std::max(1, w / 4), std::max(1, h / 4));
            post(job, std::move(coarse), false);
            if (job.cancelled()) return;
        }
        QImage fine = render::heatmapRaster(*scene, track, vp, w, h);
        // A cancelled full raster after a coarse one is dropped; otherwise it is shown (on a
        // newer viewport stretched, not marked refined).
        post(job, job.cancelled() && first == Pass::Coarse ? QImage() : std::move(fine), true);
    });
}

QImage HeatmapWidget::pictureForView() const
{
    if (rasterVp_ == vp_ && !raster_.isNull()) return raster_;
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
    if (!scene_ || track_ < 0) {
        p.fillRect(rect(), palette().window());
        p.setPen(palette().text().color());
        p.drawText(rect(), Qt::AlignCenter,
                   scene_ ? tr("This session has no allocations to draw.")
                          : tr("Open a session (File › Open, or drop a .fragscope file here)"));
        return;
    }
    if (base_.isNull() || !(baseKey() == baseKey_)) {
        if (paintStandIn(p)) return; // a worker paints it (paintBaseBeside)
        // Painted here after a change no worker runs for (a selection, the theme, a zoom or
        // pan: at once), or when the worker's did not come in time.
        ++basesPaintedHere_;
        const BaseInputs in = baseInputs();
        base_ = paintBase(*scene_, in, pictureForView());
        baseKey_ = in.key;
        baseFromWorker_ = false;
    }
    p.drawImage(QPointF(0, 0), base_);
    paintOverlay(p);
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

HeatmapWidget::BaseKey HeatmapWidget::baseKey() const
{
    return {options(), rasterVp_, raster_.cacheKey(), size(), devicePixelRatioF(), baseGeneration_};
}

HeatmapWidget::BaseInputs HeatmapWidget::baseInputs() const
{
    return {baseKey(), rect(), plotArea(), vp_, outline_, ooms_};
}

QImage HeatmapWidget::paintBase(const render::Scene& scene, const BaseInputs& in,
                                const QImage& picture)
{
    const BaseKey& key = in.key;
    QImage base(in.rect.size() * key.dpr, QImage::Format_ARGB32_Premultiplied);
    base.setDevicePixelRatio(key.dpr);
    base.fill(Qt::transparent);
    QPainter bp(&base);
    render::paint(bp, in.rect, scene, render::View::Heatmap, key.options, &picture);
    paintPoolOutline(bp, in.plot, in.vp, scene.tracks[static_cast<size_t>(key.options.track)],
                     scene.timeEnd(), in.outline);
    std::vector<double> xs;
    for (int64_t t : in.ooms)
        if (t >= in.vp.t0 && t <= in.vp.t1) xs.push_back(xOf(in.plot, in.vp, t));
    render::paintOomMarks(bp, in.plot, xs);
    return base;
}

void HeatmapWidget::setPoolOutline(const PoolOutline& o)
{
    if (o.empty() && outline_.empty()) return; // a new graphs report says "none" again
    outline_ = o;
    ++baseGeneration_;
    paintBaseBeside();
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
    setFocus();
    const QRectF plot = plotArea();
    // The cursor line (within 5 px) or the time axis strip under the plot: scrub the cursor.
    const bool onLine = cursor_ != kNoTime &&
                        std::fabs(e->position().x() - timeToX(cursor_)) <= 5 &&
                        e->position().y() >= plot.top() && e->position().y() <= plot.bottom();
    const bool onAxis = e->position().y() > plot.bottom() &&
                        e->position().y() < plot.bottom() + 34 &&
                        e->position().x() >= plot.left() && e->position().x() <= plot.right();
    if (scene_ && scene_->engine && e->button() == Qt::LeftButton && (onLine || onAxis)) {
        scrubbing_ = true;
        boxing_ = dragging_ = false;
        mouseMoveEvent(e);
        return;
    }
    boxing_ = e->button() == Qt::RightButton ||
              (e->button() == Qt::LeftButton && (e->modifiers() & Qt::ShiftModifier));
    dragging_ = !boxing_ && e->button() == Qt::LeftButton;
    box_ = QRectF(pressPos_, pressPos_);
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* e)
{
    if (scrubbing_) {
        const QRectF plot = plotArea();
        const double fx = std::clamp((e->position().x() - plot.left()) / plot.width(), 0.0, 1.0);
        emit cursorRequested(vp_.t0 +
                             static_cast<int64_t>(fx * static_cast<double>(vp_.t1 - vp_.t0)));
        return;
    }
    if (!dragging_ && !boxing_ && cursor_ != kNoTime) {
        const bool near = std::fabs(e->position().x() - timeToX(cursor_)) <= 5 &&
                          plotArea().contains(e->position());
        QWidget::setCursor(near ? Qt::SizeHorCursor : Qt::ArrowCursor);
    }
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
    if (scrubbing_) {
        scrubbing_ = false;
        return;
    }
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
    if (click && e->button() == Qt::LeftButton && scene_ && scene_->engine) {
        int64_t t;
        double y;
        uint64_t addr;
        const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
        if (toData(e->position(), t, y)) {
            emit cursorRequested(t);
            if (ld.yToAddress(y, addr))
                if (const auto a = scene_->allocationAt(track_, t, addr))
                    emit allocationClicked(a->id);
        }
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
    if (!scene_) return;
    requestRaster();
    paintBaseBeside(); // the last raster stretched, at the new size, until the new one comes
}

void HeatmapWidget::setTimeCursor(int64_t t)
{
    if (t == cursor_) return;
    cursor_ = t;
    update();
}

void HeatmapWidget::setStyle(const analysis::HeatmapStyle& style)
{
    style_ = style;
    if (scene_ && track_ >= 0) requestRaster();
}

void HeatmapWidget::setOoms(std::vector<int64_t> times)
{
    if (times == ooms_) return;
    ooms_ = std::move(times);
    ++baseGeneration_; // the marks are in the base image
    paintBaseBeside();
}

void HeatmapWidget::setFragmentHighlight(uint64_t address, uint64_t size)
{
    fragAddress_ = address;
    fragSize_ = size;
    update();
}

void HeatmapWidget::setNote(const QString& note)
{
    note_ = note;
    update();
}

double HeatmapWidget::timeToX(int64_t t) const
{
    return xOf(plotArea(), vp_, t);
}

void HeatmapWidget::showSpan(int64_t t0, int64_t t1, uint64_t address, uint64_t size)
{
    if (!scene_ || track_ < 0) return;
    const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
    render::Viewport vp = vp_;
    const double ya = ld.addressToY(address);
    const double yb = ld.addressToY(address + size);
    bool change = false;
    if (t0 < vp.t0 || t1 > vp.t1) {
        const int64_t margin = std::max<int64_t>(1, (t1 - t0) / 8);
        vp.t0 = std::min(vp.t0, t0 - margin);
        vp.t1 = std::max(vp.t1, t1 + margin);
        change = true;
    }
    if (ya >= 0 && (ya < vp.y0 || yb > vp.y1)) {
        const double span = std::max(vp.y1 - vp.y0, (yb - ya) * 1.5);
        vp.y0 = (ya + yb) / 2 - span / 2;
        vp.y1 = vp.y0 + span;
        change = true;
    }
    if (change) setViewport(vp);
}

void HeatmapWidget::paintOverlay(QPainter& p)
{
    if (!scene_ || track_ < 0) return;
    const QRectF plot = plotArea();
    const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
    p.save();
    const double yspan = std::max(1e-9, vp_.y1 - vp_.y0);
    auto Y = [&](double y) { return plot.bottom() - (y - vp_.y0) / yspan * plot.height(); };
    // The free fragment picked in the block list or found by a search, at the cursor.
    if (fragSize_ > 0 && cursor_ != kNoTime) {
        const double ya = ld.addressToY(fragAddress_), yb = ld.addressToY(fragAddress_ + fragSize_);
        if (ya >= 0) {
            const double x = timeToX(cursor_);
            p.setPen(QPen(QColor(40, 230, 120), 2));
            p.setBrush(Qt::NoBrush);
            p.drawRect(QRectF(QPointF(x - 6, Y(yb)), QPointF(x + 6, Y(ya))).adjusted(0, -1, 0, 1));
        }
    }
    // The time cursor: a line with a handle on the axis.
    if (cursor_ != kNoTime && cursor_ >= vp_.t0 && cursor_ <= vp_.t1) {
        const double x = timeToX(cursor_);
        p.setPen(QPen(QColor(255, 160, 20), 1.5));
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom() + 6));
        p.setPen(Qt::NoPen);
        p.setBrush(QColor(255, 160, 20));
        const QPointF tri[] = {
            {x, plot.bottom() + 1}, {x - 6, plot.bottom() + 11}, {x + 6, plot.bottom() + 11}};
        p.drawPolygon(tri, 3);
    }
    // The colouring's legend, in its column right of the plot.
    if (!legend_.empty() && legend_.size() == legendColours_.size()) {
        QFont f = p.font();
        f.setPointSizeF(std::max(7.0, f.pointSizeF() * 0.85));
        p.setFont(f);
        const QFontMetricsF fm(f);
        const double lh = fm.height() + 2;
        const double wmax = kLegendWidth - 42; // the box's margins and colour swatch
        QStringList labels;
        for (const auto& e : legend_) // file:line first: a long label loses its end
            labels << fm.elidedText(QString::fromStdString(e.label), Qt::ElideRight, wmax);
        const QString title = fm.elidedText(
            tr("coloured by %1").arg(QString::fromUtf8(analysis::colouringName(style_.colouring))),
            Qt::ElideRight, wmax + 16);
        const QRectF box(plot.right() + 8, plot.top(), wmax + 28,
                         lh * static_cast<double>(legend_.size() + 1) + 8);
        p.setPen(QColor(255, 255, 255, 90));
        p.setBrush(QColor(20, 20, 24, 200));
        p.drawRect(box);
        p.setPen(QColor(235, 235, 235));
        p.drawText(QPointF(box.left() + 6, box.top() + 4 + fm.ascent()), title);
        for (size_t i = 0; i < legend_.size(); ++i) {
            const double y = box.top() + 4 + lh * static_cast<double>(i + 1);
            p.fillRect(QRectF(box.left() + 6, y + 2, 12, lh - 5), legendColours_[i]);
            p.drawText(QPointF(box.left() + 22, y + fm.ascent()), labels[static_cast<int>(i)]);
        }
    }
    if (!note_.isEmpty()) {
        const QRectF band(plot.left() + 8, plot.top() + 8, plot.width() * 0.6, 0);
        const QRectF r = p.fontMetrics().boundingRect(band.toRect(), Qt::TextWordWrap, note_);
        p.setPen(Qt::NoPen);
        p.setBrush(QColor(20, 20, 24, 210));
        p.drawRect(QRectF(r).adjusted(-6, -4, 6, 4));
        p.setPen(QColor(255, 210, 120));
        p.drawText(r, Qt::TextWordWrap, note_);
    }
    p.restore();
}

QString HeatmapWidget::describeAt(const QPointF& pt) const
{
    int64_t t;
    double y;
    if (!scene_ || track_ < 0 || !toData(pt, t, y)) return {};
    const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
    const TimeAxis ax = scene_->summary.timeAxis;
    uint64_t addr;
    const QString when = QString::fromStdString(render::formatTime(t - scene_->timeBegin(), ax));
    if (!ld.yToAddress(y, addr))
        return tr("%1\n(gap between regions: collapsed on this axis)").arg(when);
    if (!scene_->engine) // a loader's preview
        return tr("%1 at %2\n(the blocks are named once the session is indexed)")
            .arg(QString::fromStdString(render::formatAddress(addr)), when);
    if (const auto a = scene_->allocationAt(track_, t, addr)) {
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
    for (const auto& fr : scene_->fragmentsAt(track_, t))
        if (addr >= fr.address && addr < fr.address + fr.size)
            return tr("free fragment at %1, %2\nat %3")
                .arg(QString::fromStdString(render::formatAddress(fr.address)),
                     QString::fromStdString(render::formatBytes(static_cast<double>(fr.size))),
                     when);
    for (const auto& p : scene_->pendingFreesAt(track_, t))
        if (addr >= p.address && addr < p.address + p.size)
            return tr("pending free at %1, %2\nat %3\nfreed by the program, still used by another "
                      "stream: neither allocated nor free")
                .arg(QString::fromStdString(render::formatAddress(p.address)),
                     QString::fromStdString(render::formatBytes(static_cast<double>(p.size))),
                     when);
    return tr("%1 at %2\n(outside any live region)")
        .arg(QString::fromStdString(render::formatAddress(addr)), when);
}

bool HeatmapWidget::event(QEvent* e)
{
    return showToolTipFor(this, e, [this](QPoint p) { return describeAt(p); }) || QWidget::event(e);
}

} // namespace fs::views
