// The heatmap coloured by call site, tag, stream, pool, memory category or search matches, or
// filtered to one pool (explore.h). The same difference-array rasters as Engine::heatmap
// (raster.cpp): one grid for every block in view, then one per legend entry, and each allocated
// cell takes the entry whose blocks cover most of its byte-time.
#include "explore_impl.h"
#include "raster_grid.h"

#include <algorithm>
#include <unordered_map>

namespace fs::analysis {

StyledRaster Explorer::heatmap(const HeatmapRequest& rq, const HeatmapStyle& style) const
{
    const Engine& e = *engine_;
    StyledRaster out;
    out.colouring = style.colouring;
    if (style.colouring == Colouring::Occupancy && !style.pool) {
        out.raster = e.heatmap(rq);
        return out;
    }
    const bool categories = style.colouring != Colouring::Occupancy;
    const ExploreContext ctx = exploreContext(e, data(), rq.device, rq.level, categories);
    const Engine::Impl& d = ctx.d;
    const TrackData& td = ctx.td;
    const auto& pools = ctx.pools;
    HeatmapRaster h = d.heatmapFrame(rq, td);
    const double dt = static_cast<double>(h.t1 - h.t0) / h.width;
    const double dy = static_cast<double>(h.y1 - h.y0) / h.height;
    const double ty0 = static_cast<double>(h.y0);
    auto px = [&](int64_t t) { return static_cast<double>(t - h.t0) / dt; };
    auto py = [&](double c) { return (c - ty0) / dy; };
    const int64_t far = h.t1 + 1;
    DiffGrid occ(h.width, h.height), reg(h.width, h.height);
    for (size_t k = 0; k < td.regions.size(); ++k) {
        const RegionRec& r = td.regions[k];
        if (r.createNs >= h.t1 || r.destroyNs <= h.t0) continue;
        if (style.pool && pools->byIndex[k] != *style.pool) continue;
        uint64_t c = 0;
        if (!td.layout.toCompact(r.address, c)) continue;
        reg.addRect(px(std::max(r.createNs, h.t0)), px(std::min(r.destroyNs, far)),
                    py(static_cast<double>(c)), py(static_cast<double>(c + r.size)));
    }
    struct InView
    {
        uint32_t index;
        double x0, x1, y0, y1;
    };
    std::vector<InView> blocks;
    for (uint32_t i : d.liveAt(td, h.t0, h.t1 - 1)) {
        const Alloc& a = td.allocs[i];
        if (a.region == kNoRegion || a.allocNs >= h.t1) continue;
        if (style.pool && pools->byIndex[a.region] != *style.pool) continue;
        uint64_t c = 0;
        if (!td.compactOf(a, c)) continue;
        if (c + a.size <= h.y0 || c >= h.y1) continue;
        ++h.allocationsInView;
        const InView v{i, px(std::max(a.allocNs, h.t0)), px(std::min(a.freeNs, far)),
                       py(static_cast<double>(c)), py(static_cast<double>(c + a.size))};
        occ.addRect(v.x0, v.x1, v.y0, v.y1);
        blocks.push_back(v);
    }
    finishHeatmap(h, occ.resolve(), reg.resolve(), separatorMask(td.layout, ty0, dy, h.height));
    out.raster = std::move(h);
    const HeatmapRaster& R = out.raster;
    if (!categories) return out;

    // Each block's group, and the groups' byte-time in view.
    const auto& attrs = ctx.attrs;
    const auto& stacks = ctx.stacks;
    std::vector<uint64_t> keyOf(blocks.size());
    std::unordered_map<uint64_t, double> weight;
    std::optional<SearchQuery> query;
    std::optional<SearchMatcher> matcher;
    if (style.colouring == Colouring::Search) {
        query = parseSearch(style.query);
        matcher.emplace(*query, td, *attrs, *stacks);
    }
    const GroupBy by = style.colouring == Colouring::Tag        ? GroupBy::Tag
                       : style.colouring == Colouring::Stream   ? GroupBy::Stream
                       : style.colouring == Colouring::Pool     ? GroupBy::Pool
                       : style.colouring == Colouring::Category ? GroupBy::Category
                                                                : GroupBy::CallSite;
    // By memory category: the blocks in view categorised once (categories.cpp).
    std::vector<MemoryCategory> categoryOf;
    if (by == GroupBy::Category) {
        std::vector<uint32_t> idx(blocks.size());
        for (size_t b = 0; b < blocks.size(); ++b)
            idx[b] = blocks[b].index;
        categoryOf = categoriesOf(ctx, idx, style.categoryRules);
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
        const InView& v = blocks[b];
        keyOf[b] = matcher                   ? ((*matcher)(v.index) ? 0 : 1)
                   : by == GroupBy::Category ? static_cast<uint64_t>(categoryOf[b])
                                             : groupKey(by, td, v.index, *attrs, *stacks, *pools);
        const double w = std::max(0.0, std::min(v.x1, double(R.width)) - std::max(v.x0, 0.0)) *
                         std::max(0.0, std::min(v.y1, double(R.height)) - std::max(v.y0, 0.0));
        weight[keyOf[b]] += w * dt * dy;
    }
    // The legend: the groups by byte-time in view (search: matches, then the others).
    std::vector<std::pair<uint64_t, double>> ranked(weight.begin(), weight.end());
    std::unordered_map<uint64_t, uint8_t> category;
    if (matcher) {
        out.legend = {{"matches: " + query->describe(), weight[0]}, {"other blocks", weight[1]}};
        category = {{0, 0}, {1, 1}};
    } else {
        std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
            return a.second != b.second ? a.second > b.second : a.first < b.first;
        });
        const size_t top = static_cast<size_t>(std::clamp(style.top, 1, 64));
        for (size_t k = 0; k < ranked.size() && k < top; ++k) {
            category[ranked[k].first] = static_cast<uint8_t>(k);
            out.legend.push_back(
                {groupLabel(by, ranked[k].first, td, *attrs, *stacks), ranked[k].second});
        }
        if (ranked.size() > top) {
            double rest = 0;
            for (size_t k = top; k < ranked.size(); ++k)
                rest += ranked[k].second;
            out.legend.push_back({"other", rest});
        }
    }
    const auto other = static_cast<uint8_t>(out.legend.size() - 1);
    std::vector<std::vector<uint32_t>> members(out.legend.size());
    for (size_t b = 0; b < blocks.size(); ++b) {
        const auto it = category.find(keyOf[b]);
        members[it == category.end() ? other : it->second].push_back(static_cast<uint32_t>(b));
    }
    const size_t n = R.occupancy.size();
    out.category.assign(n, StyledRaster::kNoCategory);
    std::vector<float> best(n, 0.0f);
    for (size_t c = 0; c < members.size(); ++c) {
        if (members[c].empty()) continue;
        DiffGrid g(R.width, R.height);
        for (uint32_t b : members[c])
            g.addRect(blocks[b].x0, blocks[b].x1, blocks[b].y0, blocks[b].y1);
        const std::vector<double> v = g.resolve();
        for (size_t k = 0; k < n; ++k)
            if (R.state[k] == CellState::Allocated && v[k] > kEps &&
                static_cast<float>(v[k]) > best[k]) {
                best[k] = static_cast<float>(v[k]);
                out.category[k] = static_cast<uint8_t>(c);
            }
    }
    return out;
}

} // namespace fs::analysis
