#include "paint_util.h"

#include "core/analysis/history.h"

#include <QFile>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QGuiApplication>
#include <QPaintEngine>
#include <QPainterPath>
#include <QPdfWriter>
#include <QSvgGenerator>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace fs::render {

using namespace detail;

const char* viewName(View v)
{
    switch (v) {
    case View::Heatmap:
        return "heatmap";
    case View::MemMap:
        return "memmap";
    case View::Histogram:
        return "histogram";
    case View::Timeline:
        return "timeline";
    }
    return "?";
}

bool parseView(const std::string& s, View& out)
{
    for (View v : {View::Heatmap, View::MemMap, View::Histogram, View::Timeline}) {
        if (s == viewName(v)) {
            out = v;
            return true;
        }
    }
    return false;
}

Theme Theme::light()
{
    return Theme{};
}

Theme Theme::darkTheme()
{
    Theme t;
    t.background = QColor(32, 33, 36);
    t.foreground = QColor(225, 225, 225);
    t.grid = QColor(60, 62, 66);
    t.muted = QColor(160, 160, 160);
    t.dark = true;
    return t;
}

QColor freeColor()
{
    return QColor(16, 30, 68);
}
QColor outsideColor()
{
    return QColor(200, 200, 200);
}
QColor pendingColor()
{
    return QColor(245, 130, 30); // orange: outside the occupancy ramp and apart from free
}
QColor collapseColor()
{
    return QColor(220, 40, 40);
}
QColor unrecordedColor()
{
    return QColor(120, 120, 130);
}

QColor clusterColor(size_t i)
{
    static const QColor shades[] = {QColor(255, 200, 80, 55), QColor(80, 200, 255, 55),
                                    QColor(160, 120, 255, 45)};
    return shades[std::min<size_t>(i, std::size(shades) - 1)];
}

QColor occupancyColor(double occ)
{
    // A viridis-like ramp (perceptually ordered, readable in grey): low occupancy purple,
    // full yellow. Zero occupancy is freeColor() so free memory stands apart.
    static const QColor stops[] = {QColor(68, 1, 84), QColor(59, 82, 139), QColor(33, 145, 140),
                                   QColor(94, 201, 98), QColor(253, 231, 37)};
    occ = std::clamp(occ, 0.0, 1.0);
    const double x = occ * 4.0;
    const int i = std::min(3, static_cast<int>(x));
    const double f = x - i;
    const QColor& a = stops[i];
    const QColor& b = stops[i + 1];
    return QColor(static_cast<int>(a.red() + (b.red() - a.red()) * f),
                  static_cast<int>(a.green() + (b.green() - a.green()) * f),
                  static_cast<int>(a.blue() + (b.blue() - a.blue()) * f));
}

QString pow2Label(int k)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    const int u = std::clamp(k / 10, 0, 5);
    return QStringLiteral("%1 %2").arg(1LL << (k - 10 * u)).arg(QLatin1String(units[u]));
}

ByteUnit byteAxisUnit(double maxBytes)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    ByteUnit u;
    for (int i = 0; maxBytes / u.div >= 2048 && i < 4; ++i) {
        u.div *= 1024;
        u.name = units[i + 1];
    }
    return u;
}

Viewport fullViewport(const Scene& s, int track)
{
    Viewport vp;
    vp.t0 = s.timeBegin();
    vp.t1 = std::max(s.timeEnd(), s.timeBegin() + 1);
    vp.y0 = 0;
    vp.y1 = track >= 0 && track < static_cast<int>(s.tracks.size())
                ? std::max(1.0, s.tracks[static_cast<size_t>(track)].compactSize())
                : 1.0;
    return vp;
}

