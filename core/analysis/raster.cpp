// Heatmap (time x compacted address) and memory-map (Hilbert curve) rasters.
//
// Both accumulate rectangles into a 2D difference array: a rectangle's coverage of a cell is
// the product of its time overlap fraction and its address overlap fraction. Along each axis the
// coverage, as differences between neighbouring cells, is nonzero at four positions at most
// (the first and last cells and the ones after them), so a rectangle's 2D differences are the
// products of the two: at most 16 additions, so a block costs O(1) whatever its size, and one
// prefix-sum pass over the pixels resolves them: cost O(blocks in view + pixels).
#include "engine_impl.h"
#include "parallel.h"
#include "raster_grid.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace fs::analysis {

void Engine::Impl::buildLayout(TrackData& t)
{
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const RegionRec& r : t.regions)
        if (r.size > 0) spans.emplace_back(r.address, r.address + r.size);
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& s : spans) {
        if (!merged.empty() && s.first <= merged.back().second)
            merged.back().second = std::max(merged.back().second, s.second);
        else
            merged.push_back(s);
    }
    AddressLayout& L = t.layout;
    L = AddressLayout{};
    uint64_t total = 0;
    for (const auto& m : merged)
        total += m.second - m.first;
    // Separators together take about a tenth of the space, each at least one unit: thin lines
    // when zoomed out, visible bands when zoomed in.
    const uint64_t nsep = merged.empty() ? 0 : merged.size() - 1;
    L.separatorBytes = nsep == 0 ? 0 : std::max<uint64_t>(1, total / (10 * nsep));
    uint64_t pos = 0;
    for (size_t i = 0; i < merged.size(); ++i) {
        if (i > 0) {
            L.separators.emplace_back(pos, pos + L.separatorBytes);
            pos += L.separatorBytes;
        }
        L.ranges.push_back({merged[i].first, merged[i].second, pos});
        pos += merged[i].second - merged[i].first;
    }
    L.compactSize = pos;
    t.regionCompact.assign(t.regions.size(), TrackData::kNoCompact);
    for (size_t r = 0; r < t.regions.size(); ++r)
        if (uint64_t c = 0; L.toCompact(t.regions[r].address, c)) t.regionCompact[r] = c;
}

AddressLayout Engine::layout(uint32_t device, Level level) const
{
    static const TrackData empty;
    const TrackData* t = d_->trackInfo(device, level);
    return (t ? *t : empty).layout;
}

namespace {

// The request's window and size, clamped and defaulted; cells left empty.
HeatmapRaster frameOf(const HeatmapRequest& rq, const AddressLayout& layout, int64_t timeBegin,
                      int64_t timeEnd, Caveats caveats)
{
    HeatmapRaster h;
    h.width = std::clamp(rq.width, 1, 16384);
    h.height = std::clamp(rq.height, 1, 16384);
    h.t0 = rq.t0 == kNoTime ? timeBegin : rq.t0;
    h.t1 = rq.t1 == kNoTime ? timeEnd : rq.t1;
    if (h.t1 <= h.t0) h.t1 = h.t0 + 1;
    h.layout = layout;
    h.y0 = rq.y0;
    h.y1 = rq.y1 == 0 ? layout.compactSize : rq.y1;
    if (h.y1 <= h.y0) h.y1 = h.y0 + 1;
    h.caveats = std::move(caveats);
    return h;
}

} // namespace

HeatmapRaster Engine::Impl::heatmapFrame(const HeatmapRequest& rq, const TrackData& td) const
{
    return frameOf(rq, td.layout, timeBegin, timeEnd, resultCaveats());
}

