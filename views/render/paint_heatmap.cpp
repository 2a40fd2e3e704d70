// The VA heatmap and the memory map: address space pictures.
#include "paint_util.h"

#include <QFileInfo>
#include <QFontMetricsF>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace fs::render::detail {

void paintHeatmap(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o,
                  const QImage* raster)
{
    const TrackEntry& ld = s.tracks[static_cast<size_t>(o.track)];
    const Theme& th = o.theme;
    const int64_t span = o.to - o.from;
    if (o.title)
        drawTitle(
            p, rect, QStringLiteral("VA heatmap — %1").arg(QString::fromStdString(ld.label())),
            reportSubtitle(
                s,
                QStringLiteral("%1 allocations, %2 regions").arg(ld.allocations).arg(ld.regions)),
            th);
    const QRectF plot = plotRect(View::Heatmap, rect, o);
    const Viewport vp{o.from, o.to, o.y0, o.y1};
    const QSize px(static_cast<int>(plot.width()), static_cast<int>(plot.height()));
    if (raster && !raster->isNull()) {
        p.drawImage(plot, *raster);
    } else {
        const QImage img = heatmapRaster(s, o.track, vp, px.width(), px.height());
        p.drawImage(plot, img);
    }
    const double yspan = std::max(1e-9, o.y1 - o.y0);
    auto Y = [&](double y) { return plot.bottom() - (y - o.y0) / yspan * plot.height(); };
    // Region separators: the collapsed holes between reserved ranges.
    p.save();
    p.setClipRect(plot);
    const QPen separatorPen(th.dark ? QColor(255, 255, 255, 160) : QColor(255, 255, 255, 200), 1,
                            Qt::DotLine);
    p.setPen(separatorPen);
    {
        // At most one separator per device pixel row, copied from one stroked line on a raster
        // device (a long run's tens of thousands of regions would stroke as many dotted lines).
        const double dpr = p.device() ? std::max(1.0, p.device()->devicePixelRatioF()) : 1.0;
        const QImage dots = lineStamp(p, separatorPen, plot.width(), false);
        std::vector<int> rows; // of the stamps, from the plot's top edge
        int64_t lastRow = std::numeric_limits<int64_t>::min();
        for (const auto& [sb, se] : ld.layout.separators) {
            const double y = Y((static_cast<double>(sb) + static_cast<double>(se)) / 2);
            const auto row = static_cast<int64_t>(std::floor(y * dpr));
            if (y < plot.top() || y > plot.bottom() || row == lastRow) continue;
            lastRow = row;
            if (!dots.isNull())
                rows.push_back(static_cast<int>(std::lround((y - 0.5 - plot.top()) * dpr)));
            else
                p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        }
        if (!rows.empty())
            p.drawImage(QPointF(plot.left(), plot.top()),
                        stampLines(dots, rows, false,
                                   static_cast<int>(std::ceil(plot.height() * dpr)) + 1));
    }
    // The selected allocation, outlined.
    if (o.selAlloc >= 0) {
        if (const auto a = s.allocation(o.selAlloc);
            a && a->device == ld.device && a->level == ld.level) {
            const int64_t freeNs = a->freeNs == analysis::kAlive ? o.to : a->freeNs;
            const double x0 = plot.left() + static_cast<double>(a->allocNs - o.from) /
                                                static_cast<double>(span) * plot.width();
            const double x1 = plot.left() + static_cast<double>(freeNs - o.from) /
                                                static_cast<double>(span) * plot.width();
            const double ya = ld.addressToY(a->address);
            const QRectF r(QPointF(x0, Y(ya + static_cast<double>(a->size))),
                           QPointF(std::max(x0 + 3, x1), Y(ya)));
            p.setPen(QPen(QColor(255, 60, 200), 2));
            p.setBrush(Qt::NoBrush);
            p.drawRect(r.adjusted(-2, -2, 2, 2));
        }
    }
    if (o.marker != kNoTime && o.marker >= o.from && o.marker <= o.to) {
        const double x = plot.left() + static_cast<double>(o.marker - o.from) /
                                           static_cast<double>(span) * plot.width();
        p.setPen(QPen(QColor(255, 60, 200), 2));
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    }
    p.restore();
    drawUnrecorded(p, plot, s, o.from, o.to, th);
    drawFramesAndCollapses(p, plot, s, o.from, o.to, th, true);
    drawSelection(p, plot, o.from, o.to, o.selFrom, o.selTo, th);
    const int64_t unitSpan = o.unitSpan > 0 ? o.unitSpan : span;
    drawXAxis(p, plot, toAxisTime(s, o.from, unitSpan), toAxisTime(s, o.to, unitSpan),
              timeAxisLabel(s, unitSpan), th);
    {
        // Address ticks: region starts (the natural landmarks), thinned so labels never overlap;
        // nice offsets inside a region when few region starts are in view.
        const double kk = std::max(0.9, std::clamp(plot.height() / 560.0, 0.8, 1.8));
        p.setFont(font(11 * kk));
        const double minGap = QFontMetricsF(p.font()).height() * 1.8;
        std::vector<double> starts;
        for (const auto& r : ld.layout.ranges) {
            const auto y = static_cast<double>(r.compactBegin);
            if (y >= o.y0 && y <= o.y1) starts.push_back(y);
        }
        p.setPen(QPen(th.foreground, 1));
        p.drawLine(plot.topLeft(), plot.bottomLeft());
        // Region starts first, then nice offsets wherever they leave room: a run whose regions
        // crowd one end of the axis (a what-if's replay above the recorded addresses) is
        // labelled over its whole height, as the run beside it is.
        std::vector<double> placed;
        // A nice offset's address is rounded down to a power of two worth about a quarter of
        // the labels' spacing, so that it reads as a round address (0x7f0060000000).
        const double bytesPerGap = (o.y1 - o.y0) / std::max(1.0, plot.height()) * minGap;
        const uint64_t align = std::bit_floor(
            std::max<uint64_t>(512, static_cast<uint64_t>(std::max(0.0, bytesPerGap / 4))));
        auto place = [&](double v, bool round) {
            uint64_t a = 0;
            if (!ld.yToAddress(v, a)) return;
            if (round) {
                a &= ~(align - 1);
                v = ld.addressToY(a);
                if (v < 0) return; // rounded into a gap between regions
            }
            const double y = Y(v);
            if (y < plot.top() - 1 || y > plot.bottom() + 1) return;
            for (double q : placed)
                if (std::fabs(q - y) < minGap) return;
            placed.push_back(y);
            p.drawLine(QPointF(plot.left() - 5 * kk, y), QPointF(plot.left(), y));
            p.drawText(QRectF(plot.left() - 150 * kk, y - 8 * kk, 143 * kk, 16 * kk),
                       Qt::AlignRight | Qt::AlignVCenter, QString::fromStdString(formatAddress(a)));
        };
        for (double v : starts)
            place(v, false);
        for (double v :
             niceTicks(o.y0, o.y1, std::max(2, static_cast<int>(plot.height() / minGap))))
            place(v, true);
    }
    {
        // The address axis title, rotated, at the far left.
        const double kk = std::max(0.9, std::clamp(plot.height() / 560.0, 0.8, 1.8));
        p.save();
        p.setPen(th.foreground);
        p.setFont(font(11.5 * kk, true));
        // The longest wording that fits the plot's height: a short heatmap (the compare window's)
        // must not cut its axis title.
        const QFontMetricsF fm(p.font());
        QString title;
        for (const QString& t :
             {QStringLiteral("address (hex; gaps between regions collapsed, dotted)"),
              QStringLiteral("address (hex; gaps collapsed, dotted)"),
              QStringLiteral("address (hex)"), QStringLiteral("address")}) {
            title = t;
            if (fm.horizontalAdvance(t) <= plot.height()) break;
        }
        p.translate(rect.left() + 12 * kk, plot.center().y());
        p.rotate(-90);
        p.drawText(QRectF(-plot.height() / 2, -9 * kk, plot.height(), 18 * kk), Qt::AlignCenter,
                   title);
        p.restore();
    }
    std::vector<LegendItem> items = {
        {occupancyColor(0.15), QStringLiteral("low occupancy")},
        {occupancyColor(0.6), QStringLiteral("partly allocated")},
        {occupancyColor(1.0), QStringLiteral("fully allocated")},
        {freeColor(), QStringLiteral("free inside a region")},
        {pendingColor(), QStringLiteral("pending free (other stream)")},
        {outsideColor(), QStringLiteral("outside any region")},
        {collapseColor(), QStringLiteral("collapsed frames"), 0},
        {th.muted, QStringLiteral("frame boundary (numbered)"), 2}};
    if (!s.summary.windows.empty())
        items.push_back({unrecordedColor(), QStringLiteral("not recorded (flight recording)")});
    if (!o.occupancyLegend) // the blocks' colours are a grouping's (the widget draws its legend)
        items.erase(items.begin(), items.begin() + 3);
    const double kk = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    drawLegend(p, plot.left(), plot.bottom() + 46 * kk, plot.width(), items, th);
}

