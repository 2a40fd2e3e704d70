// The timelines and the free-fragment histogram, built in a QCustomPlot: the one drawing path of
// these two charts. The GUI's widgets (views/widgets/plot_widgets.h) show the plot this builds;
// render::paint and exportView draw a plot built by the same functions, so an exported picture is
// the picture on screen. They draw the engine's figures (Scene, analysis::State) and compute none.
#pragma once

#include "render.h"

#include "core/analysis/graphs.h"

#include <QFont>
#include <QString>

#include <memory>
#include <vector>

class QCustomPlot;
class QCPAxisRect;
class QCPAbstractItem;
class QCPAbstractLegendItem;
class QCPLegend;
class QCPItemPosition;

namespace fs::render {

// The application's font with its size in pixels: a chart's text on every device (PNG, SVG at
// 72 dpi, PDF) as on the screen.
QFont chartFont();

// Colours, fonts' colours and grid of a plot in a theme.
void applyPlotTheme(QCustomPlot& plot, const Theme& theme);

// Puts an item's position on a panel: x in the panel's plot coordinates (timelineX), y in its
// plot coordinates or, yAsPanelRatio, as a ratio of its height (what spans the panel).
void placeOnPanel(QCPItemPosition* pos, QCPAxisRect* panel, bool yAsPanelRatio);

// The timelines' x coordinate of session time t (the unit timeUnitFor picks for the session's
// span, from its start), and back.
double timelineX(const Scene& s, int64_t t);
int64_t timelineTime(const Scene& s, double x);

struct TimelineChart
{
    int track = -1;
    int64_t from = kNoTime, to = kNoTime; // the time range shown; kNoTime: the whole session
    int64_t selFrom = kNoTime, selTo = kNoTime;
    std::vector<int64_t> ooms; // red lines on every panel (oomTimes)
    // The CUDA graph replays as a lane below the panels; null or no replays: no lane.
    std::shared_ptr<const analysis::GraphsReport> graphs;
    Theme theme = Theme::light();
    QFont font; // the panels' text is this font, a little smaller
};

// The OOM lines of a timeline plot and their legend entry (none without OOMs).
struct OomMarks
{
    std::vector<QCPAbstractItem*> lines;
    QCPLegend* legend = nullptr; // where the entry goes
    QCPAbstractLegendItem* entry = nullptr;
};

// What buildTimeline made, for a widget that adds to it.
struct TimelinePlot
{
    std::vector<QCPAxisRect*> panels; // top to bottom; the replay lane last when there is one
    std::vector<QCPAbstractItem*> selection; // the selection band's items
    OomMarks ooms;
    std::string metric; // the ruled frame metric of the 4th panel ("": none)
    bool replayLane = false;
};

// Replaces whatever `plot` showed with the timelines of track c.track: reserved, allocated,
// cached-unused and largest free block; F with the reference line; fragment and event-size
// entropy; the first ruled frame metric with its thresholds; the replay lane; collapse bands,
// OOMs and the selection on every panel. Panels share one time axis.
TimelinePlot buildTimeline(QCustomPlot& plot, const Scene& s, const TimelineChart& c);
// Replaces a timeline plot's OOM lines with one at each of `ooms` on every panel (a widget's
// new OOM list costs no rebuild of the panels).
void setOomLines(QCustomPlot& plot, const std::vector<QCPAxisRect*>& panels, const Scene& s,
                 const std::vector<int64_t>& ooms, OomMarks& marks);
// The selection band [x0, x1] (timelineX) on every panel.
std::vector<QCPAbstractItem*>
addSelectionBand(QCustomPlot& plot, const std::vector<QCPAxisRect*>& panels, double x0, double x1);

// The engine's log2 bins of free fragments at an instant, and at the end of the frame before for
// comparison, with the names their legend shows.
struct HistogramChart
{
    std::vector<analysis::HistogramBin> current, previous;
    QString currentName, previousName;
    Theme theme = Theme::light();
    QFont font;
};
// The chart of the state at `at`: at the end of frame `frame` when it is timed (-1: none), and
// with frame `previousFrame`'s bins as outlines when prev is given.
HistogramChart histogramChart(const Scene& s, int64_t at, int64_t frame,
                              const analysis::State& state, int64_t previousFrame,
                              const analysis::State* prev);
// Replaces whatever `plot` showed with the histogram: bars over the cluster ranges
// (analysis::kClusterRanges), the comparison as outlines, labelled by each bin's lower bound.
void buildHistogram(QCustomPlot& plot, const HistogramChart& h);

} // namespace fs::render
