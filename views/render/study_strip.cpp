#include "study_strip.h"

#include "scene.h"

#include <QFontMetricsF>
#include <QImage>
#include <QPainter>

#include <algorithm>
#include <cmath>

namespace fs::render {

namespace {

constexpr double kPad = 8;
constexpr int kCaptionLines = 3;

struct Cell
{
    const study::Run* run = nullptr;
    QImage image; // null when the run has no thumbnail of the frame
};

std::vector<Cell> cells(const study::Study& s, const QString& folder, int64_t frame)
{
    std::vector<Cell> out;
    for (const study::Arm& a : s.arms)
        for (const study::Run& r : a.runs) {
            Cell c;
            c.run = &r;
            if (!r.thumbnails.empty())
                c.image.load(QStringLiteral("%1/%2/%3.jpg")
                                 .arg(folder, QString::fromStdString(r.thumbnails))
                                 .arg(frame, 4, 10, QChar('0')));
            out.push_back(std::move(c));
        }
    return out;
}

// The size a thumbnail is drawn at: small frames enlarged (to about 160 px), none over 320 px.
QSizeF shownSize(const std::vector<Cell>& cs)
{
    QSize t(160, 120);
    for (const Cell& c : cs)
        if (!c.image.isNull()) {
            t = c.image.size();
            break;
        }
    const double scale = std::clamp(160.0 / std::max(1, t.width()), 1.0, 8.0);
    const double fit = std::min(1.0, 320.0 / std::max(t.width() * scale, 1.0));
    return QSizeF(std::floor(t.width() * scale * fit), std::floor(t.height() * scale * fit));
}

QString distanceLine(double psnrDb, double ssim)
{
    return QStringLiteral("PSNR %1%2, SSIM %3")
        .arg(QString::fromStdString(study::psnrText(psnrDb)))
        .arg(std::isinf(psnrDb) ? QString() : QStringLiteral(" dB"))
        .arg(ssim, 0, 'f', 3);
}

std::vector<QString> caption(const study::Study& s, const study::Run& r, int64_t frame,
                             QColor& border)
{
    std::vector<QString> lines{
        QStringLiteral("%1  frame %2").arg(QString::fromStdString(r.folder)).arg(frame)};
    border = QColor(150, 150, 150);
    const study::CollapseJudgement* c = studyCollapseAt(s, frame);
    const study::RunAtCollapse* at = c ? study::runAt(*c, r.folder) : nullptr;
    const study::Run* base = s.baseline();
    if (!r.error.empty()) {
        lines.push_back(QString::fromStdString(r.error));
    } else if (base == &r) {
        lines.push_back(c ? QStringLiteral("baseline: broken") : QStringLiteral("baseline"));
        if (c) border = QColor(200, 30, 30);
    } else if (at) {
        lines.push_back(QString::fromStdString(study::runStateText(*at)));
        lines.push_back(distanceLine(at->psnrDb, at->ssim));
        if (at->bad) border = QColor(200, 30, 30);
        if (at->normal()) border = QColor(30, 160, 30);
    } else {
        for (const study::FrameDistance& d : r.vsBaseline)
            if (d.frame == frame) lines.push_back(distanceLine(d.psnrDb, d.ssim));
    }
    return lines;
}

} // namespace

const study::CollapseJudgement* studyCollapseAt(const study::Study& s, int64_t frame)
{
    for (const study::CollapseJudgement& c : s.collapses)
        if (frame >= c.firstFrame && frame <= c.lastFrame) return &c;
    return nullptr;
}

QSize studyStripSize(const study::Study& s, const QString& folder, const StudyStripOptions& o)
{
    const auto cs = cells(s, folder, o.frame);
    const QSizeF t = shownSize(cs);
    const double w =
        std::max(200.0, static_cast<double>(cs.size()) * (t.width() + 2 * kPad) + kPad);
    const double h = t.height() + 2 * kPad + 18 * kCaptionLines + (o.report ? 70 : 0);
    return QSize(static_cast<int>(std::max(w, o.report ? 640.0 : 200.0)),
                 std::max(150, static_cast<int>(h)));
}

void paintStudyStrip(QPainter& p, const QRectF& rect, const study::Study& s, const QString& folder,
                     const StudyStripOptions& o)
{
    const auto cs = cells(s, folder, o.frame);
    QRectF area = rect.adjusted(kPad, kPad, -kPad, -kPad);
    p.setPen(o.theme.foreground);
    QFont font = p.font();
    if (o.report) {
        const study::CollapseJudgement* c = studyCollapseAt(s, o.frame);
        QFont title = font;
        title.setBold(true);
        title.setPointSizeF(font.pointSizeF() * 1.2);
        p.setFont(title);
        const QString head = c ? QStringLiteral("Frame %1 across the study's runs: %2")
                                     .arg(o.frame)
                                     .arg(QString::fromUtf8(study::verdictName(c->verdict)))
                               : QStringLiteral("Frame %1 across the study's runs").arg(o.frame);
        p.drawText(QRectF(area.left(), area.top(), area.width(), 24), Qt::AlignLeft, head);
        p.setFont(font);
        p.setPen(o.theme.muted);
        if (c)
            p.drawText(QRectF(area.left(), area.top() + 26, area.width(), 40),
                       Qt::AlignLeft | Qt::TextWordWrap, QString::fromStdString(c->reason));
        area.setTop(area.top() + 70);
    }
    const QSizeF shown = shownSize(cs);
    const double cellW = cs.empty() ? area.width()
                                    : std::min(area.width() / static_cast<double>(cs.size()),
                                               shown.width() + 2 * kPad);
    const double lineH = QFontMetricsF(font).height();
    for (size_t i = 0; i < cs.size(); ++i) {
        const QRectF cell(area.left() + cellW * static_cast<double>(i), area.top(), cellW,
                          area.height());
        const double capH = lineH * kCaptionLines + kPad;
        QSizeF size = shown.scaled(QSizeF(cell.width() - 2 * kPad, cell.height() - capH),
                                   Qt::KeepAspectRatio);
        const QRectF pic(cell.center().x() - size.width() / 2, cell.top() + kPad, size.width(),
                         size.height());
        QColor border;
        const auto lines = caption(s, *cs[i].run, o.frame, border);
        if (!cs[i].image.isNull()) {
            p.setRenderHint(QPainter::SmoothPixmapTransform, cs[i].image.width() >= pic.width());
            p.drawImage(pic, cs[i].image);
        } else {
            p.setPen(o.theme.muted);
            p.drawText(pic, Qt::AlignCenter | Qt::TextWordWrap, QStringLiteral("no frame"));
        }
        p.setPen(QPen(border, 3));
        p.setBrush(Qt::NoBrush);
        p.drawRect(pic.adjusted(-1.5, -1.5, 1.5, 1.5));
        double y = pic.bottom() + kPad;
        for (size_t l = 0; l < lines.size(); ++l) {
            QFont f = font;
            f.setBold(l == 0);
            p.setFont(f);
            p.setPen(l == 0 ? o.theme.foreground : o.theme.muted);
            const QFontMetricsF fm(f);
            p.drawText(QRectF(cell.left(), y, cell.width(), lineH), Qt::AlignHCenter,
                       fm.elidedText(lines[l], Qt::ElideRight, cell.width() - 4));
            y += lineH;
        }
        p.setFont(font);
    }
}

bool exportStudyStrip(const QString& path, QSize size, const study::Study& s, const QString& folder,
                      const StudyStripOptions& o, QString* error)
{
    Scene described; // exportImage names the source in an SVG's description
    described.path = folder.toStdString();
    return exportImage(
        path, size, QStringLiteral("study frames"), described, o.theme,
        [&](QPainter& p, const QRectF& rect) {
            p.fillRect(rect, o.theme.background);
            paintStudyStrip(p, rect, s, folder, o);
        },
        error);
}

} // namespace fs::render