void paintMemMap(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o)
{
    const TrackEntry& ld = s.tracks[static_cast<size_t>(o.track)];
    const Theme& th = o.theme;
    const int64_t t = o.at;
    const analysis::FrameInfo* f = s.frame(o.frame);
    if (f && f->start == kNoTime) f = nullptr;
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
    // The engine's memory map: the compacted address space along a Hilbert curve, 128 x 128.
    const analysis::MemmapRaster mm = o.memmap ? *o.memmap : s.memmap(o.track, t, 7);
    const int n = std::max(1, mm.side);
    QImage img(n, n, QImage::Format_RGB32);
    img.fill(outsideColor());
    for (int y = 0; y < mm.side; ++y)
        for (int x = 0; x < mm.side; ++x) {
            const size_t k =
                static_cast<size_t>(y) * static_cast<size_t>(n) + static_cast<size_t>(x);
            const auto st = mm.state[k];
            const QColor c = st == analysis::CellState::Allocated ? occupancyColor(mm.occupancy[k])
                             : st == analysis::CellState::Free    ? freeColor()
                             : st == analysis::CellState::Pending ? pendingColor()
                             : st == analysis::CellState::Separator ? QColor(235, 235, 235)
                                                                    : outsideColor();
            img.setPixel(x, y, c.rgb());
        }
    p.save();
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(sq, img);
    p.restore();
    p.setPen(QPen(th.foreground, 1));
    p.drawRect(sq);
    const analysis::State st = o.state ? *o.state : s.stateAt(o.track, t);
    const double kk = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    double y = sq.top();
    const double x = sq.right() + 16 * kk;
    p.setFont(font(12 * kk));
    p.setPen(th.foreground);
    QStringList lines = {
        QStringLiteral("one cell = %1")
            .arg(QString::fromStdString(formatBytes(static_cast<double>(mm.bytesPerCell)))),
        QStringLiteral("reserved %1")
            .arg(QString::fromStdString(formatBytes(static_cast<double>(st.reservedBytes)))),
        QStringLiteral("allocated %1")
            .arg(QString::fromStdString(formatBytes(static_cast<double>(st.allocatedBytes)))),
        QStringLiteral("free %1 in %2 fragments")
            .arg(QString::fromStdString(formatBytes(static_cast<double>(st.freeBytes))))
            .arg(st.fragmentCount),
        QStringLiteral("largest free %1")
            .arg(QString::fromStdString(
                formatBytes(static_cast<double>(st.largestFreeFragmentBytes)))),
        QStringLiteral("F = %1").arg(st.fragmentationRatio, 0, 'f', 3),
        QStringLiteral("fragment entropy %1 bits").arg(st.fragmentEntropyBits, 0, 'f', 3),
        QStringLiteral("%1 live allocations").arg(st.liveAllocations)};
    if (st.pendingFreeBlocks > 0) { // neither allocated nor free (docs/analysis.md)
        lines.insert(4, QStringLiteral("pending free %1 in %2 blocks")
                            .arg(QString::fromStdString(
                                formatBytes(static_cast<double>(st.pendingFreeBytes))))
                            .arg(st.pendingFreeBlocks));
        if (st.fragmentationRatioOncePendingComplete != st.fragmentationRatio)
            lines.insert(7, QStringLiteral("F once pending complete = %1")
                                .arg(st.fragmentationRatioOncePendingComplete, 0, 'f', 3));
    }
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
                {pendingColor(), QStringLiteral("pending free")},
                {outsideColor(), QStringLiteral("no region")}},
               th);
}

} // namespace fs::render::detail

