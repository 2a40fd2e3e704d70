#include "whatif_rank.h"

#include "core/analysis/parallel.h"
#include "core/format.h"

#include <algorithm>
#include <fmt/format.h>

namespace fs::alloc {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The large pool's requests (over 1 MiB) of every device, in ascending order: the sizes
// max_split_size_mb acts on.
std::vector<uint64_t> largeRequests(const Trace& t)
{
    std::vector<uint64_t> out;
    for (const DeviceTrace& d : t.devices)
        for (const Request& r : d.requests)
            if (r.kind == Request::Alloc && r.size > kMiB) out.push_back(r.size);
    std::sort(out.begin(), out.end());
    return out;
}

// Nearest-rank percentile of ascending, non-empty values.
uint64_t percentile(const std::vector<uint64_t>& v, int p)
{
    const size_t rank = (v.size() * static_cast<size_t>(p) + 99) / 100; // ceil(p% of n)
    return v[std::max<size_t>(rank, 1) - 1];
}

// The smallest power of two MiB at or above `bytes`, at least 32 MiB.
uint64_t limitMiB(uint64_t bytes)
{
    uint64_t mb = 32;
    while (mb * kMiB < bytes)
        mb *= 2;
    return mb;
}

std::string oomsText(int64_t n)
{
    return n == 0 ? "no OOMs" : n == 1 ? "1 OOM" : fmt::format("{} OOMs", n);
}

} // namespace

AlternativeSet defaultAlternatives(const Trace& trace, bool capacityKnown)
{
    AlternativeSet out;
    const Config& rec = trace.recorded;
    auto offer = [&](const std::string& label, const Config& c, std::string why) {
        if (c == rec) {
            out.skipped.push_back({label, "already the recorded setting"});
            return;
        }
        Alternative a;
        a.spec.label = label;
        a.spec.config = c;
        a.why = std::move(why);
        out.tried.push_back(std::move(a));
    };

    Config expandable = rec;
    expandable.expandableSegments = true;
    offer("expandable_segments:True", expandable, "a default alternative");

    Config roundup = rec;
    roundup.roundupDivisions.fill(4);
    offer("roundup_power2_divisions:4", roundup, "a default alternative");

    const std::vector<uint64_t> large = largeRequests(trace);
    if (large.empty()) {
        out.skipped.push_back({"max_split_size_mb", "no request over 1 MiB: it would change "
                                                    "nothing (it acts on the large pool only)"});
    } else {
        // A limit above the largest segment the run can make keeps nothing whole that was split:
        // segments are the request rounded up to 2 MiB (20 MiB under 10 MiB).
        const uint64_t largestSegment =
            std::max<uint64_t>(20 * kMiB, (large.back() + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB));
        uint64_t previous = 0;
        for (const auto& [p, name] : {std::pair{50, "median"}, std::pair{90, "90th percentile"}}) {
            const uint64_t size = percentile(large, p);
            const uint64_t mb = limitMiB(size);
            if (mb == previous) continue;
            previous = mb;
            const std::string label = fmt::format("max_split_size_mb:{}", mb);
            const std::string why =
                fmt::format("the {} of the {} requests over 1 MiB is {}; the next power of two "
                            "MiB, at least 32",
                            name, large.size(), humanBytes(size));
            if (mb * kMiB > largestSegment) {
                out.skipped.push_back(
                    {label, why + ": above every segment the run makes (the largest request is " +
                                humanBytes(large.back()) + "), so it would change nothing"});
                continue;
            }
            Config c = rec;
            c.maxSplitSize = mb * kMiB;
            offer(label, c, why);
        }
    }

    Config gc = rec;
    gc.gcThreshold = 0.6;
    if (capacityKnown)
        offer("garbage_collection_threshold:0.6", gc, "a default alternative");
    else
        out.skipped.push_back({"garbage_collection_threshold:0.6",
                               "no device capacity known (no OOM, no device size, no --capacity): "
                               "PyTorch applies it only under a memory limit, so it would "
                               "change nothing"});
    return out;
}

RankedRun rankedRun(const RunSpec& spec, const std::string& allocConf,
                    const std::vector<DeviceReplay>& replays)
{
    RankedRun row;
    row.label = spec.recorded || spec.label.empty() ? allocConf : spec.label;
    row.allocConf = allocConf;
    row.recorded = spec.recorded;
    row.policy = spec.policy;
    row.unmodelled = spec.config.unmodelled();
    for (const DeviceReplay& r : replays) {
        row.peakReserved += r.peakReserved;
        row.finalReserved += r.counters.reserved;
        row.segments += r.counters.liveSegments;
        row.cudaMallocs += r.counters.cudaMallocs;
        row.ooms += r.counters.ooms;
    }
    return row;
}

