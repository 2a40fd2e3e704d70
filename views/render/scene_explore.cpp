#include "scene_explore.h"

#include "render.h"

#include <algorithm>
#include <stdexcept>

namespace fs::render {

namespace {

std::optional<uint64_t> poolOf(const Scene& s, int ti)
{
    return s.tracks[static_cast<size_t>(ti)].pool;
}

bool valid(const Scene& s, int ti)
{
    return canExplore(s) && ti >= 0 && ti < static_cast<int>(s.tracks.size());
}

// Runs an explorer query under the engine's read lock. A file gone behind a live view makes
// the query answer nothing (as Scene's own queries do); a bad search query is the caller's.
template <typename F> auto explored(const Scene& s, F&& f) -> std::optional<decltype(f())>
{
    const auto lock = s.engine->readLock();
    try {
        return f();
    } catch (const std::invalid_argument&) {
        throw;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

} // namespace

bool canExplore(const Scene& s)
{
    return s.engine && s.explorer && s.recordsReady();
}

std::optional<analysis::BlocksAt> blocksAt(const Scene& s, int ti, int64_t t, bool withAttributes)
{
    if (!valid(s, ti)) return std::nullopt;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    return explored(
        s, [&] { return s.explorer->blocksAt(ld.device, ld.level, t, ld.pool, withAttributes); });
}

bool attributesReady(const Scene& s, int ti)
{
    if (!valid(s, ti)) return false;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    return explored(s, [&] { return s.explorer->attributesReady(ld.device, ld.level); })
        .value_or(false);
}

void loadAttributes(const Scene& s, int ti)
{
    if (!valid(s, ti)) return;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    explored(s, [&] {
        s.explorer->loadAttributes(ld.device, ld.level);
        return true;
    });
}

int64_t stepEvent(const Scene& s, int ti, int64_t t, int dir)
{
    if (!valid(s, ti)) return kNoTime;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    return explored(s,
                    [&] {
                        return dir < 0 ? s.explorer->previousEvent(ld.device, ld.level, t)
                                       : s.explorer->nextEvent(ld.device, ld.level, t);
                    })
        .value_or(kNoTime);
}

std::optional<analysis::JumpTargets> jumpTargets(const Scene& s, int ti)
{
    if (!valid(s, ti)) return std::nullopt;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    return explored(s, [&] { return s.explorer->jumpTargets(ld.device, ld.level, poolOf(s, ti)); });
}

std::optional<analysis::CallSiteTable>
callSites(const Scene& s, int ti, int64_t from, int64_t to, analysis::GroupBy by,
          const std::vector<analysis::CategoryRule>& categoryRules)
{
    if (!valid(s, ti)) return std::nullopt;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    return explored(s, [&] {
        return s.explorer->callSites(ld.device, ld.level, from, to, by, poolOf(s, ti),
                                     categoryRules);
    });
}

std::optional<analysis::SearchResult> search(const Scene& s, int ti, const std::string& query,
                                             int64_t t)
{
    if (!valid(s, ti)) return std::nullopt;
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    return explored(
        s, [&] { return s.explorer->search(ld.device, ld.level, query, t, poolOf(s, ti)); });
}

bool styled(const Scene& s, int ti, const analysis::HeatmapStyle& style)
{
    return style.colouring != analysis::Colouring::Occupancy ||
           (ti >= 0 && ti < static_cast<int>(s.tracks.size()) && poolOf(s, ti).has_value());
}

analysis::StyledRaster styledHeatmap(const Scene& s, int ti, int64_t t0, int64_t t1, double y0,
                                     double y1, int w, int h, analysis::HeatmapStyle style)
{
    if (!valid(s, ti)) return {};
    const TrackEntry& ld = s.tracks[static_cast<size_t>(ti)];
    const analysis::HeatmapRequest rq = heatmapRequest(ld, t0, t1, y0, y1, w, h);
    style.pool = ld.pool;
    return explored(s, [&] { return s.explorer->heatmap(rq, style); })
        .value_or(analysis::StyledRaster{});
}

bool stateOnly(const Scene& s)
{
    if (!s.engine || !s.explorer) return false;
    return explored(s, [&] { return s.explorer->stateOnly(); }).value_or(false);
}

std::vector<int64_t> oomTimes(const Scene& s)
{
    std::vector<int64_t> out;
    if (s.ooms)
        for (const auto& o : *s.ooms)
            out.push_back(o.time);
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<QColor> legendColours(const analysis::StyledRaster& s)
{
    // Tableau's ten less red (collapse bands) and grey ("other"); search: magenta matches.
    static const QColor kHues[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},   {148, 103, 189},
                                   {23, 190, 207}, {188, 189, 34}, {227, 119, 194}, {140, 86, 75}};
    std::vector<QColor> out;
    for (size_t i = 0; i < s.legend.size(); ++i) {
        if (s.colouring == analysis::Colouring::Search)
            out.push_back(i == 0 ? QColor(255, 64, 200) : QColor(70, 90, 120));
        else if (s.legend[i].label == "other" && i + 1 == s.legend.size())
            out.push_back(QColor(150, 150, 150));
        else
            out.push_back(kHues[i % std::size(kHues)]);
    }
    return out;
}

QImage styledImage(const analysis::StyledRaster& s)
{
    const analysis::HeatmapRaster& r = s.raster;
    QImage img = heatmapImage(r);
    if (img.isNull() || s.category.size() != r.occupancy.size()) return img;
    const std::vector<QColor> colours = legendColours(s);
    for (int y = 0; y < r.height; ++y) {
        auto* line = reinterpret_cast<QRgb*>(img.scanLine(r.height - 1 - y));
        for (int x = 0; x < r.width; ++x) {
            const size_t k =
                static_cast<size_t>(y) * static_cast<size_t>(r.width) + static_cast<size_t>(x);
            const uint8_t c = s.category[k];
            if (c >= colours.size()) continue; // kNoCategory: drawn as the occupancy image
            const double reg = std::max(static_cast<double>(r.reservedFraction[k]), 1e-9);
            const double occ = std::min(1.0, r.occupancy[k] / reg);
            const QColor& base = colours[c];
            const double f = 0.35 + 0.65 * occ; // a sparse cell darker, a full one the hue
            line[x] = qRgb(static_cast<int>(base.red() * f), static_cast<int>(base.green() * f),
                           static_cast<int>(base.blue() * f));
        }
    }
    return img;
}

} // namespace fs::render