TimeUnit timeUnitFor(int64_t span, TimeAxis axis)
{
    if (axis == TimeAxis::Ordinal) return {"event #", 1};
    if (span >= 2'000'000'000) return {"s", 1e9};
    if (span >= 2'000'000) return {"ms", 1e6};
    if (span >= 2'000) return {"µs", 1e3};
    return {"ns", 1};
}

RenderOptions resolved(const Scene& s, View v, RenderOptions o)
{
    if (o.track < 0 || o.track >= static_cast<int>(s.tracks.size())) o.track = s.defaultTrack();
    if (o.from == kNoTime) o.from = s.timeBegin();
    if (o.to == kNoTime || o.to <= o.from) o.to = std::max(s.timeEnd(), o.from + 1);
    if (o.y0 < 0 || o.y1 <= o.y0) {
        const Viewport vp = fullViewport(s, o.track);
        o.y0 = vp.y0;
        o.y1 = vp.y1;
    }
    if (o.at == kNoTime) {
        const analysis::FrameInfo* f = s.frame(o.frame);
        if (f && f->start != kNoTime) {
            o.at = f->end;
        } else if (v == View::Histogram || v == View::MemMap) {
            // The end of the last timed frame: at the session end a run has often freed
            // everything. Without timed frames: the session end.
            o.at = s.timeEnd();
            for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it)
                if (it->start != kNoTime) {
                    o.at = it->end;
                    break;
                }
        }
    }
    return o;
}

QImage heatmapImage(const analysis::HeatmapRaster& r)
{
    if (r.width <= 0 || r.height <= 0) return {};
    QImage img(r.width, r.height, QImage::Format_RGB32);
    const QRgb outside = outsideColor().rgb(), fr = freeColor().rgb(), pend = pendingColor().rgb();
    const QRgb sep = QColor(235, 235, 235).rgb();
    QRgb lut[257];
    for (int i = 0; i <= 256; ++i)
        lut[i] = occupancyColor(i / 256.0).rgb();
    for (int y = 0; y < r.height; ++y) {
        // Row 0 of the raster is the lowest address; images grow downwards, so flip.
        auto* line = reinterpret_cast<QRgb*>(img.scanLine(r.height - 1 - y));
        for (int x = 0; x < r.width; ++x) {
            const size_t k =
                static_cast<size_t>(y) * static_cast<size_t>(r.width) + static_cast<size_t>(x);
            switch (r.state[k]) {
            case analysis::CellState::Outside:
                line[x] = outside;
                break;
            case analysis::CellState::Free:
                line[x] = fr;
                break;
            case analysis::CellState::Pending:
                line[x] = pend;
                break;
            case analysis::CellState::Separator:
                line[x] = sep;
                break;
            case analysis::CellState::Allocated: {
                // Occupancy of the reserved part of the cell: a cell half outside any region
                // but fully allocated inside it reads as full.
                const double reg = std::max(static_cast<double>(r.reservedFraction[k]), 1e-9);
                const double occ = std::min(1.0, r.occupancy[k] / reg);
                line[x] = lut[std::clamp(static_cast<int>(occ * 256.0), 1, 256)];
                break;
            }
            }
        }
    }
    return img;
}

QImage heatmapRaster(const Scene& s, int track, const Viewport& vp, int w, int h)
{
    if (w <= 0 || h <= 0) return {};
    return heatmapImage(s.heatmap(track, vp.t0, vp.t1, vp.y0, vp.y1, w, h));
}

QRectF plotRect(View v, const QRectF& rect, const RenderOptions& o)
{
    const double k = std::clamp(rect.height() / 700.0, 0.8, 1.8);
    const double top = (o.title ? 52 : 10) * k;
    const double bottom = 78 * k; // axis labels, axis title and the legend row
    const double left = (v == View::Heatmap ? 150 : v == View::MemMap ? 20 : 100) * k;
    const double right = (v == View::MemMap ? 200 : 22) * k + o.legendWidth;
    return QRectF(rect.left() + left, rect.top() + top, std::max(10.0, rect.width() - left - right),
                  std::max(10.0, rect.height() - top - bottom));
}

void paint(QPainter& p, const QRectF& rect, const Scene& s, View v, const RenderOptions& o,
           const QImage* raster)
{
    const RenderOptions r = resolved(s, v, o);
    p.save();
    p.fillRect(rect, r.theme.background);
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    if (r.track < 0) {
        p.setPen(r.theme.foreground);
        p.setFont(font(16));
        p.drawText(rect, Qt::AlignCenter,
                   QStringLiteral("This session has no allocations to draw."));
        p.restore();
        return;
    }
    switch (v) {
    case View::Heatmap:
        paintHeatmap(p, rect, s, r, raster);
        break;
    case View::Timeline:
        paintTimeline(p, rect, s, r);
        break;
    case View::Histogram:
        paintHistogram(p, rect, s, r);
        break;
    case View::MemMap:
        paintMemMap(p, rect, s, r);
        break;
    }
    p.restore();
}

bool exportImage(const QString& path, QSize size, const QString& title, const Scene& s,
                 const Theme& theme, const std::function<void(QPainter&, const QRectF&)>& draw,
                 QString* error)
{
    const QString ext = QFileInfo(path).suffix().toLower();
    const QRectF rect(0, 0, size.width(), size.height());
    auto fail = [&](const QString& m) {
        if (error) *error = path + QStringLiteral(": ") + m;
        return false;
    };
    if (size.width() < 200 || size.height() < 150 || size.width() > 20000 || size.height() > 20000)
        return fail(QStringLiteral("size %1x%2 out of range (200x150 to 20000x20000)")
                        .arg(size.width())
                        .arg(size.height()));
    if (ext == QLatin1String("png")) {
        QImage img(size, QImage::Format_ARGB32_Premultiplied);
        img.fill(theme.background);
        {
            QPainter p(&img);
            draw(p, rect);
        }
        if (!img.save(path, "PNG")) return fail(QStringLiteral("cannot write PNG"));
        return true;
    }
    if (ext == QLatin1String("svg")) {
        QSvgGenerator gen;
        gen.setFileName(path);
        gen.setSize(size);
        gen.setViewBox(rect);
        gen.setTitle(QStringLiteral("fragscope %1").arg(title));
        gen.setDescription(QString::fromStdString(s.path));
        {
            QPainter p;
            if (!p.begin(&gen)) return fail(QStringLiteral("cannot write SVG"));
            draw(p, rect);
            p.end();
        }
        if (!QFileInfo(path).exists() || QFileInfo(path).size() == 0)
            return fail(QStringLiteral("cannot write SVG"));
        return true;
    }
    if (ext == QLatin1String("pdf")) {
        QPdfWriter pdf(path);
        pdf.setResolution(96);
        pdf.setPageSize(QPageSize(QSizeF(size.width() * 25.4 / 96, size.height() * 25.4 / 96),
                                  QPageSize::Millimeter));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        QPainter p;
        if (!p.begin(&pdf)) return fail(QStringLiteral("cannot write PDF"));
        draw(p, QRectF(0, 0, pdf.width(), pdf.height()));
        p.end();
        return true;
    }
    return fail(QStringLiteral("unknown image format '.%1' (use .png, .svg or .pdf)").arg(ext));
}

bool exportView(const QString& path, QSize size, const Scene& s, View v, const RenderOptions& o,
                QString* error)
{
    return exportImage(
        path, size, QLatin1String(viewName(v)), s, o.theme,
        [&](QPainter& p, const QRectF& rect) { paint(p, rect, s, v, o); }, error);
}

namespace detail {

std::vector<double> niceTicks(double lo, double hi, int n)
{
    std::vector<double> out;
    if (!(hi > lo) || n < 1) return out;
    const double raw = (hi - lo) / n;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
        step = m * mag;
        if (step >= raw) break;
    }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
        out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
    return out;
}

QString num(double v)
{
    const double a = std::fabs(v);
    if (a == 0) return QStringLiteral("0");
    if (a >= 1e5 || a < 1e-3) return QString::number(v, 'g', 3);
    return QString::number(v, 'g', 6);
}

QImage lineStamp(QPainter& p, const QPen& pen, double length, bool vertical)
{
    if (!p.paintEngine() || p.paintEngine()->type() != QPaintEngine::Raster) return {};
    const double dpr = p.device() ? std::max(1.0, p.device()->devicePixelRatioF()) : 1.0;
    const int thick = static_cast<int>(std::ceil(dpr));
    const int longSide = std::max(1, static_cast<int>(std::ceil(length * dpr)));
    QImage img(vertical ? thick : longSide, vertical ? longSide : thick,
               QImage::Format_ARGB32_Premultiplied);
    img.setDevicePixelRatio(dpr);
    img.fill(Qt::transparent);
    QPainter lp(&img);
    lp.setPen(pen);
    if (vertical)
        lp.drawLine(QPointF(0.5, 0), QPointF(0.5, length));
    else
        lp.drawLine(QPointF(0, 0.5), QPointF(length, 0.5));
    return img;
}

QImage stampLines(const QImage& stamp, const std::vector<int>& offsets, bool vertical, int across)
{
    const int thick = vertical ? stamp.width() : stamp.height();
    QImage out(vertical ? across : stamp.width(), vertical ? stamp.height() : across,
               QImage::Format_ARGB32_Premultiplied);
    out.setDevicePixelRatio(stamp.devicePixelRatio());
    out.fill(Qt::transparent);
    if (vertical) {
        for (int y = 0; y < stamp.height(); ++y) {
            const auto* src = reinterpret_cast<const QRgb*>(stamp.constScanLine(y));
            auto* dst = reinterpret_cast<QRgb*>(out.scanLine(y));
            for (int c : offsets)
                for (int k = 0; k < thick; ++k)
                    if (c + k >= 0 && c + k < across) dst[c + k] = src[k];
        }
    } else {
        const auto bytes = static_cast<size_t>(stamp.bytesPerLine());
        for (int r : offsets)
            for (int k = 0; k < thick; ++k)
                if (r + k >= 0 && r + k < across)
                    std::memcpy(out.scanLine(r + k), stamp.constScanLine(k), bytes);
    }
    return out;
}

QFont font(double px, bool bold)
{
    QFont f(QStringLiteral("DejaVu Sans"));
    f.setPixelSize(std::max(8, static_cast<int>(px)));
    f.setBold(bold);
    return f;
}

static double scaleOf(const QRectF& r)
{
    return std::clamp(r.height() / 700.0, 0.8, 1.8);
}

QString reportSubtitle(const Scene& s, const QString& extra)
{
    QString t = QFileInfo(QString::fromStdString(s.path)).fileName();
    if (s.summary.synthetic)
        t += QStringLiteral("  ·  SYNTHETIC DATA (simulated, not a measurement)");
    if (s.summary.health.endedAbruptly || s.summary.health.droppedRecords > 0)
        t += QStringLiteral("  ·  incomplete capture: figures may undercount");
    if (!extra.isEmpty()) t += QStringLiteral("  ·  ") + extra;
    return t;
}

QRectF drawTitle(QPainter& p, const QRectF& rect, const QString& title, const QString& subtitle,
                 const Theme& th)
{
    const double k = scaleOf(rect);
    p.setPen(th.foreground);
    p.setFont(font(17 * k, true));
    const QRectF t(rect.left() + 14 * k, rect.top() + 6 * k, rect.width() - 28 * k, 24 * k);
    p.drawText(t, Qt::AlignLeft | Qt::AlignVCenter, title);
    p.setFont(font(11.5 * k));
    p.setPen(th.muted);
    p.drawText(QRectF(t.left(), t.bottom(), t.width(), 18 * k), Qt::AlignLeft | Qt::AlignVCenter,
               subtitle);
    return rect.adjusted(0, 50 * k, 0, 0);
}

void drawXAxis(QPainter& p, const QRectF& plot, double lo, double hi, const QString& label,
               const Theme& th, const std::function<QString(double)>& fmt, bool labels)
{
    const double k = std::clamp(plot.height() / 560.0, 0.8, 1.8);
    const double kk = std::max(k, 0.9);
    p.setFont(font(11.5 * kk));
    const QFontMetricsF fm(p.font());
    const int n =
        std::max(2, static_cast<int>(plot.width() /
                                     (fm.horizontalAdvance(QStringLiteral("0000.000")) * 1.6)));
    p.setPen(QPen(th.foreground, 1));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    for (double v : niceTicks(lo, hi, n)) {
        const double x = plot.left() + (v - lo) / (hi - lo) * plot.width();
        p.setPen(QPen(th.foreground, 1));
        p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 5 * kk));
        if (!labels) continue;
        const QString s = fmt ? fmt(v) : num(v);
        p.drawText(QRectF(x - 60 * kk, plot.bottom() + 6 * kk, 120 * kk, 16 * kk),
                   Qt::AlignHCenter | Qt::AlignTop, s);
    }
    if (labels && !label.isEmpty()) {
        p.setFont(font(12 * kk, true));
        p.drawText(QRectF(plot.left(), plot.bottom() + 22 * kk, plot.width(), 18 * kk),
                   Qt::AlignHCenter | Qt::AlignTop, label);
    }
}

