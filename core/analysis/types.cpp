#include "types.h"

#include "video_frames.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace fs::analysis {

std::string CollapseRule::describe() const
{
    return fmt::format("{} {} {}", metric, compare == Compare::Less ? "<" : ">", threshold);
}

std::vector<CollapseRule> defaultCollapseRules()
{
    return {
        {"coherence_score", Compare::Less, 0.05},
        {"id_match_rate", Compare::Less, 0.65},
        {"clip_entropy_bits", Compare::Greater, 2.95},
        // A break in the generated video itself (`metrics compute`): six robust standard
        // deviations above the run's usual warp error. No other source writes this metric.
        {"warp_error_z", Compare::Greater, 6.0},
    };
}

std::string CommonRule::describe() const
{
    return fmt::format("{}: not a break: fires on {} of {} frames", rule.describe(), fires, frames);
}

bool isVideoMetric(const std::string& metric)
{
    const std::vector<std::string> names = videoMetricNames();
    return std::find(names.begin(), names.end(), metric) != names.end();
}

std::string CommonRule::explain() const
{
    return "rule " + describe() +
           " (a video rule that fires on most frames describes the video, not a break in it: it "
           "makes no collapse)";
}

RuleSplit splitCommonRules(const std::vector<CollapseRule>& rules,
                           const std::vector<FrameInfo>& frames)
{
    RuleSplit out;
    for (const CollapseRule& rule : rules) {
        int64_t carry = 0, fires = 0;
        for (const FrameInfo& f : frames) {
            auto it = f.metrics.find(rule.metric);
            if (it == f.metrics.end()) continue;
            ++carry;
            fires += rule.broken(it->second);
        }
        if (isVideoMetric(rule.metric) && carry >= kCommonRuleMinFrames && 2 * fires > carry)
            out.common.push_back({rule, fires, carry});
        else
            out.active.push_back(rule);
    }
    return out;
}

bool breaksAnyRule(const std::map<std::string, double>& metrics,
                   const std::vector<CollapseRule>& rules)
{
    for (const CollapseRule& rule : rules) {
        auto it = metrics.find(rule.metric);
        if (it != metrics.end() && rule.broken(it->second)) return true;
    }
    return false;
}

const char* precursorKindName(PrecursorKind k)
{
    switch (k) {
    case PrecursorKind::Oom:
        return "oom";
    case PrecursorKind::NewKernelVariant:
        return "new_kernel_variant";
    case PrecursorKind::RegionCreated:
        return "region_created";
    case PrecursorKind::RegionReleased:
        return "region_released";
    case PrecursorKind::SplitLargest:
        return "split_largest_fragment";
    case PrecursorKind::AddressJump:
        return "address_jump";
    case PrecursorKind::GraphLaunch:
        return "graph_launch";
    case PrecursorKind::KernelVariantShift:
        return "kernel_variant_shift";
    case PrecursorKind::PendingFree:
        return "pending_free";
    case PrecursorKind::ExternalMemory:
        return "external_memory";
    case PrecursorKind::GraphChange:
        return "graph_change";
    }
    return "unknown";
}

const char* precursorRoleName(PrecursorRole r)
{
    switch (r) {
    case PrecursorRole::Effect:
        return "effect";
    case PrecursorRole::Explanation:
        return "explanation";
    case PrecursorRole::Condition:
        return "condition";
    case PrecursorRole::Context:
        return "context";
    }
    return "unknown";
}

std::string mechanismText(const std::string& m)
{
    static const std::pair<const char*, const char*> texts[] = {
        {"kernel_fallback", "kernel fallback after failed workspace allocation"},
        {"out_of_memory", "out of memory: a request failed after the allocator freed its cache"},
        {"graph_replay", "captured graph re-captured or launched eagerly after its input moved"},
        {"pending_free",
         "pending frees (record_stream) held memory until another stream caught up"},
        {"external_memory", "memory outside the allocator grew and left too little headroom"},
        {"cache_flush", "the allocator released cached segments to serve a request (stalls)"},
        {"segment_growth", "the allocator reserved new segments"},
        {"fragmentation", "the largest free block shrank (fragmentation)"},
        {"address_jump", "tensors moved in the address space"},
    };
    for (const auto& [k, v] : texts)
        if (m == k) return v;
    return m;
}

