// How the compare window lines up its views: the plots' x axis (frame number when both sessions
// have frames, else time from the session's start, in one unit for both, as
// fs::analysis::compareSessions aligns its rows) and each heatmap's own time axis. Each side maps
// through its own frames, so zooming one heatmap shows the same frames (or the same offset from
// the start) on the other and on the plots. Coordinates only: no figure is computed here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fs::gui {

class CompareAxis
{
public:
    // x = time from `begin` in units of `divisor` ns (seconds by default).
    static CompareAxis byTime(int64_t begin, double divisor = 1e9)
    {
        CompareAxis a;
        a.begin_ = begin;
        a.divisor_ = divisor;
        return a;
    }
    // x = frame index; frame k is at x = k at its end time. Knots: (index, end time) in index
    // order. Falls back to seconds from `begin` when the ends do not increase with the index.
    static CompareAxis byFrame(std::vector<std::pair<int64_t, int64_t>> knots, int64_t begin,
                               double divisor = 1e9)
    {
        CompareAxis a = byTime(begin, divisor);
        std::sort(knots.begin(), knots.end());
        for (size_t i = 1; i < knots.size(); ++i)
            if (knots[i].second <= knots[i - 1].second || knots[i].first == knots[i - 1].first)
                return a;
        if (knots.size() < 2) return a;
        for (const auto& [x, t] : knots) {
            a.xs_.push_back(static_cast<double>(x));
            a.ts_.push_back(static_cast<double>(t));
        }
        return a;
    }
    bool frames() const { return !xs_.empty(); }

    double toX(int64_t t) const
    {
        if (xs_.empty()) return static_cast<double>(t - begin_) / divisor_;
        return interpolate(ts_, xs_, static_cast<double>(t));
    }
    int64_t toTime(double x) const
    {
        if (xs_.empty()) return begin_ + static_cast<int64_t>(x * divisor_);
        return static_cast<int64_t>(interpolate(xs_, ts_, x));
    }

private:
    // Piecewise linear through (from[i], to[i]), extended by the end segments' slopes.
    static double interpolate(const std::vector<double>& from, const std::vector<double>& to,
                              double v)
    {
        size_t i =
            static_cast<size_t>(std::upper_bound(from.begin(), from.end(), v) - from.begin());
        i = std::clamp<size_t>(i, 1, from.size() - 1);
        const double f = (v - from[i - 1]) / (from[i] - from[i - 1]);
        return to[i - 1] + f * (to[i] - to[i - 1]);
    }
    int64_t begin_ = 0;
    double divisor_ = 1e9;
    std::vector<double> xs_, ts_;
};

} // namespace fs::gui