HeatmapRaster Engine::heatmap(const HeatmapRequest& rq) const
{
    const TrackData& td = d_->trackOrThrow(rq.device, rq.level);
    HeatmapRaster h = d_->heatmapFrame(rq, td);
    const double dt = static_cast<double>(h.t1 - h.t0) / h.width;
    const double dy = static_cast<double>(h.y1 - h.y0) / h.height;
    const double ty0 = static_cast<double>(h.y0);
    auto px = [&](int64_t t) { return static_cast<double>(t - h.t0) / dt; };
    auto py = [&](double c) { return (c - ty0) / dy; };
    DiffGrid occ(h.width, h.height), reg(h.width, h.height);
    const int64_t far = h.t1 + 1;
    for (const RegionRec& r : td.regions) {
        if (r.createNs >= h.t1 || r.destroyNs <= h.t0) continue;
        uint64_t c = 0;
        if (!td.layout.toCompact(r.address, c)) continue;
        reg.addRect(px(std::max(r.createNs, h.t0)), px(std::min(r.destroyNs, far)),
                    py(static_cast<double>(c)), py(static_cast<double>(c + r.size)));
    }
    // One pass in the blocks' order, on one thread: chunks added up in another order could move
    // a cell that is zero within rounding across the allocated/free line, and the picture would
    // depend on the machine's cores.
    for (uint32_t i : d_->liveAt(td, h.t0, h.t1 - 1)) {
        const Alloc& a = td.allocs[i];
        if (a.region == kNoRegion || a.allocNs >= h.t1) continue;
        uint64_t c = 0;
        if (!td.compactOf(a, c)) continue;
        if (c + a.size <= h.y0 || c >= h.y1) continue;
        ++h.allocationsInView;
        occ.addRect(px(std::max(a.allocNs, h.t0)), px(std::min(a.freeNs, far)),
                    py(static_cast<double>(c)), py(static_cast<double>(c + a.size)));
    }
    // Pending frees (few): a grid of their own only when one is in view.
    std::optional<DiffGrid> pend;
    for (const Alloc& a : td.pending) {
        if (a.allocNs >= h.t1) break;
        uint64_t c = 0;
        if (!a.occupies() || a.freeNs <= h.t0 || a.region == kNoRegion || !td.compactOf(a, c) ||
            c + a.size <= h.y0 || c >= h.y1)
            continue;
        if (!pend) pend.emplace(h.width, h.height);
        pend->addRect(px(std::max(a.allocNs, h.t0)), px(std::min(a.freeNs, far)),
                      py(static_cast<double>(c)), py(static_cast<double>(c + a.size)));
    }
    const std::vector<double> pendCells = pend ? pend->resolve() : std::vector<double>{};
    finishHeatmap(h, occ.resolve(), reg.resolve(), separatorMask(td.layout, ty0, dy, h.height),
                  pend ? &pendCells : nullptr);
    return h;
}

namespace {

constexpr int kLodTimeBins = 2048;
constexpr int kLodAddressBins = 1024;

// Summed-area table of a row-major w x h grid: (w + 1) x (h + 1), S[y][x] = sum of cells left of
// x and below y.
std::vector<double> summedArea(const std::vector<double>& v, int w, int h)
{
    std::vector<double> s =
        mappedZeros<double>(static_cast<size_t>(w + 1) * static_cast<size_t>(h + 1));
    const auto W = static_cast<size_t>(w + 1);
    for (int y = 0; y < h; ++y) {
        double row = 0;
        for (int x = 0; x < w; ++x) {
            row += v[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)];
            s[static_cast<size_t>(y + 1) * W + static_cast<size_t>(x + 1)] =
                s[static_cast<size_t>(y) * W + static_cast<size_t>(x + 1)] + row;
        }
    }
    return s;
}

// Integral of the piecewise-constant grid over [0, x) x [0, y) (grid units, fractional): the
// summed-area table interpolated bilinearly inside cell (i, j).
double integralTo(const std::vector<double>& S, int w, int h, double x, double y)
{
    x = std::clamp(x, 0.0, static_cast<double>(w));
    y = std::clamp(y, 0.0, static_cast<double>(h));
    const int i = std::min(static_cast<int>(x), w - 1), j = std::min(static_cast<int>(y), h - 1);
    const double a = x - i, b = y - j;
    const auto W = static_cast<size_t>(w + 1);
    auto at = [&](int xx, int yy) {
        return S[static_cast<size_t>(yy) * W + static_cast<size_t>(xx)];
    };
    const double s00 = at(i, j), s10 = at(i + 1, j), s01 = at(i, j + 1), s11 = at(i + 1, j + 1);
    const double cell = s11 - s10 - s01 + s00;
    return s00 + a * (s10 - s00) + b * (s01 - s00) + a * b * cell;
}

} // namespace

