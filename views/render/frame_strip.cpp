#include "frame_strip.h"

#include "paint_util.h"

#include "core/analysis/video_frames.h"
#include "core/analysis/video_metric_registry.h"

#include <QFileInfo>
#include <QFontMetricsF>

#include <algorithm>
#include <cmath>

namespace fs::render {

using namespace detail;

namespace {

// The metrics a panel lists: the video's, the break score first, then any other metric a rule
// reads (coherence_score from NVTX, …).
std::vector<std::string> shownMetrics(const Scene& s, const analysis::FrameInfo& f, int most = -1)
{
    std::vector<std::string> out;
    // The default video rule's score, then the registry's metrics (video_metric_registry.h).
    if (f.metrics.count("warp_error_z")) out.emplace_back("warp_error_z");
    for (const analysis::VideoMetric& m : analysis::videoMetrics())
        if (f.metrics.count(m.name)) out.emplace_back(m.name);
    for (const auto& r : s.rules)
        if (f.metrics.count(r.metric) && std::find(out.begin(), out.end(), r.metric) == out.end())
            out.push_back(r.metric);
    if (most >= 0 && out.size() > static_cast<size_t>(most)) out.resize(static_cast<size_t>(most));
    return out;
}

bool breaks(const Scene& s, const std::string& metric, double v)
{
    for (const auto& r : s.rules)
        if (r.metric == metric && r.broken(v)) return true;
    return false;
}

// The display scale of the flow overlay: one for the whole strip (so that panels compare), the
// next power of two above twice the largest mean displacement shown, 4 to 64 px.
double flowScale(const Scene& s, const std::vector<FrameStripPanel>& panels)
{
    double most = 0;
    for (const auto& p : panels)
        if (const analysis::FrameInfo* f = s.frame(p.frame))
            if (auto it = f->metrics.find("flow_l2_px"); it != f->metrics.end())
                most = std::max(most, it->second);
    double scale = 4;
    while (scale < 2 * most && scale < 64)
        scale *= 2;
    return scale;
}

QColor rampColor(double t)
{
    // Clear through yellow to red: where the picture moved, not how.
    t = std::clamp(t, 0.0, 1.0);
    return QColor::fromRgbF(1.0, 1.0 - 0.85 * t, 0.1 * (1 - t), std::min(0.8, 1.4 * t));
}

QString metricText(double v)
{
    return std::abs(v) >= 100 ? QString::number(v, 'f', 0) : QString::number(v, 'g', 3);
}

} // namespace

QImage videoThumbnail(const Scene& s, int64_t videoFrame)
{
    if (!s.video || videoFrame < 0) return {};
    const std::vector<uint8_t> jpeg = s.video->thumbnail(videoFrame);
    return QImage::fromData(jpeg.data(), static_cast<int>(jpeg.size()));
}

QImage flowOverlayImage(const Scene& s, int64_t videoFrame, QSize size, double fullScalePx)
{
    if (!s.video || videoFrame < 0) return {};
    const std::vector<uint8_t> png = s.video->flow(videoFrame);
    const QImage levels = QImage::fromData(png.data(), static_cast<int>(png.size()))
                              .convertToFormat(QImage::Format_Grayscale8)
                              .scaled(size, Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
    if (levels.isNull()) return {};
    QImage out(levels.size(), QImage::Format_ARGB32);
    for (int y = 0; y < levels.height(); ++y) {
        const uchar* in = levels.constScanLine(y);
        auto* o = reinterpret_cast<QRgb*>(out.scanLine(y));
        for (int x = 0; x < levels.width(); ++x) // stored: a quarter video pixel per level
            o[x] = rampColor(in[x] / 4.0 / fullScalePx).rgba();
    }
    return out;
}

namespace {

// The report's title above the panels and its legend below them.
double reportScale(const QRectF& rect, const FrameStripOptions& o)
{
    return o.report ? std::clamp(rect.width() / 1600.0, 0.8, 2.0) : 1.0;
}
QRectF panelsRect(const QRectF& rect, const FrameStripOptions& o)
{
    // drawTitle's height (50 px at its scale, the image's height / 700), then the legend's.
    const double title = 50 * std::clamp(rect.height() / 700.0, 0.8, 1.8);
    return o.report ? rect.adjusted(0, title, 0, -34 * reportScale(rect, o)) : rect;
}

} // namespace

std::vector<FrameStripPanel> layoutFrameStrip(const QRectF& whole, const Scene& s,
                                              const FrameStripOptions& o)
{
    const QRectF rect = panelsRect(whole, o);
    std::vector<FrameStripPanel> out;
    for (int64_t f = o.frame - o.around; f <= o.frame + o.around; ++f)
        if (s.frame(f)) {
            FrameStripPanel p;
            p.frame = f;
            p.videoFrame = s.video ? s.video->shownFrame(f) : -1;
            out.push_back(p);
        }
    if (out.empty()) return out;
    const double k = reportScale(whole, o);
    const double gap = 10 * k;
    const QFontMetricsF fm(font(11.5 * k));
    // Captions: the frame line, then one line per metric (the most any panel shows).
    size_t lines = 1;
    for (const auto& p : out)
        lines = std::max(lines, 1 + shownMetrics(s, *s.frame(p.frame), o.metricLines).size());
    const double captions = static_cast<double>(lines) * (fm.height() + 1) + 6 * k;
    const double n = static_cast<double>(out.size());
    const double w = (rect.width() - gap * (n + 1)) / n;
    const double aspect =
        s.video && s.video->video().thumbHeight > 0
            ? static_cast<double>(s.video->video().thumbWidth) / s.video->video().thumbHeight
            : 16.0 / 9.0;
    const double picH = std::max(10.0, std::min(w / aspect, rect.height() - captions - 2 * gap));
    const double picW = picH * aspect;
    for (size_t i = 0; i < out.size(); ++i) {
        const double x = rect.left() + gap + static_cast<double>(i) * (w + gap);
        out[i].panel = QRectF(x, rect.top() + gap, w, picH + captions);
        out[i].picture = QRectF(x + (w - picW) / 2, rect.top() + gap, picW, picH);
    }
    return out;
}

void paintFrameStrip(QPainter& p, const QRectF& rect, const Scene& s, const FrameStripOptions& o)
{
    const Theme& th = o.theme;
    p.save();
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::SmoothPixmapTransform, true);
    const double k = reportScale(rect, o);
    if (o.report) {
        QString extra;
        if (s.video)
            extra = QStringLiteral("%1, sha256 %2…")
                        .arg(QString::fromStdString(s.video->video().source),
                             QString::fromStdString(s.video->video().sha256.substr(0, 12)));
        drawTitle(p, rect,
                  QStringLiteral("Frames %1–%2 around frame %3")
                      .arg(o.frame - o.around)
                      .arg(o.frame + o.around)
                      .arg(o.frame),
                  reportSubtitle(s, extra), th);
    }
    const std::vector<FrameStripPanel> panels = layoutFrameStrip(rect, s, o);
    const double scale = flowScale(s, panels);
    const QFont small = font(11.5 * k), bold = font(11.5 * k, true);
    const QFontMetricsF fm(small);
    for (const FrameStripPanel& pn : panels) {
        const analysis::FrameInfo& f = *s.frame(pn.frame);
        const analysis::Collapse* c = s.collapseOf(pn.frame);
        const QImage img = videoThumbnail(s, pn.videoFrame);
        if (img.isNull()) {
            p.fillRect(pn.picture, th.grid);
            p.setPen(th.muted);
            p.setFont(small);
            p.drawText(pn.picture, Qt::AlignCenter | Qt::TextWordWrap,
                       s.video ? QStringLiteral("no video frame") : QStringLiteral("no video"));
        } else {
            p.drawImage(pn.picture, img);
            if (o.flowOverlay) {
                const QImage ov = flowOverlayImage(s, pn.videoFrame, img.size(), scale);
                if (!ov.isNull()) p.drawImage(pn.picture, ov);
            }
        }
        const bool centre = pn.frame == o.frame;
        p.setBrush(Qt::NoBrush);
        if (c) {
            p.setPen(QPen(collapseColor(), (centre ? 4 : 2.5) * k));
            p.drawRect(pn.picture.adjusted(-1.5 * k, -1.5 * k, 1.5 * k, 1.5 * k));
        } else if (centre) {
            p.setPen(QPen(th.foreground, 2 * k));
            p.drawRect(pn.picture.adjusted(-1 * k, -1 * k, 1 * k, 1 * k));
        }
        double y = pn.picture.bottom() + 4 * k;
        const QRectF line(pn.panel.left(), y, pn.panel.width(), fm.height());
        p.setFont(centre ? bold : small);
        p.setPen(c ? collapseColor() : th.foreground);
        QString head = QStringLiteral("frame %1").arg(pn.frame);
        if (pn.videoFrame >= 0 && pn.videoFrame != pn.frame)
            head += QStringLiteral(" (video %1)").arg(pn.videoFrame);
        if (c) head += QStringLiteral("  COLLAPSE");
        p.drawText(line, Qt::AlignHCenter | Qt::AlignVCenter, head);
        y += fm.height() + 1;
        p.setFont(small);
        for (const std::string& m : shownMetrics(s, f, o.metricLines)) {
            const double v = f.metrics.at(m);
            p.setPen(breaks(s, m, v) ? collapseColor() : th.muted);
            p.drawText(QRectF(pn.panel.left(), y, pn.panel.width(), fm.height()),
                       Qt::AlignHCenter | Qt::AlignVCenter,
                       QStringLiteral("%1 %2").arg(QString::fromStdString(m), metricText(v)));
            y += fm.height() + 1;
        }
    }
    if (panels.empty()) {
        p.setPen(th.muted);
        p.setFont(small);
        p.drawText(panelsRect(rect, o), Qt::AlignCenter,
                   QStringLiteral("the session has no frame %1").arg(o.frame));
    }
    if (o.report) {
        std::vector<LegendItem> items = {
            {collapseColor(), QStringLiteral("collapse (frame breaks a rule; value in red)"), 3},
            {th.foreground, QStringLiteral("frame %1").arg(o.frame), 3}};
        if (o.flowOverlay) {
            items.push_back({rampColor(0.5),
                             QStringLiteral("flow magnitude (red: %1 px or more)").arg(scale), 0});
        }
        drawLegend(p, rect.left() + 14 * k, rect.bottom() - 28 * k, rect.width() - 28 * k, items,
                   th);
    }
    p.restore();
}

std::vector<QString> frameStripMetrics(const Scene& s, int64_t frame)
{
    std::vector<QString> out;
    if (const analysis::FrameInfo* f = s.frame(frame))
        for (const std::string& m : shownMetrics(s, *f))
            out.push_back(QStringLiteral("%1 %2").arg(QString::fromStdString(m),
                                                      metricText(f->metrics.at(m))));
    return out;
}

QSize frameStripSize(const Scene& s, const FrameStripOptions& o)
{
    const int n = 2 * o.around + 1;
    const int tw = s.video ? std::max(160, s.video->video().thumbWidth) : 320;
    const int th = s.video ? std::max(90, s.video->video().thumbHeight) : 180;
    size_t lines = 1;
    for (int64_t f = o.frame - o.around; f <= o.frame + o.around; ++f)
        if (const analysis::FrameInfo* fi = s.frame(f))
            lines = std::max(lines, 1 + shownMetrics(s, *fi, o.metricLines).size());
    const QFontMetricsF fm(font(11.5));
    const int captions =
        static_cast<int>(std::ceil(static_cast<double>(lines) * (fm.height() + 1)));
    const int w = std::clamp(n * (tw + 10) + 10, 640, 20000);
    const int h = th + captions + 26 + (o.report ? 50 + 34 : 0);
    return {w, std::clamp(h, 150, 20000)};
}

bool exportFrameStrip(const QString& path, QSize size, const Scene& s, const FrameStripOptions& o,
                      QString* error)
{
    return exportImage(
        path, size, QStringLiteral("frames"), s, o.theme,
        [&](QPainter& p, const QRectF& rect) {
            p.fillRect(rect, o.theme.background);
            paintFrameStrip(p, rect, s, o);
        },
        error);
}

} // namespace fs::render
