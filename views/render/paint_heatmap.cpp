// The VA heatmap and the memory map: address space pictures.
#include "paint_util.h"

#include <QFileInfo>
#include <QFontMetricsF>

#include <algorithm>
#include <cmath>

namespace fs::render::detail {

namespace {

// Hilbert curve index -> (x, y) on an n×n grid (n a power of two).
void d2xy(int n, int d, int& x, int& y)
{
    int rx, ry, t = d;
    x = y = 0;
    for (int s = 1; s < n; s *= 2) {
        rx = 1 & (t / 2);
        ry = 1 & (t ^ rx);
        if (ry == 0) {
            if (rx == 1) {
                x = s - 1 - x;
                y = s - 1 - y;
            }
            std::swap(x, y);
        }
        x += s * rx;
        y += s * ry;
        t /= 4;
    }
}

} // namespace

void paintHeatmap(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o,
                  const QImage* raster)
{
    const LevelData& ld = s.levels[static_cast<size_t>(o.level)];
    const Theme& th = o.theme;
    const int64_t span = o.to - o.from;
    if (o.title)
        drawTitle(p, rect,
                  QStringLiteral("VA heatmap — %1").arg(QString::fromStdString(ld.label())),
                  reportSubtitle(s, QStringLiteral("%1 allocations, %2 regions")
                                        .arg(ld.allocs.size())
                                        .arg(ld.regions.size())),
                  th);
    const QRectF plot = plotRect(View::Heatmap, rect, o);
    const Viewport vp{o.from, o.to, o.y0, o.y1};
    const QSize px(static_cast<int>(plot.width()), static_cast<int>(plot.height()));
    if (raster && !raster->isNull()) {
        p.drawImage(plot, *raster);
    } else {
        const QImage img = heatmapRaster(ld, vp, px.width(), px.height());
        p.drawImage(plot, img);
    }
    const double yspan = std::max(1e-9, o.y1 - o.y0);
    auto Y = [&](double y) { return plot.bottom() - (y - o.y0) / yspan * plot.height(); };
    // Region separators: the collapsed holes between reserved ranges.
    p.save();
    p.setClipRect(plot);
    p.setPen(
        QPen(th.dark ? QColor(255, 255, 255, 160) : QColor(255, 255, 255, 200), 1, Qt::DotLine));
    for (size_t i = 1; i < ld.spans.size(); ++i) {
        const double y = Y(ld.spans[i].y0);
        if (y >= plot.top() && y <= plot.bottom())
            p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    }
    // The selected allocation, outlined.
    if (o.selAlloc >= 0) {
        for (const auto& a : ld.allocs) {
            if (a.id != o.selAlloc) continue;
            const double x0 = plot.left() + static_cast<double>(a.allocNs - o.from) /
                                                static_cast<double>(span) * plot.width();
            const double x1 = plot.left() + static_cast<double>(a.freeNs - o.from) /
                                                static_cast<double>(span) * plot.width();
            const double ya = ld.addressToY(a.address);
            const QRectF r(QPointF(x0, Y(ya + static_cast<double>(a.size))),
                           QPointF(std::max(x0 + 3, x1), Y(ya)));
            p.setPen(QPen(QColor(255, 60, 200), 2));
            p.setBrush(Qt::NoBrush);
            p.drawRect(r.adjusted(-2, -2, 2, 2));
            break;
        }
    }
    if (o.marker != kNoTime && o.marker >= o.from && o.marker <= o.to) {
        const double x = plot.left() + static_cast<double>(o.marker - o.from) /
                                           static_cast<double>(span) * plot.width();
        p.setPen(QPen(QColor(255, 60, 200), 2));
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    }
    p.restore();
    drawFramesAndCollapses(p, plot, s, o.from, o.to, th, true);
    drawSelection(p, plot, o.from, o.to, o.selFrom, o.selTo, th);
    drawXAxis(p, plot, toAxisTime(s, o.from, span), toAxisTime(s, o.to, span),
              timeAxisLabel(s, span), th);
    {
        // Address ticks: region starts (the natural landmarks), thinned so labels never overlap;
        // nice offsets inside a region when few region starts are in view.
        const double kk = std::max(0.9, std::clamp(plot.height() / 560.0, 0.8, 1.8));
        p.setFont(font(11 * kk));
        const double minGap = QFontMetricsF(p.font()).height() * 1.8;
        std::vector<double> cands;
        for (const auto& sp : ld.spans)
            if (sp.y0 >= o.y0 && sp.y0 <= o.y1) cands.push_back(sp.y0);
        if (cands.size() < 4)
            for (double v :
                 niceTicks(o.y0, o.y1, std::max(2, static_cast<int>(plot.height() / minGap))))
                cands.push_back(v);
        std::sort(cands.begin(), cands.end());
        p.setPen(QPen(th.foreground, 1));
        p.drawLine(plot.topLeft(), plot.bottomLeft());
        double lastY = 1e300;
        for (double v : cands) {
            uint64_t a = 0;
            if (!ld.yToAddress(v, a)) continue;
            const double y = Y(v);
            if (std::fabs(lastY - y) < minGap || y < plot.top() - 1 || y > plot.bottom() + 1)
                continue;
            lastY = y;
            p.drawLine(QPointF(plot.left() - 5 * kk, y), QPointF(plot.left(), y));
            p.drawText(QRectF(plot.left() - 150 * kk, y - 8 * kk, 143 * kk, 16 * kk),
                       Qt::AlignRight | Qt::AlignVCenter, QString::fromStdString(formatAddress(a)));
        }
    }
    {
        // The address axis title, rotated, at the far left.
        const double kk = std::max(0.9, std::clamp(plot.height() / 560.0, 0.8, 1.8));
        p.save();
        p.setPen(th.foreground);
        p.setFont(font(11.5 * kk, true));
        p.translate(rect.left() + 12 * kk, plot.center().y());
        p.rotate(-90);
        p.drawText(QRectF(-plot.height() / 2, -9 * kk, plot.height(), 18 * kk), Qt::AlignCenter,
                   QStringLiteral("address (hex; gaps between regions collapsed, dotted)"));
        p.restore();
    }
    std::vector<LegendItem> items = {{occupancyColor(0.15), QStringLiteral("low occupancy")},
                                     {occupancyColor(0.6), QStringLiteral("partly allocated")},
                                     {occupancyColor(1.0), QStringLiteral("fully allocated")},
                                     {freeColor(), QStringLiteral("free inside a region")},
                                     {outsideColor(), QStringLiteral("outside any region")},
                                     {collapseColor(), QStringLiteral("collapsed frames"), 0},
                                     {th.muted, QStringLiteral("frame boundary (numbered)"), 2}};
    const double kk = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    drawLegend(p, plot.left(), plot.bottom() + 46 * kk, plot.width(), items, th);
}

void paintMemMap(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o)
{
    const LevelData& ld = s.levels[static_cast<size_t>(o.level)];
    const Theme& th = o.theme;
    const int64_t t = o.at;
    const FrameRow* f = s.frame(o.frame);
    const QString when =
        f ? QStringLiteral("end of frame %1 (%2)")
                .arg(f->index)
                .arg(QString::fromStdString(formatTime(t - s.timeBegin(), s.summary.timeAxis)))
          : QStringLiteral("t = %1").arg(
                QString::fromStdString(formatTime(t - s.timeBegin(), s.summary.timeAxis)));
    if (o.title)
        drawTitle(
            p, rect,
            QStringLiteral("Memory map — %1 at %2").arg(QString::fromStdString(ld.label()), when),
            reportSubtitle(
                s,
                QStringLiteral(
                    "Hilbert curve over the regions' address space: nearby addresses stay nearby")),
            th);
    const QRectF area = plotRect(View::MemMap, rect, o);
    const double side = std::min(area.width(), area.height());
    const QRectF sq(area.left() + (area.width() - side) / 2, area.top(), side, side);
    constexpr int n = 128;
    constexpr int cells = n * n;
    const double per = ld.compactSize / cells;
    std::vector<double> A(cells + 1, 0.0), R(cells + 1, 0.0);
    auto add = [&](std::vector<double>& D, double y0, double y1) {
        // Fractional coverage per cell with a difference array on cell indices.
        const double c0 = y0 / per, c1 = y1 / per;
        const int i0 = std::clamp(static_cast<int>(c0), 0, cells - 1);
        const int i1 = std::clamp(static_cast<int>(std::ceil(c1)) - 1, 0, cells - 1);
        if (i0 == i1) {
            D[static_cast<size_t>(i0)] += c1 - c0;
            D[static_cast<size_t>(i0) + 1] -= c1 - c0;
            return;
        }
        D[static_cast<size_t>(i0)] += (i0 + 1) - c0;
        D[static_cast<size_t>(i0) + 1] -= (i0 + 1) - c0;
        D[static_cast<size_t>(i0) + 1] += 1;
        D[static_cast<size_t>(i1)] -= 1;
        D[static_cast<size_t>(i1)] += c1 - i1;
        D[static_cast<size_t>(i1) + 1] -= c1 - i1;
    };
    for (const auto& r : ld.regions)
        if (r.createNs <= t && r.destroyNs > t) {
            const double y = ld.addressToY(r.address);
            add(R, y, y + static_cast<double>(r.size));
        }
    int64_t liveCount = 0;
    for (const auto& a : ld.allocs) {
        if (a.allocNs > t) break;
        if (a.freeNs <= t) continue;
        const double y = ld.addressToY(a.address);
        if (y < 0) continue;
        add(A, y, y + static_cast<double>(a.size));
        if (ld.regions.empty()) add(R, y, y + static_cast<double>(a.size));
        ++liveCount;
    }
    for (int i = 1; i <= cells; ++i) {
        A[static_cast<size_t>(i)] += A[static_cast<size_t>(i) - 1];
        R[static_cast<size_t>(i)] += R[static_cast<size_t>(i) - 1];
    }
    QImage img(n, n, QImage::Format_RGB32);
    for (int d = 0; d < cells; ++d) {
        int x, y;
        d2xy(n, d, x, y);
        const double reg = R[static_cast<size_t>(d)], al = A[static_cast<size_t>(d)];
        QColor c = reg < 0.02 && al < 0.02 ? outsideColor()
                   : al < 1e-4             ? freeColor()
                                           : occupancyColor(al / std::max(reg, al));
        img.setPixel(x, y, c.rgb());
    }
    p.save();
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(sq, img);
    p.restore();
    p.setPen(QPen(th.foreground, 1));
    p.drawRect(sq);
    const StateSample st = ld.stateAt(t);
    const double kk = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    double y = sq.top();
    const double x = sq.right() + 16 * kk;
    p.setFont(font(12 * kk));
    p.setPen(th.foreground);
    const QStringList lines = {
        QStringLiteral("one cell = %1").arg(QString::fromStdString(formatBytes(per))),
        QStringLiteral("reserved %1").arg(QString::fromStdString(formatBytes(st.reserved))),
        QStringLiteral("allocated %1").arg(QString::fromStdString(formatBytes(st.allocated))),
        QStringLiteral("free %1 in %2 fragments")
            .arg(QString::fromStdString(formatBytes(st.freeInRegions)))
            .arg(st.fragmentCount),
        QStringLiteral("largest free %1")
            .arg(QString::fromStdString(formatBytes(st.largestFragment))),
        QStringLiteral("F = %1").arg(st.fragRatio, 0, 'f', 3),
        QStringLiteral("%1 live allocations").arg(liveCount)};
    const double lh = QFontMetricsF(p.font()).height() + 4;
    for (const QString& l : lines) {
        p.drawText(QPointF(x, y + lh), l);
        y += lh;
    }
    y += lh;
    drawLegend(p, x, y, 170 * kk,
               {{occupancyColor(1.0), QStringLiteral("allocated")},
                {occupancyColor(0.3), QStringLiteral("partly allocated")},
                {freeColor(), QStringLiteral("free in region")},
                {outsideColor(), QStringLiteral("no region")}},
               th);
}

} // namespace fs::render::detail