Engine::Impl::Lod Engine::Impl::lodFrame(const TrackData& td) const
{
    Lod lod;
    lod.nt = kLodTimeBins;
    lod.ny = kLodAddressBins;
    lod.t0 = timeBegin;
    lod.t1 = std::max(timeEnd + 1, timeBegin + 1);
    lod.ySize = std::max<double>(1.0, static_cast<double>(td.layout.compactSize));
    return lod;
}

void Engine::Impl::lodCells(const TrackData& td, const Lod& lod, std::vector<double>& occCells,
                            std::vector<double>& regCells, size_t parts)
{
    const double dt = static_cast<double>(lod.t1 - lod.t0) / lod.nt;
    const double dy = lod.ySize / lod.ny;
    auto px = [&](int64_t t) { return static_cast<double>(t - lod.t0) / dt; };
    DiffGrid reg(lod.nt, lod.ny);
    for (const RegionRec& r : td.regions) {
        uint64_t c = 0;
        if (!td.layout.toCompact(r.address, c)) continue;
        reg.addRect(px(r.createNs), px(std::min(r.destroyNs, lod.t1)), static_cast<double>(c) / dy,
                    static_cast<double>(c + r.size) / dy);
    }
    regCells = std::move(reg).take();
    // The blocks in `parts` consecutive ranges, each into its own grid, added up in order.
    std::vector<DiffGrid> occ;
    for (size_t part = 0; part < std::max<size_t>(parts, 1); ++part)
        occ.emplace_back(lod.nt, lod.ny);
    forEachChunk(td.allocs.size(), occ.size(), [&](size_t part, size_t from, size_t to) {
        for (size_t i = from; i < to; ++i) {
            const Alloc& a = td.allocs[i];
            uint64_t c = 0;
            if (!a.occupies() || a.region == kNoRegion || !td.compactOf(a, c)) continue;
            occ[part].addRect(px(a.allocNs), px(std::min(a.freeNs, lod.t1)),
                              static_cast<double>(c) / dy, static_cast<double>(c + a.size) / dy);
        }
    });
    occCells = std::move(occ[0]).take();
    for (size_t part = 1; part < occ.size(); ++part)
        occ[part].addTo(occCells);
}

std::shared_ptr<const Engine::Impl::Lod> Engine::Impl::lodOf(const TrackData& td) const
{
    std::lock_guard lock(lodMutex);
    const auto ti = static_cast<size_t>(&td - tracks.data());
    if (ti >= tracks.size()) return nullptr; // the empty track of trackOrThrow
    if (lods.size() != tracks.size()) lods.assign(tracks.size(), nullptr);
    if (lods[ti]) return lods[ti];
    auto lod = std::make_shared<Lod>(lodFrame(td));
    std::vector<double> occCells, regCells;
    if (!readLodCache(td, lod->nt, lod->ny, occCells, regCells)) {
        ensureRows();
        lodCells(td, *lod, occCells, regCells);
        writeLodCache(td, lod->nt, lod->ny, occCells, regCells);
    }
    lod->occ = summedArea(occCells, lod->nt, lod->ny);
    lod->reg = summedArea(regCells, lod->nt, lod->ny);
    lods[ti] = lod;
    return lod;
}

void Engine::Impl::publishPreview(const LoadOptions& o)
{
    // The track the views show first (render::Scene::defaultTrack: the engine's default track
    // on device 0, else the first).
    if (tracks.empty()) return;
    const size_t pick = defaultTrackIndex(trackList(), 0).value_or(0);
    TrackData& td = tracks[pick];
    if (static_cast<int64_t>(td.allocs.size()) < o.previewFrom) return;
    buildLayout(td);
    auto lod = std::make_shared<Lod>(lodFrame(td));
    LodCells cells{pick, {}, {}};
    // Two halves on two threads, whatever the machine's cores: the same cells everywhere.
    lodCells(td, *lod, cells.occ, cells.reg, 2);
    lod->occ = summedArea(cells.occ, lod->nt, lod->ny);
    lod->reg = summedArea(cells.reg, lod->nt, lod->ny);
    {
        std::lock_guard lock(lodMutex);
        lods.assign(tracks.size(), nullptr);
        lods[pick] = lod;
        if (!cacheStamp.empty()) lodsToStore.push_back(std::move(cells));
    }
    auto p = std::make_shared<HeatmapPreview>();
    p->device = td.device;
    p->level = td.level;
    p->allocations = static_cast<int64_t>(td.allocs.size());
    p->regions = static_cast<int64_t>(td.regions.size());
    p->layout = td.layout;
    p->timeBegin = timeBegin;
    p->timeEnd = timeEnd;
    p->caveats = resultCaveats();
    p->grid = std::move(lod);
    o.preview(std::move(p));
}

