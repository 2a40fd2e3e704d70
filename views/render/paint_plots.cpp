// The timelines and the fragment histogram in a report image: a title, then the plot charts.h
// builds, the one the GUI shows, drawn through QCustomPlot onto the image, SVG or PDF.
#include "charts.h"
#include "paint_util.h"
#include "scene_explore.h"

#include <QPicture>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace fs::render::detail {

namespace {

// A report image of the plot's own size at 1:1 up to 700 pixels high; larger images draw the same
// plot magnified, so that text and lines grow with the picture as they do in the other views.
double magnification(const QRectF& area)
{
    return std::clamp(area.height() / 700.0, 1.0, 1.8);
}

// Draws `plot` into area: rastered as on screen for an image (PNG), through a picture for SVG
// and PDF (vector commands).
void drawPlot(QPainter& p, const QRectF& area, QCustomPlot& plot)
{
    const double k = magnification(area);
    const int w = std::max(1, static_cast<int>(std::lround(area.width() / k)));
    const int h = std::max(1, static_cast<int>(std::lround(area.height() / k)));
    const QPaintEngine* engine = p.paintEngine();
    if (!engine || engine->type() == QPaintEngine::Raster) {
        p.drawPixmap(area, plot.toPixmap(w, h, k), QRectF(0, 0, w * k, h * k));
        return;
    }
    QPicture picture;
    {
        QCPPainter qp(&picture);
        qp.setMode(QCPPainter::pmVectorized);
        plot.toPainter(&qp, w, h);
    }
    // QPicture::play scales by the device's resolution against its own (the SVG generator's 72
    // dpi against 96): undone here, so that the plot fills the area on every device.
    const double sx = k * picture.logicalDpiX() / std::max(1, p.device()->logicalDpiX());
    const double sy = k * picture.logicalDpiY() / std::max(1, p.device()->logicalDpiY());
    p.save();
    p.setClipRect(area);
    p.translate(area.topLeft());
    p.scale(sx, sy);
    p.drawPicture(0, 0, picture);
    p.restore();
}

// The plot area below the title.
QRectF chartArea(QPainter& p, const QRectF& rect, const RenderOptions& o, const QString& title,
                 const QString& subtitle)
{
    return o.title ? drawTitle(p, rect, title, subtitle, o.theme) : rect;
}

} // namespace

void paintTimeline(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o)
{
    const TrackEntry& ld = s.tracks[static_cast<size_t>(o.track)];
    const QRectF area = chartArea(
        p, rect, o,
        QStringLiteral("Allocator timelines — %1").arg(QString::fromStdString(ld.label())),
        reportSubtitle(s, QStringLiteral("%1 frames, %2 collapse(s)")
                              .arg(s.frames.size())
                              .arg(s.collapses.size())));
    TimelineChart c;
    c.track = o.track;
    c.from = o.from;
    c.to = o.to;
    c.selFrom = o.selFrom;
    c.selTo = o.selTo;
    c.ooms = oomTimes(s);
    c.graphs = o.graphs;
    c.theme = o.theme;
    c.font = chartFont();
    QCustomPlot plot;
    buildTimeline(plot, s, c);
    drawPlot(p, area, plot);
}

void paintHistogram(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o)
{
    const TrackEntry& ld = s.tracks[static_cast<size_t>(o.track)];
    const analysis::FrameInfo* f = s.frame(o.frame);
    if (f && f->start == kNoTime) f = nullptr;
    const analysis::FrameInfo* prev = f && o.compare ? s.frame(f->index - 1) : nullptr;
    if (prev && prev->start == kNoTime) prev = nullptr;
    const analysis::State cur = s.stateAt(o.track, o.at);
    analysis::State before;
    if (prev) before = s.stateAt(o.track, prev->end);
    HistogramChart h = histogramChart(s, o.at, f ? f->index : -1, cur, prev ? prev->index : -1,
                                      prev ? &before : nullptr);
    h.theme = o.theme;
    h.font = chartFont();
    const QString when = f ? QStringLiteral("end of frame %1").arg(f->index)
                           : QStringLiteral("t = %1").arg(QString::fromStdString(
                                 formatTime(o.at - s.timeBegin(), s.summary.timeAxis)));
    const QRectF area =
        chartArea(p, rect, o,
                  QStringLiteral("Free-fragment histogram — %1 at %2")
                      .arg(QString::fromStdString(ld.label()), when),
                  reportSubtitle(s, QStringLiteral("%1 free fragments").arg(cur.fragmentCount)));
    QCustomPlot plot;
    buildHistogram(plot, h);
    drawPlot(p, area, plot);
}

} // namespace fs::render::detail
