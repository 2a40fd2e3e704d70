// The timelines (shared time axis) and the fragment-cluster histogram.
#include "paint_util.h"

#include "core/analysis/metrics.h"

#include <QFileInfo>
#include <QFontMetricsF>
#include <QPainterPath>

#include <algorithm>
#include <cmath>

namespace fs::render::detail {

namespace {

struct Line
{
    QColor color;
    QString name;
    std::vector<std::pair<int64_t, double>> pts;
    bool dashed = false;
    bool step = false;
};

void drawPanel(QPainter& p, const QRectF& plot, const Scene& s, const RenderOptions& o,
               const QString& ylabel, const std::vector<Line>& lines, double ylo, double yhi,
               const std::function<QString(double)>& fmt,
               const std::vector<std::pair<double, QString>>& thresholds, bool lastPanel)
{
    const Theme& th = o.theme;
    const int64_t span = std::max<int64_t>(1, o.to - o.from);
    if (!(yhi > ylo)) yhi = ylo + 1;
    drawYAxis(p, plot, ylo, yhi, ylabel, th, fmt);
    drawFramesAndCollapses(p, plot, s, o.from, o.to, th, false);
    drawSelection(p, plot, o.from, o.to, o.selFrom, o.selTo, th);
    auto X = [&](int64_t t) {
        return plot.left() +
               static_cast<double>(t - o.from) / static_cast<double>(span) * plot.width();
    };
    auto Y = [&](double v) { return plot.bottom() - (v - ylo) / (yhi - ylo) * plot.height(); };
    p.save();
    p.setClipRect(plot.adjusted(-1, -1, 1, 1));
    for (const auto& [v, name] : thresholds) {
        p.setPen(QPen(collapseColor(), 1.2, Qt::DashLine));
        p.drawLine(QPointF(plot.left(), Y(v)), QPointF(plot.right(), Y(v)));
        p.setFont(font(10.5));
        // Label above the line, or below it when the line is at the top of the panel.
        const double ly = Y(v) - plot.top() < 18 ? Y(v) + 2 : Y(v) - 15;
        p.drawText(QRectF(plot.right() - 320, ly, 316, 14), Qt::AlignRight | Qt::AlignVCenter,
                   name);
    }
    for (const auto& l : lines) {
        QPainterPath path;
        bool first = true;
        double lastY = 0;
        for (const auto& [t, v] : l.pts) {
            if (t < o.from - span / 50 || t > o.to + span / 50) continue;
            const QPointF pt(X(t), Y(v));
            if (first)
                path.moveTo(pt);
            else if (l.step) {
                path.lineTo(QPointF(pt.x(), lastY));
                path.lineTo(pt);
            } else
                path.lineTo(pt);
            lastY = pt.y();
            first = false;
        }
        p.setPen(QPen(l.color, 1.8, l.dashed ? Qt::DashLine : Qt::SolidLine));
        p.setBrush(Qt::NoBrush);
        p.drawPath(path);
        if (l.step) {
            p.setBrush(l.color);
            for (const auto& [t, v] : l.pts)
                if (t >= o.from && t <= o.to) p.drawEllipse(QPointF(X(t), Y(v)), 2.5, 2.5);
        }
    }
    p.restore();
    p.setPen(QPen(th.foreground, 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(plot);
    drawXAxis(p, plot, toAxisTime(s, o.from, span), toAxisTime(s, o.to, span),
              timeAxisLabel(s, span), th, {}, lastPanel);
    // Panel legend, top-left inside the panel.
    std::vector<LegendItem> items;
    for (const auto& l : lines)
        items.push_back({l.color, l.name, l.dashed ? 2 : 1});
    QFont f = font(10.5);
    p.setFont(f);
    double w = 10;
    for (const auto& it : items)
        w += 40 + QFontMetricsF(f).horizontalAdvance(it.text);
    QColor bg = th.background;
    bg.setAlpha(210);
    p.fillRect(QRectF(plot.left() + 44, plot.top() + 3, std::min(w, plot.width() - 50), 18), bg);
    drawLegend(p, plot.left() + 48, plot.top() + 4, plot.width() - 56, items, th);
}

} // namespace

void paintTimeline(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o)
{
    const TrackEntry& ld = s.tracks[static_cast<size_t>(o.track)];
    const Theme& th = o.theme;
    if (o.title)
        drawTitle(
            p, rect,
            QStringLiteral("Allocator timelines — %1").arg(QString::fromStdString(ld.label())),
            reportSubtitle(s, QStringLiteral("%1 frames, %2 collapse(s)")
                                  .arg(s.frames.size())
                                  .arg(s.collapses.size())),
            th);
    const QRectF area = plotRect(View::Timeline, rect, o);
    // Metrics with a collapse rule come first: they are what the bands are made of.
    std::vector<std::string> metrics;
    for (const auto& r : s.rules)
        if (std::find(s.metricNames.begin(), s.metricNames.end(), r.metric) !=
                s.metricNames.end() &&
            std::find(metrics.begin(), metrics.end(), r.metric) == metrics.end())
            metrics.push_back(r.metric);
    for (const auto& m : s.metricNames)
        if (metrics.size() < 2 && std::find(metrics.begin(), metrics.end(), m) == metrics.end())
            metrics.push_back(m);
    if (metrics.size() > 2) metrics.resize(2);
    const int panels = 3 + static_cast<int>(metrics.size());
    const double gap = 14;
    const double ph = (area.height() - gap * (panels - 1)) / panels;
    auto panelRect = [&](int i) {
        return QRectF(area.left(), area.top() + i * (ph + gap), area.width(), ph);
    };

    std::vector<std::pair<int64_t, double>> res, alc, fre, fr, fe, ee;
    double maxBytes = 1;
    if (ld.timeline) {
        const analysis::Timeline& tl = *ld.timeline;
        for (size_t i = 0; i < tl.time.size(); ++i) {
            const int64_t t = tl.time[i];
            res.emplace_back(t, tl.reserved[i]);
            alc.emplace_back(t, tl.allocated[i]);
            fre.emplace_back(t, tl.freeInRegions[i]);
            fr.emplace_back(t, tl.fragmentationRatio[i]);
            fe.emplace_back(t, tl.fragmentEntropy[i]);
            ee.emplace_back(t, tl.eventEntropy[i]);
            if (t >= o.from && t <= o.to)
                maxBytes = std::max({maxBytes, tl.reserved[i], tl.allocated[i]});
        }
    }
    const ByteUnit unit = byteAxisUnit(maxBytes);
    for (auto* v : {&res, &alc, &fre})
        for (auto& pt : *v)
            pt.second /= unit.div;
    const bool last0 = panels == 1;
    drawPanel(p, panelRect(0), s, o, QStringLiteral("memory (%1)").arg(QLatin1String(unit.name)),
              {{QColor(90, 90, 90), QStringLiteral("reserved"), res},
               {QColor(31, 119, 180), QStringLiteral("allocated"), alc},
               {QColor(44, 160, 44), QStringLiteral("free in regions"), fre, true}},
              0, maxBytes / unit.div * 1.08, {}, {}, last0);
    drawPanel(p, panelRect(1), s, o, QStringLiteral("fragmentation F"),
              {{QColor(214, 39, 40), QStringLiteral("F = 1 − largest free / total free"), fr}}, 0,
              1.0, {},
              {{analysis::kReferenceFragmentationRatio,
                QStringLiteral("F = %1: largest free < %2 % of free")
                    .arg(analysis::kReferenceFragmentationRatio)
                    .arg(std::lround(100 * (1 - analysis::kReferenceFragmentationRatio)))}},
              false);
    drawPanel(
        p, panelRect(2), s, o, QStringLiteral("entropy (bits)"),
        {{QColor(148, 103, 189), QStringLiteral("fragment entropy"), fe},
         {QColor(255, 127, 14),
          QStringLiteral("event-size entropy (%1 s window)")
              .arg(ld.timeline ? static_cast<double>(ld.timeline->entropyWindowNs) / 1e9 : 300.0),
          ee, true}},
        0, analysis::maxSizeClassEntropyBits() * 1.04, {},
        {{analysis::maxSizeClassEntropyBits(),
          QStringLiteral("max log2 %1 = %2")
              .arg(analysis::kSizeClasses)
              .arg(analysis::maxSizeClassEntropyBits(), 0, 'f', 2)}},
        panels == 3);
    const bool anyTimed = s.anyTimedFrame();
    for (size_t m = 0; m < metrics.size(); ++m) {
        std::vector<std::pair<int64_t, double>> pts;
        double lo = 1e300, hi = -1e300;
        for (size_t i = 0; i < s.frames.size(); ++i) {
            const auto& f = s.frames[i];
            auto it = f.metrics.find(metrics[m]);
            if (it == f.metrics.end()) continue;
            const int64_t x = s.frameX(i);
            if (x == kNoTime) continue;
            pts.emplace_back(x, it->second);
            lo = std::min(lo, it->second);
            hi = std::max(hi, it->second);
        }
        std::vector<std::pair<double, QString>> thr;
        for (const auto& r : s.rules)
            if (r.metric == metrics[m]) {
                thr.emplace_back(r.threshold,
                                 QStringLiteral("collapse when %1 %2")
                                     .arg(r.compare == analysis::Compare::Less ? "<" : ">")
                                     .arg(r.threshold));
                lo = std::min(lo, r.threshold);
                hi = std::max(hi, r.threshold);
            }
        if (pts.empty()) lo = 0, hi = 1;
        const double pad = (hi - lo) * 0.08 + 1e-9;
        drawPanel(p, panelRect(3 + static_cast<int>(m)), s, o, QString::fromStdString(metrics[m]),
                  {{QColor(23, 190, 207),
                    anyTimed || s.frames.empty()
                        ? QStringLiteral("%1 per frame").arg(QString::fromStdString(metrics[m]))
                        : QStringLiteral("%1 per frame (no frame has a time range: placed by "
                                         "index)")
                              .arg(QString::fromStdString(metrics[m])),
                    pts, false, true}},
                  std::min(0.0, lo - pad), hi + pad, {}, thr, m + 1 == metrics.size());
    }
    const double kk = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    drawLegend(
        p, area.left(), area.bottom() + 46 * kk, area.width(),
        {{collapseColor(),
          QStringLiteral("collapsed frames (collapse rules: settings file, docs/settings.md)")},
         {th.muted, QStringLiteral("frame boundary"), 2}},
        th);
}

void paintHistogram(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o)
{
    const TrackEntry& ld = s.tracks[static_cast<size_t>(o.track)];
    const Theme& th = o.theme;
    const analysis::FrameInfo* f = s.frame(o.frame);
    if (f && f->start == kNoTime) f = nullptr;
    const analysis::FrameInfo* prev = f ? s.frame(f->index - 1) : nullptr;
    if (prev && prev->start == kNoTime) prev = nullptr;
    // The engine's log2 bins [2^k, 2^(k+1)) at the instant.
    struct HistBin
    {
        int log2lo = 0;
        int64_t count = 0;
    };
    auto bins = [&](int64_t t) {
        std::vector<HistBin> out;
        for (const auto& b : s.stateAt(o.track, t).histogram.log2)
            out.push_back(
                {static_cast<int>(std::lround(std::log2(static_cast<double>(b.lo)))), b.count});
        return out;
    };
    const std::vector<HistBin> cur = bins(o.at);
    std::vector<HistBin> before;
    if (o.compare && prev) before = bins(prev->end);
    const QString when = f ? QStringLiteral("end of frame %1").arg(f->index)
                           : QStringLiteral("t = %1").arg(QString::fromStdString(
                                 formatTime(o.at - s.timeBegin(), s.summary.timeAxis)));
    int64_t n = 0;
    for (const auto& b : cur)
        n += b.count;
    if (o.title)
        drawTitle(p, rect,
                  QStringLiteral("Free-fragment histogram — %1 at %2")
                      .arg(QString::fromStdString(ld.label()), when),
                  reportSubtitle(s, QStringLiteral("%1 free fragments").arg(n)), th);
    const QRectF plot = plotRect(View::Histogram, rect, o);
    int klo = 12, khi = 20; // at least 4 KiB .. 1 MiB so a report reads the same every time
    int64_t maxCount = 1;
    for (const std::vector<HistBin>* v :
         std::initializer_list<const std::vector<HistBin>*>{&cur, &before})
        for (const auto& b : *v) {
            klo = std::min(klo, b.log2lo);
            khi = std::max(khi, b.log2lo);
            maxCount = std::max(maxCount, b.count);
        }
    const int nb = khi - klo + 1;
    const double bw = plot.width() / nb;
    const double yhi = static_cast<double>(maxCount) * 1.12;
    auto Y = [&](double v) { return plot.bottom() - v / yhi * plot.height(); };
    // The cluster ranges (core's analysis::kClusterRanges) as shaded bands behind the bars.
    drawYAxis(p, plot, 0, yhi, QStringLiteral("free fragments (count)"), th, {});
    QStringList clusterNames;
    for (size_t i = 0; i < analysis::kClusterRanges.size(); ++i) {
        const analysis::ClusterRange& c = analysis::kClusterRanges[i];
        clusterNames << QString::fromUtf8(c.label);
        const int k0 = analysis::clusterFirstBin(c);
        const int k1 = c.hi ? analysis::clusterLastBin(c) : khi;
        if (k1 < klo || k0 > khi) continue;
        const double x0 = plot.left() + (std::max(k0, klo) - klo) * bw;
        const double x1 = plot.left() + (std::min(k1, khi) - klo + 1) * bw;
        p.fillRect(QRectF(QPointF(x0, plot.top()), QPointF(x1, plot.bottom())), clusterColor(i));
        p.setPen(th.muted);
        p.setFont(font(10.5));
        p.drawText(QRectF(x0 + 3, plot.top() + 3, std::max(x1 - x0 - 6, 90.0), 14),
                   Qt::AlignLeft | Qt::AlignVCenter, clusterNames.back());
    }
    const QColor curC(31, 119, 180), prevC(255, 127, 14);
    for (const auto& b : cur) {
        const double x = plot.left() + (b.log2lo - klo) * bw;
        p.fillRect(QRectF(QPointF(x + bw * 0.15, Y(static_cast<double>(b.count))),
                          QPointF(x + bw * 0.85, plot.bottom())),
                   curC);
    }
    for (const auto& b : before) {
        const double x = plot.left() + (b.log2lo - klo) * bw;
        p.setPen(QPen(prevC, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(QPointF(x + bw * 0.1, Y(static_cast<double>(b.count))),
                          QPointF(x + bw * 0.9, plot.bottom())));
    }
    // Count labels on bars where they fit.
    p.setFont(font(10.5));
    p.setPen(th.foreground);
    for (const auto& b : cur) {
        const double x = plot.left() + (b.log2lo - klo) * bw;
        p.drawText(QRectF(x, Y(static_cast<double>(b.count)) - 16, bw, 14), Qt::AlignCenter,
                   QString::number(b.count));
    }
    p.setPen(QPen(th.foreground, 1));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    const double kk = std::max(0.9, std::clamp(plot.height() / 560.0, 0.8, 1.8));
    p.setFont(font(11 * kk));
    const int every = bw < 46 * kk ? 2 : 1;
    for (int k = klo; k <= khi; ++k) {
        if ((k - klo) % every) continue;
        const double x = plot.left() + (k - klo) * bw;
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 5));
        p.drawText(QRectF(x - 40 * kk, plot.bottom() + 6 * kk, 80 * kk, 16 * kk), Qt::AlignCenter,
                   pow2Label(k));
    }
    p.setFont(font(12 * kk, true));
    p.drawText(
        QRectF(plot.left(), plot.bottom() + 22 * kk, plot.width(), 18 * kk), Qt::AlignCenter,
        QStringLiteral("fragment size (log2 bins: [2^k, 2^(k+1)) bytes, labelled by lower bound)"));
    std::vector<LegendItem> items = {
        {curC, f ? QStringLiteral("frame %1 (end)").arg(f->index) : when}};
    items.push_back({QColor(200, 170, 255), QStringLiteral("shaded: clusters ") +
                                                clusterNames.join(QStringLiteral(", "))});
    if (!before.empty())
        items.push_back(
            {prevC, QStringLiteral("frame %1 (end), for comparison").arg(prev->index), 3});
    const double k2 = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    drawLegend(p, plot.left(), plot.bottom() + 46 * k2, plot.width(), items, th);
}

} // namespace fs::render::detail