std::vector<RankedRun>
screenAlternatives(const Trace& trace, const std::vector<Alternative>& alternatives,
                   const std::function<ReplayOptions(const RunSpec&)>& optionsFor)
{
    std::vector<RankedRun> rows(alternatives.size());
    size_t requests = 0;
    for (const DeviceTrace& d : trace.devices)
        requests += d.requests.size();
    // The same parallel replays as the graphs' sharing what-if (graph_sharing.cpp): each reads
    // the trace, none changes it, and no sink means no session is written.
    const size_t chunks = analysis::parallelChunks(requests * alternatives.size(), 200'000);
    analysis::forEachChunk(alternatives.size(), chunks, [&](size_t, size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
            const Alternative& a = alternatives[i];
            const ReplayOptions ro = optionsFor(a.spec);
            rows[i] = rankedRun(a.spec, a.spec.config.describe(), replay(trace, ro));
            rows[i].why = a.why;
        }
    });
    return rows;
}

void rankRuns(std::vector<RankedRun>& rows)
{
    std::stable_sort(rows.begin(), rows.end(), [](const RankedRun& a, const RankedRun& b) {
        if (a.ooms != b.ooms) return a.ooms < b.ooms;
        return a.peakReserved < b.peakReserved;
    });
    const auto rec = std::find_if(rows.begin(), rows.end(), [](const RankedRun& r) {
        return r.recorded && r.policy == Policy::PyTorch;
    });
    if (rec == rows.end()) return;
    const auto base = static_cast<int64_t>(rec->peakReserved);
    for (RankedRun& r : rows)
        r.vsRecordedPeak = static_cast<int64_t>(r.peakReserved) - base;
}

void recommend(WhatIfResult& r)
{
    r.recommended = -1;
    const std::vector<RankedRun>& rows = r.ranking;
    const auto rec = std::find_if(rows.begin(), rows.end(), [](const RankedRun& x) {
        return x.recorded && x.policy == Policy::PyTorch;
    });
    if (rec == rows.end()) {
        r.recommendation.clear();
        return;
    }
    const size_t devices = r.runs.empty() ? 1 : r.runs.front().devices.size();
    const std::string peak =
        devices > 1 ? fmt::format("the peak reserved (summed over {} devices)", devices)
                    : std::string("the peak reserved");
    // Rows are ranked: anything above the recorded settings has fewer OOMs, or as many and a
    // lower peak.
    for (auto it = rows.begin(); it != rec; ++it) {
        if (it->policy != Policy::PyTorch) continue;
        r.recommended = static_cast<int>(it - rows.begin());
        const std::string was =
            fmt::format("{} would have been {} instead of {}", peak, humanBytes(it->peakReserved),
                        humanBytes(rec->peakReserved));
        r.recommendation =
            it->ooms < rec->ooms
                ? fmt::format("With {} there would have been {} instead of {}, and {} (model "
                              "figures).",
                              it->label, oomsText(it->ooms), rec->ooms, was)
                : fmt::format("With {} {} (model figures).", it->label, was);
        // Never a silent claim about a setting the model did not replay.
        if (!it->unmodelled.empty()) {
            std::string names;
            for (const UnmodelledSetting& u : it->unmodelled)
                names += (names.empty() ? "" : ", ") + u.setting;
            r.recommendation += fmt::format(" The model did not replay {} (the figures are "
                                            "without {}).",
                                            names, it->unmodelled.size() == 1 ? "it" : "them");
        }
        return;
    }
    const size_t tried = rows.size() - 1;
    const std::string figures =
        fmt::format("a peak reserved{} of {}{} (model figures)",
                    devices > 1 ? fmt::format(" (summed over {} devices)", devices) : "",
                    humanBytes(rec->peakReserved),
                    rec->ooms > 0 ? " and " + oomsText(rec->ooms) : std::string());
    r.recommendation =
        tried == 0 ? fmt::format("No alternative was replayed: the recorded settings ({}) give {}.",
                                 rec->allocConf, figures)
                   : fmt::format("None of the {} alternative{} tried does better than the recorded "
                                 "settings ({}), with {}.",
                                 tried, tried == 1 ? "" : "s", rec->allocConf, figures);
}

std::string rankedName(const RankedRun& row)
{
    std::string name = row.recorded ? "recorded: " + row.allocConf : row.allocConf;
    if (row.policy != Policy::PyTorch)
        name += fmt::format(" [{}, experimental]", policyName(row.policy));
    return name;
}

std::string fidelitySummary(const Fidelity& f)
{
    if (!f.complete)
        return "partial trace, so the model is not checked against the whole run: " +
               f.completeNote + "; figures start at the trace's first entry";
    if (f.reproduced)
        return "exact: under the recorded settings the model reproduces the real run at every "
               "segment event";
    uint64_t reserved = 0;
    int64_t events = 0;
    for (const DeviceFidelity& d : f.devices) {
        reserved = std::max(reserved, d.time.maxReservedDiff);
        events += d.time.timeDiffers;
    }
    if (reserved == 0 && events == 0)
        return "not exact: under the recorded settings the model reserves the same bytes at every "
               "segment event as the real run, but places some blocks elsewhere";
    return fmt::format("not exact: under the recorded settings the model's reserved bytes are up "
                       "to {} off the real run ({} segment event{} differ); differences that "
                       "small may be the model's error",
                       humanBytes(reserved), events, events == 1 ? "" : "s");
}

} // namespace fs::alloc