void drawYAxis(QPainter& p, const QRectF& plot, double lo, double hi, const QString& label,
               const Theme& th, const std::function<QString(double)>& fmt)
{
    const double kk = std::max(0.9, std::clamp(plot.height() / 560.0, 0.8, 1.8));
    p.setFont(font(11 * kk));
    const QFontMetricsF fm(p.font());
    const int n = std::max(2, std::min(8, static_cast<int>(plot.height() / (fm.height() * 2.2))));
    p.setPen(QPen(th.foreground, 1));
    p.drawLine(plot.topLeft(), plot.bottomLeft());
    for (double v : niceTicks(lo, hi, n)) {
        const double y = plot.bottom() - (v - lo) / (hi - lo) * plot.height();
        p.setPen(QPen(th.grid, 1));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(QPen(th.foreground, 1));
        p.drawLine(QPointF(plot.left() - 4 * kk, y), QPointF(plot.left(), y));
        p.drawText(QRectF(plot.left() - 90 * kk, y - 8 * kk, 84 * kk, 16 * kk),
                   Qt::AlignRight | Qt::AlignVCenter, fmt ? fmt(v) : num(v));
    }
    if (!label.isEmpty()) {
        p.save();
        p.setFont(font(11.5 * kk, true));
        p.translate(plot.left() - 74 * kk, plot.center().y());
        p.rotate(-90);
        p.drawText(QRectF(-plot.height() / 2, -16 * kk, plot.height(), 16 * kk), Qt::AlignCenter,
                   label);
        p.restore();
    }
}