namespace fs::render {

void paintOomMarks(QPainter& p, const QRectF& plot, const std::vector<double>& xs)
{
    if (xs.empty()) return;
    const double dpr = p.device() ? std::max(1.0, p.device()->devicePixelRatioF()) : 1.0;
    const QPen pen(QColor(220, 30, 30, 150), 1, Qt::DashLine);
    const QImage dash = detail::lineStamp(p, pen, plot.height(), true);
    std::vector<double> sorted = xs;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> columns; // device pixels from the plot's left edge, each once
    std::vector<double> shown;
    for (double x : sorted) {
        if (x < plot.left() || x > plot.right()) continue;
        const int c = static_cast<int>(std::lround((x - 0.5 - plot.left()) * dpr));
        if (!columns.empty() && columns.back() == c) continue;
        columns.push_back(c);
        shown.push_back(x);
    }
    p.save();
    if (!dash.isNull()) { // a copy per line: few lines, and a plot-wide image costs more to blend
        for (int c : columns)
            p.drawImage(QPointF(plot.left() + c / dpr, plot.top()), dash);
    } else {
        p.setPen(pen);
        for (double x : shown)
            p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    }
    p.setPen(Qt::NoPen);
    p.setBrush(QColor(220, 30, 30));
    for (double x : shown) {
        const QPointF tri[] = {
            {x, plot.bottom() + 1}, {x - 5, plot.bottom() + 9}, {x + 5, plot.bottom() + 9}};
        p.drawPolygon(tri, 3);
    }
    p.restore();
}

} // namespace fs::render
