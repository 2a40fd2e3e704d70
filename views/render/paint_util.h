// Internal helpers of fragscope_render: ticks, axes, legends.
#pragma once

#include "render.h"

#include <QFont>
#include <QPainter>
#include <QString>

#include <functional>
#include <vector>

namespace fs::render::detail {

// "Nice" tick positions (1, 2, 5 × 10^k) covering [lo, hi], about n of them.
std::vector<double> niceTicks(double lo, double hi, int n);
QString num(double v);

QFont font(double px, bool bold = false);
// A dashed or dotted line of `length` stroked once into an image one device pixel thick
// (vertical or horizontal), to copy wherever many such lines go: stroking thousands of
// full-length patterned lines took tens of milliseconds of every paint on the GUI thread. Null
// on a vector device (SVG, PDF), which gets real lines.
QImage lineStamp(QPainter& p, const QPen& pen, double length, bool vertical);
// Copies of a lineStamp at each offset (device pixels, from the image's origin: columns for a
// vertical stamp, rows for a horizontal one) in one image `across` device pixels wide (tall):
// drawn once, where a copy drawn per line cost a blend call per line and scanline (~1,500
// frame boundaries: tens of ms of a heatmap paint).
QImage stampLines(const QImage& stamp, const std::vector<int>& offsets, bool vertical, int across);
// Title line at the top of rect; returns the rect below it.
// "file · SYNTHETIC DATA · incomplete capture · extra": the line under every report image's title.
QString reportSubtitle(const Scene& s, const QString& extra);
QRectF drawTitle(QPainter& p, const QRectF& rect, const QString& title, const QString& subtitle,
                 const Theme& th);

// Horizontal axis under plot: ticks in data units [lo,hi] mapped onto plot's width.
void drawXAxis(QPainter& p, const QRectF& plot, double lo, double hi, const QString& label,
               const Theme& th, const std::function<QString(double)>& fmt = {}, bool labels = true);
// Vertical axis left of plot.
void drawYAxis(QPainter& p, const QRectF& plot, double lo, double hi, const QString& label,
               const Theme& th, const std::function<QString(double)>& fmt = {});

struct LegendItem
{
    QColor color;
    QString text;
    int style = 0; // 0 box, 1 line, 2 dashed line, 3 outlined box
};
// A legend row starting at (x, y); returns its height.
double drawLegend(QPainter& p, double x, double y, double maxWidth,
                  const std::vector<LegendItem>& items, const Theme& th);

// Time of the x axis relative to the session start, in the unit timeUnitFor picks.
QString timeAxisLabel(const Scene& s, int64_t span);
double toAxisTime(const Scene& s, int64_t t, int64_t span);

// Frame boundaries (thin lines, numbered) and collapse bands over a plot with time range [t0,t1].
void drawFramesAndCollapses(QPainter& p, const QRectF& plot, const Scene& s, int64_t t0, int64_t t1,
                            const Theme& th, bool numbers);
// A flight recording's gaps (analysis::unrecordedSpans) over a plot with time range [t0,t1],
// shaded and labelled "not recorded".
void drawUnrecorded(QPainter& p, const QRectF& plot, const Scene& s, int64_t t0, int64_t t1,
                    const Theme& th);
void drawSelection(QPainter& p, const QRectF& plot, int64_t t0, int64_t t1, int64_t selFrom,
                   int64_t selTo, const Theme& th);

void paintHeatmap(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o,
                  const QImage* raster);
void paintTimeline(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o);
void paintHistogram(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o);
void paintMemMap(QPainter& p, const QRectF& rect, const Scene& s, const RenderOptions& o);

} // namespace fs::render::detail