double drawLegend(QPainter& p, double x, double y, double maxWidth,
                  const std::vector<LegendItem>& items, const Theme& th)
{
    const double kk = std::max(0.9, maxWidth / 1500.0);
    p.setFont(font(11.5 * kk));
    const QFontMetricsF fm(p.font());
    const double h = fm.height();
    double cx = x, cy = y;
    for (const auto& it : items) {
        const double w = 22 * kk + fm.horizontalAdvance(it.text) + 18 * kk;
        if (cx + w > x + maxWidth && cx > x) {
            cx = x;
            cy += h + 4;
        }
        const QRectF sw(cx, cy + h * 0.2, 16 * kk, h * 0.6);
        if (it.style == 0) {
            p.fillRect(sw, it.color);
            p.setPen(QPen(th.muted, 0.5));
            p.drawRect(sw);
        } else if (it.style == 3) {
            p.setPen(QPen(it.color, 2));
            p.setBrush(Qt::NoBrush);
            p.drawRect(sw);
        } else {
            p.setPen(QPen(it.color, 2, it.style == 2 ? Qt::DashLine : Qt::SolidLine));
            p.drawLine(QPointF(sw.left(), sw.center().y()), QPointF(sw.right(), sw.center().y()));
        }
        p.setPen(th.foreground);
        p.drawText(QPointF(cx + 22 * kk, cy + fm.ascent()), it.text);
        cx += w;
    }
    return cy + h - y;
}