const char* requestChangeName(RequestChange c)
{
    switch (c) {
    case RequestChange::None:
        return "none";
    case RequestChange::Failed:
        return "failed";
    case RequestChange::Shrank:
        return "shrank";
    case RequestChange::Moved:
        return "moved";
    }
    return "unknown";
}

double evidenceScore(const Evidence& e)
{
    // m = z / threshold measures the departure in units of what the healthy frames reach among
    // themselves; m / (1 + m) maps it to [0, 1) (1/2 at the threshold, 1 for a change the healthy
    // frames never showed), and closeness weighs by frames before the onset.
    if (!(e.threshold > 0) || std::isinf(e.threshold) || e.z <= 0) return 0;
    if (std::isinf(e.z)) return e.closeness;
    const double m = e.z / e.threshold;
    return e.closeness * m / (1 + m);
}

double wilsonLower(int64_t k, int64_t n)
{
    if (n <= 0) return 0;
    constexpr double z = 1.959964; // 95 %, two-sided
    const double nn = static_cast<double>(n);
    const double p = static_cast<double>(k) / nn;
    const double z2 = z * z;
    const double centre = p + z2 / (2 * nn);
    const double spread = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    return std::max(0.0, (centre - spread) / (1 + z2 / nn));
}

bool AddressLayout::toCompact(uint64_t addr, uint64_t& out) const
{
    // ranges are in address order: the last range starting at or before addr.
    const auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                                     [](uint64_t v, const Range& r) { return v < r.addrBegin; });
    if (it == ranges.begin()) return false;
    const Range& r = *std::prev(it);
    if (addr >= r.addrEnd) return false;
    out = r.compactBegin + (addr - r.addrBegin);
    return true;
}

bool AddressLayout::toAddress(uint64_t compact, uint64_t& out) const
{
    const auto it = std::upper_bound(ranges.begin(), ranges.end(), compact,
                                     [](uint64_t v, const Range& r) { return v < r.compactBegin; });
    if (it == ranges.begin()) return false;
    const Range& r = *std::prev(it);
    if (compact >= r.compactBegin + (r.addrEnd - r.addrBegin)) return false;
    out = r.addrBegin + (compact - r.compactBegin);
    return true;
}

// Hilbert curve conversion (the classic rotate-and-flip walk over quadrants).
void hilbertXY(int side, uint64_t d, int& x, int& y)
{
    uint64_t t = d;
    x = y = 0;
    for (int s = 1; s < side; s *= 2) {
        const int rx = static_cast<int>(1 & (t / 2));
        const int ry = static_cast<int>(1 & (t ^ static_cast<uint64_t>(rx)));
        if (ry == 0) {
            if (rx == 1) {
                x = s - 1 - x;
                y = s - 1 - y;
            }
            std::swap(x, y);
        }
        x += s * rx;
        y += s * ry;
        t /= 4;
    }
}

uint64_t hilbertD(int side, int x, int y)
{
    uint64_t d = 0;
    for (int s = side / 2; s > 0; s /= 2) {
        const int rx = (x & s) > 0 ? 1 : 0;
        const int ry = (y & s) > 0 ? 1 : 0;
        d += static_cast<uint64_t>(s) * static_cast<uint64_t>(s) *
             static_cast<uint64_t>((3 * rx) ^ ry);
        if (ry == 0) {
            if (rx == 1) {
                x = side - 1 - x;
                y = side - 1 - y;
            }
            std::swap(x, y);
        }
    }
    return d;
}

} // namespace fs::analysis
