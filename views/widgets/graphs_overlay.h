// What the CUDA-graphs analysis (core/analysis/graphs.h) adds to the heatmap: the outline of a
// pool's regions. (The timelines' lane of replays is render/charts.h's.) It draws the engine's
// figures; it computes none.
#pragma once

#include "core/analysis/graphs.h"
#include "render/render.h"

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

// Outlines the pool's regions on a heatmap painted in `plot` (widget coordinates) for viewport
// vp of track `ld` (nothing when the track is not the outline's).
void paintPoolOutline(QPainter& p, const QRectF& plot, const render::Viewport& vp,
                      const render::TrackEntry& ld, int64_t sessionEnd, const PoolOutline& o);

} // namespace fs::views