QString timeAxisLabel(const Scene& s, int64_t span)
{
    const TimeUnit u = timeUnitFor(span, s.summary.timeAxis);
    if (s.summary.timeAxis == TimeAxis::Ordinal)
        return QStringLiteral("event number (ordinal: the source has no timestamps)");
    return QStringLiteral("time since start (%1)").arg(QString::fromUtf8(u.name));
}

double toAxisTime(const Scene& s, int64_t t, int64_t span)
{
    return static_cast<double>(t - s.timeBegin()) / timeUnitFor(span, s.summary.timeAxis).divisor;
}

void drawUnrecorded(QPainter& p, const QRectF& plot, const Scene& s, int64_t t0, int64_t t1,
                    const Theme& th)
{
    const auto gaps = analysis::unrecordedSpans(s.summary.windows, t0, t1);
    if (gaps.empty()) return;
    const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
    auto X = [&](int64_t t) {
        return plot.left() + static_cast<double>(t - t0) / span * plot.width();
    };
    p.save();
    p.setClipRect(plot);
    QColor fill = unrecordedColor();
    fill.setAlpha(th.dark ? 150 : 110);
    p.setFont(font(10));
    for (const auto& [b, e] : gaps) {
        const QRectF r(QPointF(X(b), plot.top()), QPointF(X(e), plot.bottom()));
        p.fillRect(r, fill);
        p.fillRect(r, QBrush(unrecordedColor().darker(130), Qt::BDiagPattern));
        if (r.width() > 70) {
            p.setPen(th.foreground);
            p.drawText(r.adjusted(2, 4, -2, 0), Qt::AlignHCenter | Qt::AlignTop,
                       QStringLiteral("not recorded"));
        }
    }
    p.restore();
}