bool Engine::previewReady(uint32_t device, Level level) const
{
    const TrackData* t = d_->trackInfo(device, level);
    if (!t) return false;
    // Held while a grid is being built: not ready yet.
    std::unique_lock lock(d_->lodMutex, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const auto ti = static_cast<size_t>(t - d_->tracks.data());
    return (ti < d_->lods.size() && d_->lods[ti]) || d_->storedLods.count(lodKey(*t)) > 0;
}

HeatmapRaster Engine::heatmapKept(const HeatmapRequest& rq) const
{
    static const TrackData empty;
    const TrackData* info = d_->trackInfo(rq.device, rq.level);
    HeatmapRaster h = d_->heatmapFrame(rq, info ? *info : empty);
    if (info && d_->readRasterCache(h, rq.device, rq.level)) return h;
    h = heatmap(rq);
    if (info) d_->writeRasterCache(h, rq.device, rq.level);
    return h;
}

namespace {

// h's cells from a level-of-detail grid (h framed: window, size, layout); all outside without.
void fillFromGrid(HeatmapRaster& h, const Engine::Impl::Lod* lod)
{
    const size_t n = static_cast<size_t>(h.width) * static_cast<size_t>(h.height);
    h.occupancy.assign(n, 0.0f);
    h.reservedFraction.assign(n, 0.0f);
    h.state.assign(n, CellState::Outside);
    if (!lod) return;
    // Pixel edges in grid units.
    const double gx = lod->nt / static_cast<double>(lod->t1 - lod->t0);
    const double gy = lod->ny / lod->ySize;
    std::vector<double> xs(static_cast<size_t>(h.width) + 1), ys(static_cast<size_t>(h.height) + 1);
    for (int x = 0; x <= h.width; ++x)
        xs[static_cast<size_t>(x)] =
            (static_cast<double>(h.t0 - lod->t0) + static_cast<double>(h.t1 - h.t0) * x / h.width) *
            gx;
    for (int y = 0; y <= h.height; ++y)
        ys[static_cast<size_t>(y)] =
            (static_cast<double>(h.y0) + static_cast<double>(h.y1 - h.y0) * y / h.height) * gy;
    const double dy = static_cast<double>(h.y1 - h.y0) / h.height;
    const std::vector<bool> sep = separatorMask(h.layout, static_cast<double>(h.y0), dy, h.height);
    // The integral up to every pixel corner, once: a pixel is then four lookups per channel.
    const auto W = static_cast<size_t>(h.width) + 1;
    std::vector<double> fo(W * (static_cast<size_t>(h.height) + 1)), fr(fo.size());
    for (size_t y = 0; y < ys.size(); ++y)
        for (size_t x = 0; x < xs.size(); ++x) {
            fo[y * W + x] = integralTo(lod->occ, lod->nt, lod->ny, xs[x], ys[y]);
            fr[y * W + x] = integralTo(lod->reg, lod->nt, lod->ny, xs[x], ys[y]);
        }
    for (int y = 0; y < h.height; ++y) {
        const auto yu = static_cast<size_t>(y);
        const double height = ys[yu + 1] - ys[yu];
        for (int x = 0; x < h.width; ++x) {
            const auto xu = static_cast<size_t>(x);
            const double area = (xs[xu + 1] - xs[xu]) * height;
            auto avg = [&](const std::vector<double>& F) {
                const double v = F[(yu + 1) * W + xu + 1] - F[(yu + 1) * W + xu] -
                                 F[yu * W + xu + 1] + F[yu * W + xu];
                return area > 0 ? v / area : 0.0;
            };
            const double ov = std::clamp(avg(fo), 0.0, 1.0);
            const double gv = std::clamp(avg(fr), 0.0, 1.0);
            const size_t k = yu * static_cast<size_t>(h.width) + xu;
            h.occupancy[k] = ov < kEps ? 0.0f : static_cast<float>(ov);
            h.reservedFraction[k] = gv < kEps ? 0.0f : static_cast<float>(gv);
            h.state[k] = sep[yu]      ? CellState::Separator
                         : ov >= kEps ? CellState::Allocated
                         : gv >= kEps ? CellState::Free
                                      : CellState::Outside;
        }
    }
}

} // namespace

HeatmapRaster Engine::heatmapPreview(const HeatmapRequest& rq) const
{
    // The stored grid answers without the allocation records (a deferred load reads them only
    // when the grid must be built).
    static const TrackData empty;
    const TrackData* info = d_->trackInfo(rq.device, rq.level);
    const TrackData& td = info ? *info : empty;
    HeatmapRaster h = d_->heatmapFrame(rq, td);
    fillFromGrid(h, d_->lodOf(td).get());
    return h;
}

HeatmapRaster HeatmapPreview::raster(const HeatmapRequest& rq) const
{
    HeatmapRaster h = frameOf(rq, layout, timeBegin, timeEnd, caveats);
    fillFromGrid(h, grid.get());
    return h;
}

MemmapRaster Engine::memmap(const MemmapRequest& rq) const
{
    const TrackData& td = d_->trackOrThrow(rq.device, rq.level);
    MemmapRaster m;
    const int order = std::clamp(rq.order, 1, 12);
    m.side = 1 << order;
    m.time = rq.time == kNoTime ? d_->timeEnd : rq.time;
    m.layout = td.layout;
    m.caveats = d_->resultCaveats();
    const uint64_t cells = static_cast<uint64_t>(m.side) * static_cast<uint64_t>(m.side);
    m.bytesPerCell = std::max<uint64_t>(1, (td.layout.compactSize + cells - 1) / cells);
    const double bpc = static_cast<double>(m.bytesPerCell);
    // A 1-row grid over curve positions: the same difference arithmetic in one dimension.
    const int n = static_cast<int>(cells);
    DiffGrid occ(n, 1), reg(n, 1);
    for (const RegionRec& r : td.regions) {
        if (r.createNs > m.time || r.destroyNs <= m.time) continue;
        uint64_t c = 0;
        if (td.layout.toCompact(r.address, c))
            reg.addRect(static_cast<double>(c) / bpc, static_cast<double>(c + r.size) / bpc, 0, 1);
    }
    for (uint32_t i : d_->liveAt(td, m.time, m.time)) {
        const Alloc& a = td.allocs[i];
        uint64_t c = 0;
        if (a.region != kNoRegion && td.compactOf(a, c))
            occ.addRect(static_cast<double>(c) / bpc, static_cast<double>(c + a.size) / bpc, 0, 1);
    }
    DiffGrid pend(n, 1);
    for (const Alloc& a : td.pending) {
        if (a.allocNs > m.time) break;
        uint64_t c = 0;
        if (a.occupies() && a.freeNs > m.time && a.region != kNoRegion && td.compactOf(a, c))
            pend.addRect(static_cast<double>(c) / bpc, static_cast<double>(c + a.size) / bpc, 0, 1);
    }
    const std::vector<double> o = occ.resolve(), g = reg.resolve(), pv = pend.resolve();
    const std::vector<bool> sep = separatorMask(td.layout, 0, bpc, n);
    m.occupancy.assign(cells, 0.0f);
    m.state.assign(cells, CellState::Outside);
    for (uint64_t d = 0; d < cells; ++d) {
        int x = 0, y = 0;
        hilbertXY(m.side, d, x, y);
        const size_t k =
            static_cast<size_t>(y) * static_cast<size_t>(m.side) + static_cast<size_t>(x);
        const double ov = o[d] < kEps ? 0.0 : std::min(o[d], 1.0);
        const double gv = g[d] < kEps ? 0.0 : std::min(g[d], 1.0);
        m.occupancy[k] = static_cast<float>(ov);
        m.state[k] = cellState(sep[d] && static_cast<double>(d) * bpc <
                                             static_cast<double>(td.layout.compactSize),
                               ov, pv[d] < kEps ? 0.0 : pv[d], gv);
    }
    return m;
}

} // namespace fs::analysis
