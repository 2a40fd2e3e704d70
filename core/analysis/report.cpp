#include "report.h"

#include "engine.h"
#include "parallel.h"
#include "stage_timer.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

void check(const ReportOptions& o)
{
    if (o.cancel && o.cancel->load()) throw Cancelled{};
}

TrackReport trackReport(const Engine& e, const Track& t, const ReportOptions& o)
{
    StageTimer stage{"report track"};
    TrackReport r;
    const TrackSummary s = e.trackSummary(t.device, t.level);
    stage("summary");
    r.track = s.track;
    r.figures = s.figures;
    r.end = e.stateAt(t.device, t.level, e.timeEnd());
    if (!s.pools.empty()) {
        const std::vector<PoolState> ends = e.poolStatesAt(t.device, t.level, e.timeEnd());
        for (const PoolSummary& p : s.pools) {
            PoolReport pr;
            pr.pool = p.pool;
            pr.figures = p.figures;
            pr.end.device = t.device;
            pr.end.level = t.level;
            pr.end.time = e.timeEnd();
            for (const PoolState& ps : ends)
                if (ps.pool == p.pool) pr.end = ps.state;
            r.pools.push_back(std::move(pr));
        }
    }
    // The trends are fitted over timeline samples (a least-squares line needs points, not
    // instants): trendSamples evenly spaced over the session.
    TimelineOptions to;
    to.device = t.device;
    to.level = t.level;
    to.step =
        std::max<int64_t>(1, (e.timeEnd() - e.timeBegin()) / std::max<int64_t>(1, o.trendSamples));
    to.entropyWindowNs = o.entropyWindowNs;
    stage("end states");
    const Timeline tl = e.timeline(to);
    stage("timeline");
    r.trendSamples = static_cast<int64_t>(tl.time.size());
    r.ratioTrend = e.trend(tl, "fragmentation_ratio", kNoTime, kNoTime);
    r.entropyTrend = e.trend(tl, "event_entropy", kNoTime, kNoTime);
    r.bursts = e.burstSummary(t.device, t.level, o.burstGapNs);
    r.burstGapNs = o.burstGapNs;
    stage("bursts");
    const bool ordinal = e.summary().timeAxis == TimeAxis::Ordinal;
    const int64_t span = e.timeEnd() - e.timeBegin();
    if (ordinal)
        r.trendNotGiven = "no timestamps (a trend per hour needs a clock)";
    else if (span < kMinTrendSpanNs)
        r.trendNotGiven =
            fmt::format("the run spans {:.3g} s; a trend per hour needs at least {} min",
                        static_cast<double>(span) / 1e9, kMinTrendSpanNs / 60'000'000'000);
    else if (r.trendSamples < 3)
        r.trendNotGiven =
            fmt::format("{} timeline samples; a trend needs at least 3", r.trendSamples);
    if (ordinal)
        r.burstsNotGiven = "no timestamps (a burst is allocations less than a gap apart in time)";
    return r;
}

} // namespace

Report buildReport(const Engine& e, const std::string& file, const ReportOptions& o)
{
    StageTimer stage{"report"};
    Report r;
    const SessionSummary& sum = e.summary();
    r.file = file;
    r.synthetic = sum.synthetic;
    r.timeAxis = sum.timeAxis;
    r.timeBegin = e.timeBegin();
    r.timeEnd = e.timeEnd();
    r.events = sum.events;
    r.health = sum.health;
    r.caveats = e.caveats();
    for (const Track& t : e.tracks()) {
        check(o);
        r.tracks.push_back(trackReport(e, t, o));
    }
    stage("tracks");
    r.defaultTrack = e.defaultTrack(0);
    if (r.defaultTrack) {
        const int64_t peak = allocatedPeakTime(e, r.defaultTrack->device, r.defaultTrack->level);
        if (peak != kNoTime)
            r.peakCategories = categoriesAt(e, r.defaultTrack->device, r.defaultTrack->level, peak,
                                            o.categoryRules);
        stage("categories");
    }

    // Frames and collapses, under other rules when given (the GUI's editor).
    r.rules = o.rules ? *o.rules : e.rules();
    const bool otherRules = o.rules && *o.rules != e.rules();
    const std::vector<Collapse> collapses = otherRules ? e.collapsesWith(r.rules) : e.collapses();
    r.frames = e.frames();
    const RuleSplit split = e.splitRules(r.rules);
    r.commonRules = split.common;
    std::set<std::string> names;
    for (FrameInfo& f : r.frames) {
        for (const auto& [k, v] : f.metrics)
            names.insert(k);
        if (!otherRules) continue;
        f.breaksRule = breaksAnyRule(f.metrics, split.active);
        f.collapse = -1;
        for (size_t c = 0; c < collapses.size(); ++c)
            if (f.index >= collapses[c].firstFrame && f.index <= collapses[c].lastFrame)
                f.collapse = static_cast<int>(c);
    }
    r.frameMetricNames.assign(names.begin(), names.end());
    stage("frames");
    // Each collapse's report, over the cores: on a long run there are thousands.
    r.collapses.resize(collapses.size());
    forEachChunk(collapses.size(), parallelChunks(collapses.size(), 2),
                 [&](size_t, size_t c0, size_t c1) {
                     for (size_t c = c0; c < c1; ++c) {
                         check(o);
                         CollapseReport& rep = r.collapses[c];
                         rep = e.collapseReport(collapses[c], r.rules);
                         if (rep.precursors.size() > o.topPrecursors)
                             rep.precursors.resize(o.topPrecursors);
                     }
                 });
    stage("collapses");
    check(o);
    for (const Correlation& c : e.correlations())
        if (c.n >= 3) r.correlations.push_back(c);
    stage("correlations");
    r.ooms = e.ooms();
    stage("ooms");
    return r;
}

} // namespace fs::analysis