void drawFramesAndCollapses(QPainter& p, const QRectF& plot, const Scene& s, int64_t t0, int64_t t1,
                            const Theme& th, bool numbers)
{
    const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
    auto X = [&](int64_t t) {
        return plot.left() + static_cast<double>(t - t0) / span * plot.width();
    };
    p.save();
    p.setClipRect(plot);
    QColor band = collapseColor();
    band.setAlpha(60);
    {
        // One band per run of collapses that meet on screen, drawn without antialiasing: a long
        // run's hundreds of bands, each with an antialiased edge, took 7-17 ms of every paint.
        std::vector<std::pair<double, double>> spans;
        for (const auto& c : s.collapses) {
            const analysis::FrameInfo* a = s.frame(c.firstFrame);
            const analysis::FrameInfo* b = s.frame(c.lastFrame);
            if (!a || !b || a->start == kNoTime || b->start == kNoTime || b->end < t0 ||
                a->start > t1)
                continue;
            spans.emplace_back(X(a->start), X(b->end));
        }
        std::sort(spans.begin(), spans.end());
        p.setRenderHint(QPainter::Antialiasing, false);
        p.setPen(QPen(collapseColor(), 1.5));
        for (size_t i = 0; i < spans.size();) {
            const double x0 = spans[i].first;
            double x1 = spans[i].second;
            for (++i; i < spans.size() && spans[i].first <= x1 + 1; ++i)
                x1 = std::max(x1, spans[i].second);
            p.fillRect(QRectF(QPointF(x0, plot.top()), QPointF(x1, plot.bottom())), band);
            p.drawLine(QPointF(x0, plot.top()), QPointF(x0, plot.bottom()));
        }
        p.setRenderHint(QPainter::Antialiasing, true);
    }
    // Frame numbers only where they fit: every k-th frame so labels never overlap.
    int every = 1;
    if (!s.frames.empty() && s.frames.front().start != kNoTime) {
        const double px = plot.width() *
                          static_cast<double>(s.frames.front().end - s.frames.front().start) / span;
        while (px * every < 22 && every < 100000)
            every *= 2;
    }
    // White over the heatmap's colours; grey over a plot's white background.
    QColor line =
        numbers || th.dark ? QColor(255, 255, 255, th.dark ? 90 : 150) : QColor(120, 120, 120, 110);
    p.setFont(font(10.5));
    p.setPen(QPen(line, 1, Qt::DashLine));
    // One boundary per device pixel column: thousands of frames zoomed out would otherwise
    // draw thousands of dashed lines over the same columns, on the GUI thread, every paint
    // (~1,900 full-height dashed lines took 30-50 ms of every heatmap paint of a long run).
    const double dpr = p.device() ? std::max(1.0, p.device()->devicePixelRatioF()) : 1.0;
    const QImage dash = lineStamp(p, QPen(line, 1, Qt::DashLine), plot.height(), true);
    std::vector<int> columns;                       // of the stamps, from the plot's left edge
    std::vector<std::pair<double, int64_t>> labels; // x, frame number
    int64_t lastColumn = std::numeric_limits<int64_t>::min();
    for (const auto& f : s.frames) {
        if (f.start == kNoTime || f.start < t0 || f.start > t1) continue;
        const double x = X(f.start);
        const auto column = static_cast<int64_t>(std::floor(x * dpr));
        if (column != lastColumn) {
            if (!dash.isNull()) {
                columns.push_back(static_cast<int>(std::lround((x - 0.5 - plot.left()) * dpr)));
            } else {
                p.setPen(QPen(line, 1, Qt::DashLine));
                p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
            }
            lastColumn = column;
        }
        if (numbers && f.index % every == 0) labels.emplace_back(x, f.index);
    }
    if (!columns.empty())
        p.drawImage(
            QPointF(plot.left(), plot.top()),
            stampLines(dash, columns, true, static_cast<int>(std::ceil(plot.width() * dpr)) + 1));
    // The numbers over the lines.
    const QFontMetricsF fm(p.font());
    p.setPen(Qt::white);
    for (const auto& [x, index] : labels) {
        const QString text = QString::number(index);
        p.fillRect(QRectF(x + 1, plot.top() + 2, fm.horizontalAdvance(text) + 4, 14),
                   s.collapsed(index) ? collapseColor() : QColor(0, 0, 0, 140));
        p.drawText(QRectF(x + 2, plot.top() + 2, 40, 14), Qt::AlignLeft | Qt::AlignVCenter, text);
    }
    p.restore();
}

void drawSelection(QPainter& p, const QRectF& plot, int64_t t0, int64_t t1, int64_t selFrom,
                   int64_t selTo, const Theme& th)
{
    if (selFrom == kNoTime || selTo == kNoTime || selTo < t0 || selFrom > t1) return;
    const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
    const double a =
        plot.left() + static_cast<double>(std::max(selFrom, t0) - t0) / span * plot.width();
    const double b =
        plot.left() + static_cast<double>(std::min(selTo, t1) - t0) / span * plot.width();
    p.save();
    p.setPen(QPen(th.dark ? QColor(255, 255, 255) : QColor(0, 120, 255), 2));
    p.setBrush(QColor(0, 160, 255, 40));
    p.drawRect(QRectF(QPointF(a, plot.top()), QPointF(std::max(a + 2, b), plot.bottom())));
    p.restore();
}

} // namespace detail

} // namespace fs::render
