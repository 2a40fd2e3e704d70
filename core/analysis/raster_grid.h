// Internal to fragscope_analysis: the difference-array grid behind the heatmap and memory-map
// rasters (raster.cpp explains the arithmetic), shared with the explorer's styled heatmap.
#pragma once

#include "types.h"

#include "core/pages.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fs::analysis {

// One axis of a rectangle in pixel units [a, b) clipped to [0, n): its coverage of each cell
// (the part of the cell inside [a, b)) as differences between neighbouring cells. Nonzero only
// at the first cell c0, the one after it, the last c1 and the one after that (c1 + 1 <= n):
// at most four positions, three when c1 = c0 + 1, two when c0 = c1.
struct AxisDiff
{
    int n = 0;
    int at[4];
    double v[4];
};

inline bool axisDiff(double a, double b, int n, AxisDiff& out)
{
    a = std::max(a, 0.0);
    b = std::min(b, static_cast<double>(n));
    if (!(b > a)) return false;
    int c0 = static_cast<int>(std::floor(a));
    int c1 = static_cast<int>(std::ceil(b)) - 1;
    c0 = std::clamp(c0, 0, n - 1);
    c1 = std::clamp(c1, c0, n - 1);
    out.n = 0;
    auto put = [&out](int at, double v) { out.at[out.n] = at, out.v[out.n++] = v; };
    if (c0 == c1) {
        put(c0, b - a);
        put(c0 + 1, -(b - a));
        return true;
    }
    const double first = static_cast<double>(c0 + 1) - a, last = b - static_cast<double>(c1);
    put(c0, first);
    if (c0 + 1 == c1) {
        put(c1, last - first);
    } else {
        put(c0 + 1, 1.0 - first);
        put(c1, last - 1.0);
    }
    put(c1 + 1, -last);
    return true;
}

class DiffGrid
{
public:
    DiffGrid(int w, int h)
        : w_(w), h_(h),
          d_(mappedZeros<double>(static_cast<size_t>(w + 1) * static_cast<size_t>(h + 1)))
    {
    }
    // Adds weight times the coverage of [x0, x1) x [y0, y1) (pixel units).
    void addRect(double x0, double x1, double y0, double y1, double weight = 1.0)
    {
        // Fast path: a rectangle inside one cell (most blocks when zoomed out) is one addition
        // to the cell's own value, kept apart from the differences.
        if (x0 >= 0 && y0 >= 0 && x1 <= w_ && y1 <= h_ && x1 > x0 && y1 > y0) {
            const auto cx = static_cast<int>(x0), cy = static_cast<int>(y0);
            if (x1 <= cx + 1 && y1 <= cy + 1) {
                if (cell_.empty())
                    cell_ = mappedZeros<double>(static_cast<size_t>(w_) * static_cast<size_t>(h_));
                cell_[static_cast<size_t>(cy) * static_cast<size_t>(w_) +
                      static_cast<size_t>(cx)] += weight * (x1 - x0) * (y1 - y0);
                return;
            }
        }
        // The grid's differences are the products of the axes' (a rectangle is separable):
        // at most 16 entries, most often 8 (a block alive over several time columns, within
        // one address row).
        AxisDiff dx, dy;
        if (!axisDiff(x0, x1, w_, dx) || !axisDiff(y0, y1, h_, dy)) return;
        for (int j = 0; j < dy.n; ++j) {
            const double wy = weight * dy.v[j];
            double* row = d_.data() + idx(0, dy.at[j]);
            for (int i = 0; i < dx.n; ++i)
                row[dx.at[i]] += wy * dx.v[i];
        }
    }
    // Resolves the differences into per-cell values (row-major, h rows of w).
    std::vector<double> resolve() const
    {
        std::vector<double> out(static_cast<size_t>(w_) * static_cast<size_t>(h_));
        walk([&out](size_t k, double v) { out[k] = v; });
        return out;
    }
    // The same values added to `out` (w * h cells).
    void addTo(std::vector<double>& out) const
    {
        walk([&out](size_t k, double v) { out[k] += v; });
    }
    // resolve() in the grid's own array, handed out: no new array (at the level-of-detail
    // grid's 2 M cells a fresh array's pages cost more than the arithmetic). Cell k is written
    // after the differences up to idx(x, y) >= k are read, so none is overwritten unread.
    std::vector<double> take() &&
    {
        walk([this](size_t k, double v) { d_[k] = v; });
        d_.resize(static_cast<size_t>(w_) * static_cast<size_t>(h_));
        cell_ = {};
        return std::move(d_);
    }

private:
    // f(k, value of cell k) for every cell in row-major order.
    template <typename F> void walk(F&& f) const
    {
        std::vector<double> col(static_cast<size_t>(w_) + 1, 0.0);
        for (int y = 0; y < h_; ++y) {
            double run = 0;
            for (int x = 0; x < w_; ++x) {
                col[static_cast<size_t>(x)] += d_[idx(x, y)];
                run += col[static_cast<size_t>(x)];
                const size_t k =
                    static_cast<size_t>(y) * static_cast<size_t>(w_) + static_cast<size_t>(x);
                f(k, cell_.empty() ? run : run + cell_[k]);
            }
        }
    }
    size_t idx(int x, int y) const
    {
        return static_cast<size_t>(y) * static_cast<size_t>(w_ + 1) + static_cast<size_t>(x);
    }
    int w_, h_;
    std::vector<double> d_;
    std::vector<double> cell_; // single-cell rectangles, allocated on first use
};

