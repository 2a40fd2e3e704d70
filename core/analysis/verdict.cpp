// The verdict on a collapse (docs/analysis.md "Verdict" and "Ranking"): every precursor row is
// measured by a per-frame figure, in its frame against the same figure over the healthy baseline
// frames (a robust z, stats.h), and stands out only when it departs more than the healthy frames
// vary among themselves. Rows that stand out are ranked by what they are to the collapse: the
// memory condition that explains the strongest change (pending frees, memory outside the
// allocator), the changes themselves (an OOM, a kernel fallback, a graph no longer replayed, a
// cache flush), then other allocator conditions; the rest follow. Nothing here knows a kernel,
// tag or simulator name.
#include "precursors.h"
#include "stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "core/format.h"
#include "core/store/kernels.h"

namespace fs::analysis {

namespace {

int severity(PrecursorKind k)
{
    // Among changes that stand out equally: a request that failed outright, then one the program
    // worked around (another kernel, no graph), then one served late (after a cache flush).
    switch (k) {
    case PrecursorKind::Oom:
        return 0;
    case PrecursorKind::KernelVariantShift:
    case PrecursorKind::GraphChange:
        return 1;
    case PrecursorKind::RegionReleased:
        return 2;
    default:
        return 3;
    }
}

// A long-lived block freed in [begin, until] and a block with the same tag (else the same log2
// size class) allocated there at another address: a static input that moved.
struct Moved
{
    int64_t fromId = -1, toId = -1;
    uint64_t from = 0, to = 0, size = 0;
    int64_t time = 0;
    std::string tag;
};
Moved movedInput(const Engine::Impl& d, uint32_t device, int64_t begin, int64_t until)
{
    Moved m;
    auto log2of = [](uint64_t v) {
        int k = 0;
        while (k < 63 && (uint64_t{2} << k) <= v)
            ++k;
        return k;
    };
    for (const TrackData& td : d.tracks) {
        if (td.device != device || td.level == Level::Driver) continue;
        std::vector<const Alloc*> gone;
        auto fi = std::lower_bound(td.byFree.begin(), td.byFree.end(), begin,
                                   [&](uint32_t i, int64_t t) { return td.allocs[i].freeNs < t; });
        for (; fi != td.byFree.end() && td.allocs[*fi].freeNs <= until; ++fi)
            if (td.allocs[*fi].allocNs < begin && td.allocs[*fi].size > 0)
                gone.push_back(&td.allocs[*fi]);
        if (gone.empty() || gone.size() > 64) continue; // a teardown, not one input moving
        auto ai = std::lower_bound(td.allocs.begin(), td.allocs.end(), begin,
                                   [](const Alloc& a, int64_t t) { return a.allocNs < t; });
        for (; ai != td.allocs.end() && ai->allocNs <= until; ++ai) {
            for (const Alloc* g : gone) {
                if (ai->address == g->address || std::abs(log2of(ai->size) - log2of(g->size)) > 1)
                    continue;
                const std::string at = d.tagOf(*ai);
                if (d.tagOf(*g) != at) continue;
                m.fromId = g->id;
                m.toId = ai->id;
                m.from = g->address;
                m.to = ai->address;
                m.size = ai->size;
                m.time = ai->allocNs;
                m.tag = at;
                return m;
            }
        }
    }
    return m;
}

// Whether memory outside the allocator is why a request of `request` bytes at t could not get a
// new segment: the device's free memory (capacity - reserved - outside) is short of it, and
// would not be without the outside memory. A counterfactual on the recorded figures, no
// statistics: it holds even when the healthy frames saw as much outside memory.
bool outsideMemoryExplains(const Engine& e, const Engine::Impl& d, uint32_t device, int64_t t,
                           uint64_t request, uint64_t outside)
{
    uint64_t capacity = 0;
    for (const DeviceInfo& dev : e.summary().devices)
        if (dev.id == device) capacity = dev.capacityBytes;
    if (capacity == 0 || request == 0 || outside == 0) return false;
    uint64_t reserved = 0;
    for (const TrackData& td : d.tracks)
        if (td.device == device && td.level != Level::Driver)
            reserved += e.stateAt(td.device, td.level, t).reservedBytes;
    const uint64_t used = reserved + outside;
    const uint64_t free = capacity > used ? capacity - used : 0;
    return request > free && request <= free + outside;
}

// The per-frame figure a row is measured by (larger is further from normal; the smallest
// largest free block is negated), and its name; empty for rows without one (kernel shifts carry
// their own, context has none). track: the row's index into d.tracks (-1: none).
std::pair<std::string, std::function<double(const FrameFigures&)>> rowFigure(const Precursor& p,
                                                                             int track)
{
    const uint32_t device = p.device;
    const auto ti = static_cast<size_t>(std::max(track, 0));
    auto perDevice = [device](auto member, auto value) {
        return [device, member, value](const FrameFigures& g) {
            const auto& m = g.*member;
            auto it = m.find(device);
            return it == m.end() ? 0.0 : value(it->second);
        };
    };
    switch (p.kind) {
    case PrecursorKind::Oom:
        return {"failed_request_bytes",
                perDevice(&FrameFigures::ooms, [](uint64_t v) { return static_cast<double>(v); })};
    case PrecursorKind::PendingFree:
        return {"pending_free_peak_bytes",
                perDevice(&FrameFigures::pending, [](const FrameFigures::Pending& v) {
                    return static_cast<double>(v.peak);
                })};
    case PrecursorKind::ExternalMemory:
        return {"external_peak_bytes",
                perDevice(&FrameFigures::external, [](const FrameFigures::External& v) {
                    return static_cast<double>(v.peak);
                })};
    case PrecursorKind::GraphChange:
        return {"graph_outside_share",
                perDevice(&FrameFigures::graph, [](const FrameFigures::Graph& v) {
                    return v.launches == 0
                               ? 0.0
                               : static_cast<double>(v.outside) / static_cast<double>(v.launches);
                })};
    default:
        break;
    }
    if (track < 0) return {};
    switch (p.kind) {
    case PrecursorKind::RegionReleased:
        return {"released_bytes",
                [ti](const FrameFigures& g) { return static_cast<double>(g.released[ti]); }};
    case PrecursorKind::RegionCreated:
        return {"created_bytes",
                [ti](const FrameFigures& g) { return static_cast<double>(g.created[ti]); }};
    case PrecursorKind::SplitLargest:
        // Lower is worse: measured on the negated figure, shown as it is.
        return {"largest_free_min_bytes",
                [ti](const FrameFigures& g) { return -g.minLargest[ti]; }};
    case PrecursorKind::AddressJump:
        return {"address_jumps",
                [ti](const FrameFigures& g) { return static_cast<double>(g.jumps[ti]); }};
    default:
        return {};
    }
}

// The figures and kernel calls of the run's healthy frames, kept for every collapse that asks
// for the same set.
std::shared_ptr<const RunFigures> runFigures(const Engine::Impl& d,
                                             const std::vector<const FrameInfo*>& frames)
{
    std::vector<std::tuple<int64_t, int64_t, int64_t>> key;
    for (const FrameInfo* f : frames)
        key.emplace_back(f->index, f->start, f->end);
    std::lock_guard lock(d.runFiguresMutex);
    if (!d.runFigures || d.runFiguresKey != key) {
        auto run = std::make_shared<RunFigures>();
        run->frames = frameFigures(d, frames, frames.size());
        const std::vector<int64_t> devices = d.kernelDeviceIds();
        for (const FrameInfo* f : frames) {
            auto& calls = run->kernelCalls.emplace_back();
            for (int64_t dev : devices)
                for (const store::LaunchRow& l : *d.launchesIn(dev, f->start, f->end))
                    ++calls[{static_cast<uint32_t>(dev), l.name}];
        }
        d.runFigures = std::move(run);
        d.runFiguresKey = std::move(key);
    }
    return d.runFigures;
}

// A kernel shift's figure in each of the run's frames: the share of the variant's calls among
// the calls of the variant and the usual one on the row's device (by name; the row's own share is
// over the families that shifted, which the variant and the usual one fill).
std::vector<double> variantShares(const Engine::Impl& d, const Precursor& p, const RunFigures& run)
{
    std::vector<double> out;
    if (!p.shift) return out;
    std::unordered_map<int64_t, int> which; // name id -> 1 variant, 2 usual, 0 other
    for (const auto& calls : run.kernelCalls) {
        int64_t variant = 0, usual = 0;
        for (auto it = calls.lower_bound({p.device, std::numeric_limits<int64_t>::min()});
             it != calls.end() && it->first.first == p.device; ++it) {
            auto [w, added] = which.try_emplace(it->first.second, 0);
            if (added) {
                const std::string t = d.text(it->first.second);
                w->second = t == p.shift->variant                            ? 1
                            : !p.shift->usual.empty() && t == p.shift->usual ? 2
                                                                             : 0;
            }
            variant += w->second == 1 ? it->second : 0;
            usual += w->second == 2 ? it->second : 0;
        }
        out.push_back(variant + usual
                          ? static_cast<double>(variant) / static_cast<double>(variant + usual)
                          : 0.0);
    }
    return out;
}

} // namespace

void setDeparture(Evidence& ev, const std::string& feature, const Departure& dep)
{
    ev.feature = feature;
    ev.value = dep.value;
    ev.healthyMedian = dep.median;
    ev.healthyScale = dep.scale;
    ev.z = dep.z;
    ev.threshold = dep.threshold;
    ev.floor = dep.floor;
    ev.standsOut = dep.standsOut && ev.allocatorLinked;
}

void measureRows(const Engine& e, const Engine::Impl& d, std::vector<Precursor>& rows,
                 const std::vector<const FrameInfo*>& healthy,
                 const std::vector<const FrameInfo*>& window,
                 const std::vector<const FrameInfo*>& runHealthy,
                 const std::function<double(int64_t)>& closeness)
{
    std::vector<const FrameInfo*> frames = healthy;
    frames.insert(frames.end(), window.begin(), window.end());
    const std::vector<FrameFigures> figs = frameFigures(d, frames, healthy.size());
    const size_t H = healthy.size();
    auto windowIndexOf = [&](int64_t t) -> int {
        for (size_t k = window.size(); k-- > 0;)
            if (t >= window[k]->start) return static_cast<int>(k);
        return -1; // before the window's first frame (the session's start)
    };
    auto trackOf = [&](uint32_t device, Level level) -> int {
        for (size_t t = 0; t < d.tracks.size(); ++t)
            if (d.tracks[t].device == device && d.tracks[t].level == level)
                return static_cast<int>(t);
        return -1;
    };
    // The departure of one figure in window frame k.
    auto depart = [&](size_t k, const std::function<double(const FrameFigures&)>& figure) {
        std::vector<double> base;
        for (size_t h = 0; h < H; ++h)
            base.push_back(figure(figs[h]));
        return departure(figure(figs[H + k]), base);
    };
    auto finish = [&](Precursor& p, int k) {
        p.evidence.closeness = closeness(p.time);
        p.evidence.frame = k >= 0 ? window[static_cast<size_t>(k)]->index : -1;
        p.evidence.healthyFrames = static_cast<int64_t>(H);
        p.score = evidenceScore(p.evidence);
    };

    auto deviceFigure = [](PrecursorKind kind, uint32_t device) {
        Precursor q;
        q.kind = kind;
        q.device = device;
        return rowFigure(q, -1).second;
    };
    // Rows of the conditions no event row carries: pending frees, memory outside the allocator,
    // kernels that left their graph. One per device and window frame whose figure is above the
    // healthy median.
    for (size_t k = 0; k < window.size(); ++k) {
        const FrameFigures& w = figs[H + k];
        for (const auto& [dev, pf] : w.pending) {
            const Departure dep = depart(k, deviceFigure(PrecursorKind::PendingFree, dev));
            if (!(dep.value > dep.median)) continue;
            Precursor p;
            p.kind = PrecursorKind::PendingFree;
            p.time = pf.at;
            p.device = dev;
            p.level = Level::Framework;
            p.size = pf.peak;
            p.count = pf.blocks;
            setDeparture(p.evidence, "pending_free_peak_bytes", dep);
            p.description = fmt::format(
                "{} freed block{} ({}, stream {}) held back while another stream still used them "
                "(longest wait {:.1f} ms); the healthy frames held {}",
                pf.blocks, pf.blocks == 1 ? "" : "s", humanBytes(pf.peak), pf.stream,
                static_cast<double>(pf.longestNs) / 1e6,
                humanBytes(static_cast<uint64_t>(std::max(0.0, dep.median))));
            finish(p, static_cast<int>(k));
            rows.push_back(std::move(p));
        }
        for (const auto& [dev, ex] : w.external) {
            const Departure dep = depart(k, deviceFigure(PrecursorKind::ExternalMemory, dev));
            if (!(dep.value > dep.median)) continue;
            Precursor p;
            p.kind = PrecursorKind::ExternalMemory;
            p.time = ex.lastGrowth != kNoTime && ex.lastGrowth >= window.front()->start
                         ? ex.lastGrowth
                         : window[k]->start;
            p.device = dev;
            p.level = Level::Driver;
            p.size = ex.peak;
            setDeparture(p.evidence, "external_peak_bytes", dep);
            p.description = fmt::format(
                "device memory outside the allocator reached {} (healthy frames: {}){}",
                humanBytes(ex.peak), humanBytes(static_cast<uint64_t>(std::max(0.0, dep.median))),
                ex.lastGrowth != kNoTime
                    ? fmt::format("; last grew by {}", humanBytes(ex.lastGrowthBytes))
                    : std::string());
            finish(p, static_cast<int>(k));
            rows.push_back(std::move(p));
        }
        for (const auto& [dev, gr] : w.graph) {
            const Departure dep = depart(k, deviceFigure(PrecursorKind::GraphChange, dev));
            if (!(dep.value > dep.median) || gr.firstOutside == kNoTime) continue;
            Precursor p;
            p.kind = PrecursorKind::GraphChange;
            p.time = gr.firstOutside;
            p.device = dev;
            p.level = Level::Driver;
            p.count = gr.outside;
            const Moved mv = movedInput(d, dev, window[k]->start, gr.firstOutside);
            p.evidence.allocatorLinked = mv.toId >= 0;
            setDeparture(p.evidence, "graph_outside_share", dep);
            p.description = fmt::format(
                "{} of {} launches of graph kernels ran outside the frame's graph{} (healthy "
                "frames: {:.1f} %)",
                gr.outside, gr.launches, gr.graphId >= 0 ? fmt::format(" {}", gr.graphId) : "",
                100 * dep.median);
            if (mv.toId >= 0) {
                p.allocationId = mv.toId;
                p.address = mv.to;
                p.size = mv.size;
                p.description +=
                    fmt::format("; before it, {} moved from {:#x} to {:#x}",
                                mv.tag.empty() ? humanBytes(mv.size) : mv.tag, mv.from, mv.to);
            } else {
                p.description += "; no input moved before it";
            }
            finish(p, static_cast<int>(k));
            rows.push_back(std::move(p));
        }
    }

    // Every other row: its figure in its frame.
    for (Precursor& p : rows) {
        if (!p.evidence.feature.empty()) { // measured above, or by kernelShifts
            if (p.kind == PrecursorKind::KernelVariantShift) finish(p, windowIndexOf(p.time));
        } else {
            // Address jumps compare the collapsed frame with the one before it.
            const int k = p.kind == PrecursorKind::AddressJump ? static_cast<int>(window.size()) - 1
                                                               : windowIndexOf(p.time);
            const int t = trackOf(p.device, p.level);
            const auto [feature, figure] = rowFigure(p, t);
            if (figure && k >= 0) {
                Departure dep = depart(static_cast<size_t>(k), figure);
                if (p.kind == PrecursorKind::SplitLargest) {
                    dep.value = -dep.value;
                    dep.median = -dep.median;
                    dep.floor = -dep.floor;
                }
                setDeparture(p.evidence, feature, dep);
            }
            finish(p, k);
        }
        // Region events of a driver-level track beside an allocator: memory outside it.
        bool outside = false;
        if (p.level == Level::Driver &&
            (p.kind == PrecursorKind::RegionCreated || p.kind == PrecursorKind::RegionReleased))
            for (const TrackData& td : d.tracks)
                outside = outside || (td.device == p.device && td.level != Level::Driver);
        if (outside) {
            p.role = PrecursorRole::Condition;
            p.mechanism = "external_memory";
            continue;
        }
        switch (p.kind) {
        case PrecursorKind::Oom:
            p.role = PrecursorRole::Effect;
            p.mechanism = "out_of_memory";
            break;
        case PrecursorKind::KernelVariantShift:
            p.role = PrecursorRole::Effect;
            p.mechanism = p.evidence.allocatorLinked ? "kernel_fallback" : "";
            break;
        case PrecursorKind::GraphChange:
            p.role = PrecursorRole::Effect;
            p.mechanism = p.evidence.allocatorLinked ? "graph_replay" : "";
            break;
        case PrecursorKind::RegionReleased:
            // A release does not tell a free-and-retry in the middle of a request from an
            // empty_cache() at a quiet moment: a condition, like a new segment.
            p.role = PrecursorRole::Condition;
            p.mechanism = "cache_flush";
            break;
        case PrecursorKind::PendingFree:
            p.role = PrecursorRole::Explanation;
            p.mechanism = "pending_free";
            break;
        case PrecursorKind::ExternalMemory:
            p.role = PrecursorRole::Explanation;
            p.mechanism = "external_memory";
            break;
        case PrecursorKind::RegionCreated:
            p.role = PrecursorRole::Condition;
            p.mechanism = "segment_growth";
            break;
        case PrecursorKind::SplitLargest:
            p.role = PrecursorRole::Condition;
            p.mechanism = "fragmentation";
            break;
        case PrecursorKind::AddressJump:
            p.role = PrecursorRole::Condition;
            p.mechanism = "address_jump";
            break;
        case PrecursorKind::GraphLaunch:
        case PrecursorKind::NewKernelVariant:
            p.role = PrecursorRole::Context;
            p.evidence.standsOut = false;
            break;
        }
    }

    // Base rates: each measured row against the same figure in every healthy frame of the run
    // (docs/analysis.md "Base rates"). Common ones that stand out say so and decide nothing
    // alone.
    std::shared_ptr<const RunFigures> run;
    for (Precursor& p : rows) {
        if (p.evidence.feature.empty()) continue;
        std::vector<double> values;
        double x = p.evidence.value;
        if (p.kind == PrecursorKind::KernelVariantShift) {
            if (!run) run = runFigures(d, runHealthy);
            values = variantShares(d, p, *run);
        } else {
            const auto figure = rowFigure(p, trackOf(p.device, p.level)).second;
            if (!figure) continue;
            if (!run) run = runFigures(d, runHealthy);
            for (const FrameFigures& g : run->frames)
                values.push_back(figure(g));
            if (p.kind == PrecursorKind::SplitLargest) x = -x; // the figure is negated
        }
        const BaseRate b = baseRate(x, values);
        Evidence& ev = p.evidence;
        ev.runHealthyFrames = b.frames;
        ev.runDeparted = b.departed;
        ev.baseRate = b.rate;
        ev.common = b.common && ev.standsOut;
        if (ev.standsOut && b.departed > 0)
            p.description +=
                fmt::format("; also in {:.0f} % of the run's healthy frames ({} of {})",
                            100 * b.rate, b.departed, b.frames);
    }

    // Memory outside the allocator that explains a failed request, whatever the healthy frames
    // held: the request of an OOM, or the usual request of a kernel that fell back.
    for (Precursor& x : rows) {
        if (x.kind != PrecursorKind::ExternalMemory || x.evidence.standsOut) continue;
        for (const Precursor& eff : rows) {
            if (!eff.evidence.standsOut || eff.evidence.common || eff.device != x.device ||
                eff.evidence.frame < x.evidence.frame)
                continue;
            uint64_t request = 0;
            if (eff.kind == PrecursorKind::Oom) request = eff.size;
            if (eff.kind == PrecursorKind::KernelVariantShift && eff.shift &&
                eff.shift->preceding.change != RequestChange::None)
                request = eff.shift->preceding.usualSize;
            const int k = windowIndexOf(eff.time);
            const uint64_t outside =
                k >= 0 && figs[H + static_cast<size_t>(k)].external.count(x.device)
                    ? figs[H + static_cast<size_t>(k)].external.at(x.device).peak
                    : 0;
            if (request && outsideMemoryExplains(e, d, x.device, eff.time, request, outside)) {
                x.evidence.explainsFailure = true;
                x.description += fmt::format("; without it the {} request at {} would have fit",
                                             humanBytes(request), precursorKindName(eff.kind));
                break;
            }
        }
    }
}

void rankAndJudge(std::vector<Precursor>& rows, CollapseReport& rep, int64_t healthyFrames,
                  const std::vector<int64_t>& healthyWindow)
{
    // A change or memory condition in an earlier window frame that broke no rule left that
    // frame healthy: it changed that frame's work or held its requests, not this one's (memory
    // outside the allocator still taken in the collapsed frame has that frame's own row).
    auto inHealthyFrame = [&](const Precursor& p) {
        return std::find(healthyWindow.begin(), healthyWindow.end(), p.evidence.frame) !=
               healthyWindow.end();
    };
    // Rows that stand out, rare in the run's healthy frames and not in a healthy frame, decide;
    // the others support.
    auto supportOnly = [&](const Precursor& p) { return p.evidence.common || inHealthyFrame(p); };
    // The change to explain: the strongest effect that stands out.
    auto decisive = [&](const Precursor& p) { return p.evidence.standsOut && !supportOnly(p); };
    const Precursor* effect = nullptr;
    for (const Precursor& p : rows) {
        if (!decisive(p) || p.role != PrecursorRole::Effect) continue;
        if (!effect || std::make_tuple(-p.score, severity(p.kind), p.time) <
                           std::make_tuple(-effect->score, severity(effect->kind), effect->time))
            effect = &p;
    }
    const Precursor chosen = effect ? *effect : Precursor{};
    auto explains = [&](const Precursor& p) {
        if (!effect || !(decisive(p) || p.evidence.explainsFailure) ||
            p.role != PrecursorRole::Explanation || p.device != chosen.device)
            return false;
        // Pending frees explain a change in the frame where they were held; memory outside the
        // allocator, one at or after the frame where it stood out (it stays taken).
        return p.kind == PrecursorKind::PendingFree ? p.evidence.frame == chosen.evidence.frame
                                                    : p.evidence.frame <= chosen.evidence.frame;
    };
    // Memory outside the allocator that explains no change: it takes headroom, but no request
    // failed or changed for want of it (pending frees alone still count: the stall they cause,
    // the host waiting for the other stream, leaves no row of its own).
    auto outsideAlone = [&](const Precursor& p) {
        return p.kind == PrecursorKind::ExternalMemory && decisive(p) && !explains(p);
    };
    // 0: explains the chosen change; 1: a change; 2: a memory condition explaining none; 3: an
    // allocator condition (new segments, splits, moves, releases), memory outside the allocator
    // that explains no change, or a change or memory condition common in the run's healthy
    // frames or in an earlier healthy frame; 4: does not stand out.
    auto group = [&](const Precursor& p) {
        if (explains(p)) return 0;
        if (!p.evidence.standsOut) return 4;
        if (supportOnly(p) || outsideAlone(p)) return 3;
        switch (p.role) {
        case PrecursorRole::Effect:
            return 1;
        case PrecursorRole::Explanation:
            return 2;
        default:
            return 3;
        }
    };
    std::vector<std::pair<int, size_t>> order;
    for (size_t i = 0; i < rows.size(); ++i)
        order.emplace_back(group(rows[i]), i);
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
        const Precursor& x = rows[a.second];
        const Precursor& y = rows[b.second];
        return std::make_tuple(a.first, -x.score, severity(x.kind), x.time) <
               std::make_tuple(b.first, -y.score, severity(y.kind), y.time);
    });
    std::vector<Precursor> ranked;
    ranked.reserve(rows.size());
    for (const auto& [g, i] : order)
        ranked.push_back(std::move(rows[i]));
    rows = std::move(ranked);

    // Allocator-related takes a change that reaches the frame's computation or a memory condition
    // that holds requests back; allocator conditions alone (a split, new segments) cannot change
    // a correct program's numbers (docs/analysis.md "Verdict"), so they only support it.
    Verdict& v = rep.verdict;
    v = {};
    v.healthyFrames = healthyFrames;
    v.allocatorRelated = !order.empty() && order[0].first <= 2;
    int64_t conditions = 0;
    // The strongest change or memory condition that stood out but decides nothing: common in the
    // run's healthy frames, or in an earlier frame that stayed healthy.
    const Precursor* common = nullptr;
    for (size_t i = 0; i < order.size() && order[i].first <= 3; ++i) {
        conditions += order[i].first == 3;
        const bool isCommon =
            (supportOnly(rows[i]) || outsideAlone(rows[i])) &&
            (rows[i].role == PrecursorRole::Effect || rows[i].role == PrecursorRole::Explanation);
        if (isCommon && !common) common = &rows[i];
        // Not allocator-related: the common rows are still shown under the verdict, as such.
        if ((v.allocatorRelated || isCommon) && v.evidence.size() < 5) v.evidence.push_back(i);
    }
    if (v.allocatorRelated) {
        v.mechanism = rows[0].mechanism;
        v.headline = "allocator-related: " + mechanismText(v.mechanism);
        if (effect && rows[0].role == PrecursorRole::Explanation &&
            chosen.mechanism != v.mechanism && !chosen.mechanism.empty())
            v.headline += ", then " + mechanismText(chosen.mechanism);
    } else if (healthyFrames < kMinHealthyFrames) {
        v.headline = fmt::format("no allocator precursor stands out: {} healthy frame{} before "
                                 "the window, too few to tell the usual spread",
                                 healthyFrames, healthyFrames == 1 ? "" : "s");
    } else if (common) {
        const Evidence& c = common->evidence;
        const std::string what = common->mechanism.empty()
                                     ? std::string(precursorKindName(common->kind))
                                     : mechanismText(common->mechanism);
        v.headline =
            !supportOnly(*common)
                ? fmt::format("no allocator precursor stands out by itself: {} ({}), but no "
                              "request failed or changed for want of it",
                              what, c.feature)
            : c.common
                ? fmt::format("no allocator precursor stands out by itself: {} ({}) departed "
                              "as far in {:.0f} % of the run's healthy frames ({} of {}), "
                              "where nothing collapsed: too common to explain the collapse "
                              "alone",
                              what, c.feature, 100 * c.baseRate, c.runDeparted, c.runHealthyFrames)
                : fmt::format("no allocator precursor stands out by itself: {} ({}) happened "
                              "in frame {}, which broke no rule: it did not change the "
                              "collapsed frame's work",
                              what, c.feature, c.frame);
    } else if (conditions > 0) {
        v.headline = fmt::format(
            "no allocator precursor stands out: the allocator's state departed from the {} "
            "healthy frames ({} row{}), but no request failed, no kernel or graph changed and no "
            "memory was held back",
            healthyFrames, conditions, conditions == 1 ? "" : "s");
    } else {
        v.headline = fmt::format("no allocator precursor stands out: quality dropped without a "
                                 "memory event beyond what the {} healthy frames show",
                                 healthyFrames);
    }
}

} // namespace fs::analysis
