// What the CUDA-graphs analysis (core/analysis/graphs.h) adds to the other views: a lane of
// replays on the timelines, coloured by duration, and the outline of a pool's regions on the
// heatmap. They draw the engine's figures; they compute none.
#pragma once

#include "core/analysis/graphs.h"
#include "render/render.h"

#include <QColor>
#include <functional>
#include <memory>

class QCustomPlot;
class QCPAxisRect;
class QPainter;
class QRectF;

namespace fs::views {

// The regions of one pool, outlined on the heatmap of their track.
struct PoolOutline
{
    uint32_t device = 0;
    Level level = Level::Framework;
    std::vector<analysis::PoolRegion> regions;
    bool empty() const { return regions.empty(); }
};

// Colour of a replay duration between lo (blue) and hi (red), on a log scale.
QColor replayColor(int64_t duration, int64_t lo, int64_t hi);
// The durations the lane's colour scale spans: the graphs' shortest p50 to their longest p99.
std::pair<int64_t, int64_t> replayColorRange(const analysis::GraphsReport& r);

// Draws every replay of r in axis rect `rect` (x: plot coordinates from toX), each at least a
// pixel wide, coloured by duration (the longest replay wins a pixel column). One item, however
// many replays: a million replays cost one pass over the visible ones per replot.
void addReplayLane(QCustomPlot* plot, QCPAxisRect* rect,
                   std::shared_ptr<const analysis::GraphsReport> r,
                   const std::function<double(int64_t)>& toX);

// Outlines the pool's regions on a heatmap painted in `plot` (widget coordinates) for viewport
// vp of track `ld` (nothing when the track is not the outline's).
void paintPoolOutline(QPainter& p, const QRectF& plot, const render::Viewport& vp,
                      const render::TrackEntry& ld, int64_t sessionEnd, const PoolOutline& o);

} // namespace fs::views
