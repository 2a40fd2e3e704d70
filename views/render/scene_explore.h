// The explorer's answers (core/analysis/explore.h) for a scene's track: the time cursor's
// blocks, event stepping, jump targets, call sites, search and the styled heatmap. A pool's
// entry (TrackEntry::pool) asks for that pool only. Each call holds the engine's read lock; the
// callers are the GUI's workers (and tests), never the GUI thread for anything that replays.
#pragma once

#include "render/scene.h"

#include <QColor>
#include <QImage>

#include <optional>
#include <string>
#include <vector>

namespace fs::render {

// Whether the explorer can answer now: an engine, and its records read (a first look's
// scene answers nothing, like Scene's own row queries).
bool canExplore(const Scene& s);

std::optional<analysis::BlocksAt> blocksAt(const Scene& s, int ti, int64_t t, bool withAttributes);
bool attributesReady(const Scene& s, int ti);
void loadAttributes(const Scene& s, int ti);
// The previous (dir < 0) or next (dir > 0) allocator event of the track; kNoTime when none.
int64_t stepEvent(const Scene& s, int ti, int64_t t, int dir);
std::optional<analysis::JumpTargets> jumpTargets(const Scene& s, int ti);
// GroupBy::Category: categoryRules are the user's (settings "categories").
std::optional<analysis::CallSiteTable>
callSites(const Scene& s, int ti, int64_t from, int64_t to, analysis::GroupBy by,
          const std::vector<analysis::CategoryRule>& categoryRules = {});
// Throws std::invalid_argument for a query the engine cannot parse.
std::optional<analysis::SearchResult> search(const Scene& s, int ti, const std::string& query,
                                             int64_t t);
// The heatmap of a window in a style (colouring, the entry's pool); empty raster when the
// explorer cannot answer. Throws std::invalid_argument for a bad search query.
analysis::StyledRaster styledHeatmap(const Scene& s, int ti, int64_t t0, int64_t t1, double y0,
                                     double y1, int w, int h, analysis::HeatmapStyle style);
// Whether a style needs the explorer (a colouring, or a pool entry's filter) rather than the
// engine's plain heatmap.
bool styled(const Scene& s, int ti, const analysis::HeatmapStyle& style);
bool stateOnly(const Scene& s);
// The OOMs' times, in order (the engine's diagnoses when the scene has them).
std::vector<int64_t> oomTimes(const Scene& s);

// Colours of a styled raster: each category its own hue, shaded by the cell's occupancy; free,
// outside and separator cells as the occupancy image draws them.
QImage styledImage(const analysis::StyledRaster& r);
// The colour of each legend entry (index = category).
std::vector<QColor> legendColours(const analysis::StyledRaster& r);

} // namespace fs::render
