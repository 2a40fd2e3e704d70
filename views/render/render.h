// fragscope_render: the report-ready drawing of every view, once: the heatmap and the memory map
// with QPainter, the timelines and the histogram with QCustomPlot (charts.h). The GUI paints its
// widgets and its export dialog with it; `fragscope export` writes files with it.
#pragma once

#include "scene.h"

#include "core/analysis/graphs.h"

#include <QColor>
#include <QImage>
#include <QRectF>
#include <QSize>
#include <QString>

#include <atomic>
#include <functional>
#include <memory>

class QPainter;

namespace fs::render {

enum class View { Heatmap, MemMap, Histogram, Timeline };
const char* viewName(View v);
bool parseView(const std::string& s, View& out);

struct Theme
{
    QColor background{255, 255, 255};
    QColor foreground{30, 30, 30};
    QColor grid{225, 225, 225};
    QColor muted{110, 110, 110};
    bool dark = false;
    static Theme light();
    static Theme darkTheme();
    bool operator==(const Theme&) const = default;
};

// The visible part of a heatmap: a time range × a range of the compacted address axis.
struct Viewport
{
    int64_t t0 = 0;
    int64_t t1 = 1;
    double y0 = 0;
    double y1 = 1;
    bool operator==(const Viewport&) const = default;
};
Viewport fullViewport(const Scene& s, int track);

struct RenderOptions
{
    int track = -1;         // index into Scene::tracks; -1 = Scene::defaultTrack()
    int64_t from = kNoTime; // time range (timeline, heatmap); kNoTime = whole session
    int64_t to = kNoTime;
    double y0 = -1, y1 = -1; // compacted address range (heatmap); -1 = all
    int64_t frame = -1;      // selected frame: histogram/memmap at its end, highlighted elsewhere
    int64_t at = kNoTime;    // instant for histogram/memmap when no frame is selected
    bool compare = true;     // histogram: overlay frame f-1
    int64_t selFrom = kNoTime, selTo = kNoTime; // selection band
    int64_t selAlloc = -1;                      // highlighted allocation id
    int64_t marker = kNoTime; // an instant marked on the heatmap (the selected precursor)
    Theme theme = Theme::light();
    bool title = true;
    bool occupancyLegend = true; // false: the heatmap's blocks are coloured by a grouping
    double legendWidth = 0;      // pixels kept right of the plot for the grouping's legend
    // The memory map's figures when the caller has them (the GUI's time cursor computes them
    // off the GUI thread); null: asked from the engine while painting.
    const analysis::MemmapRaster* memmap = nullptr;
    const analysis::State* state = nullptr;
    // Heatmap: the time unit is the one for a span this long (ns; 0: the view's own span), so
    // that views side by side read in one unit (the compare window).
    int64_t unitSpan = 0;
    // Timelines: the CUDA graph replays as a lane below the panels (the GUI passes the Graphs
    // panel's report); null: no lane.
    std::shared_ptr<const analysis::GraphsReport> graphs;
    bool operator==(const RenderOptions&) const = default;
};

// The engine's heatmap of a viewport (analysis::Engine::heatmap) as a w x h image: the colours
// of its cells, high addresses at the top.
QImage heatmapRaster(const Scene& s, int track, const Viewport& vp, int w, int h);
// Colours of an engine raster's cells (occupancy ramp, free, outside, separator).
QImage heatmapImage(const analysis::HeatmapRaster& r);
QColor occupancyColor(double occ);
QColor freeColor();
QColor outsideColor();
// Pending frees (docs/analysis.md "Pending frees"): freed, still used by another stream.
QColor pendingColor();
QColor collapseColor();
// What a flight recording did not keep (between its windows): shaded, hatched.
QColor unrecordedColor();
// The shade of analysis::kClusterRanges[i] behind a fragment histogram's bars.
QColor clusterColor(size_t i);

// Where a view puts its plot inside rect (the widgets map the mouse with it).
QRectF plotRect(View v, const QRectF& rect, const RenderOptions& o);

// OOMs on a heatmap's plot: a dashed red line up through it at each x and a triangle under its
// time axis. One line per device pixel column, copied from one stroked line (108 dashed lines
// stroked one by one took up to 22 ms of a heatmap paint on a long run).
void paintOomMarks(QPainter& p, const QRectF& plot, const std::vector<double>& xs);

// Paints a view into rect. raster: a precomputed heatmap raster for the plot rect (else computed).
void paint(QPainter& p, const QRectF& rect, const Scene& s, View v, const RenderOptions& o,
           const QImage* raster = nullptr);

// Writes what `draw` paints to PNG, SVG or PDF (by the extension). Returns false with a message
// on error.
bool exportImage(const QString& path, QSize size, const QString& title, const Scene& s,
                 const Theme& theme, const std::function<void(QPainter&, const QRectF&)>& draw,
                 QString* error);
// Writes a view to PNG, SVG or PDF (by the extension). Returns false with a message on error.
bool exportView(const QString& path, QSize size, const Scene& s, View v, const RenderOptions& o,
                QString* error);

// Resolves RenderOptions' defaults against a scene (level, time range, instant).
RenderOptions resolved(const Scene& s, View v, RenderOptions o);

// Time-axis helpers shared with the QCustomPlot views: unit for a span and its divisor.
struct TimeUnit
{
    const char* name;
    double divisor;
};
TimeUnit timeUnitFor(int64_t span, TimeAxis axis);
// "4 KiB", "128 MiB": the lower bound of log2 bin k.
QString pow2Label(int k);

// A byte axis in one binary unit, so tick labels stay short: the largest value stays under 2048
// of it. Values are drawn divided by `div`; `name` labels the axis ("GiB").
struct ByteUnit
{
    double div = 1;
    const char* name = "B";
};
ByteUnit byteAxisUnit(double maxBytes);

} // namespace fs::render