// Rows (or curve positions) whose centre falls in a separator.
inline std::vector<bool> separatorMask(const AddressLayout& L, double y0, double dy, int n)
{
    std::vector<bool> m(static_cast<size_t>(n), false);
    if (L.separators.empty()) return m;
    for (int r = 0; r < n; ++r) {
        const double c = y0 + (r + 0.5) * dy;
        // Separators are sorted: binary search the last one starting at or before c.
        auto it = std::upper_bound(L.separators.begin(), L.separators.end(), c,
                                   [](double v, const std::pair<uint64_t, uint64_t>& s) {
                                       return v < static_cast<double>(s.first);
                                   });
        if (it != L.separators.begin() && c < static_cast<double>(std::prev(it)->second))
            m[static_cast<size_t>(r)] = true;
    }
    return m;
}

inline constexpr double kEps = 1e-9;

// A cell's state from its allocated, pending-free and region shares (each clamped, 0 below
// kEps) and whether it lies in a separator (CellState).
inline CellState cellState(bool separator, double allocated, double pending, double reserved)
{
    return separator             ? CellState::Separator
           : pending > allocated ? CellState::Pending
           : allocated > 0       ? CellState::Allocated
           : reserved > 0        ? CellState::Free
                                 : CellState::Outside;
}

// Fills a heatmap's cells from the resolved occupancy and region grids, the separator rows and
// the pending frees' grid (null: none in view).
inline void finishHeatmap(HeatmapRaster& h, const std::vector<double>& o,
                          const std::vector<double>& g, const std::vector<bool>& sep,
                          const std::vector<double>* pending = nullptr)
{
    const size_t n = o.size();
    h.occupancy.resize(n);
    h.reservedFraction.resize(n);
    h.state.resize(n);
    for (int y = 0; y < h.height; ++y)
        for (int x = 0; x < h.width; ++x) {
            const size_t k =
                static_cast<size_t>(y) * static_cast<size_t>(h.width) + static_cast<size_t>(x);
            const double ov = o[k] < kEps ? 0.0 : std::min(o[k], 1.0);
            const double gv = g[k] < kEps ? 0.0 : std::min(g[k], 1.0);
            const double pv = !pending || (*pending)[k] < kEps ? 0.0 : (*pending)[k];
            h.occupancy[k] = static_cast<float>(ov);
            h.reservedFraction[k] = static_cast<float>(gv);
            h.state[k] = cellState(sep[static_cast<size_t>(y)], ov, pv, gv);
        }
}

} // namespace fs::analysis
