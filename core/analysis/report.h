// The report of a session (`fragscope report`, the GUI's report window): one value computed from
// an open engine, serialised as text and JSON by report_format.h. Adding a section is a member
// here, its computation in buildReport() and one writer per format in report_format.cpp.
#pragma once

#include "categories.h"
#include "graphs.h"
#include "summary.h"
#include "types.h"

#include "core/store/session.h"

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace fs::analysis {

class Engine;

struct ReportOptions
{
    size_t topPrecursors = 5; // per collapse
    int64_t burstGapNs = 5'000'000;
    int64_t entropyWindowNs = 300'000'000'000; // of the event-size entropy trend
    int64_t trendSamples = 2000;               // timeline samples the trends are fitted over
    // Collapse rules other than the engine's (the GUI's rules editor); empty: the engine's.
    std::optional<std::vector<CollapseRule>> rules;
    std::vector<CategoryRule> categoryRules;   // the user's, before the defaults (categories.h)
    const std::atomic<bool>* cancel = nullptr; // raised -> buildReport throws Cancelled
};

// One pool of a track that has more than one (PyTorch's private pools).
struct PoolReport
{
    uint64_t pool = 0;
    SummaryFigures figures;
    State end; // at the session's end (zeros when the pool has nothing then)
};

struct TrackReport
{
    Track track;
    SummaryFigures figures;        // Engine::trackSummary
    std::vector<PoolReport> pools; // empty unless the track has more than one pool
    State end;                     // at the session's end
    Trend ratioTrend, entropyTrend;
    int64_t trendSamples = 0;
    BurstSummary bursts;
    int64_t burstGapNs = 0;
    // Why a figure is not given, empty when it is (docs/analysis.md "Statistics only where they
    // mean something"): a trend per hour needs a clock and kMinTrendSpanNs of run, bursts need
    // timestamps.
    std::string trendNotGiven;
    std::string burstsNotGiven;
};

// The shortest run over which a trend per hour is fitted: over less, the slope extrapolates
// seconds to an hour.
constexpr int64_t kMinTrendSpanNs = 600'000'000'000; // 10 min

struct Report
{
    std::string file; // as the caller named it
    bool synthetic = false;
    TimeAxis timeAxis = TimeAxis::Nanoseconds;
    int64_t timeBegin = 0;
    int64_t timeEnd = 0;
    int64_t events = 0;
    HealthSummary health;
    Caveats caveats;
    std::vector<TrackReport> tracks;
    std::optional<Track> defaultTrack; // the per-frame figures and correlations are its
    std::vector<FrameInfo> frames;     // collapse and breaksRule under `rules`
    std::vector<std::string> frameMetricNames;
    std::vector<CollapseRule> rules;
    std::vector<CommonRule> commonRules;   // rules that fire on most frames: no collapse
    std::vector<CollapseReport> collapses; // top precursors only
    std::vector<Correlation> correlations; // n >= 3
    std::vector<OomDiagnosis> ooms;
    // The default track's live blocks by memory category at its allocated-bytes peak (the
    // first instant of SummaryFigures::peakAllocatedBytes, of the outside peak without
    // regions); none without a default track or a peak.
    std::optional<CategoryBreakdown> peakCategories;
    // `fragscope graphs` in short; its sharing what-if needs the allocator model, so
    // alloc::addGraphsSummary fills it (the CLI and the GUI both call it).
    std::optional<GraphsSummary> graphs;
    bool ordinal() const { return timeAxis == TimeAxis::Ordinal; }
};

// Computes the report of an open engine. `file`: the name the output shows. On an engine a
// LiveEngine refreshes, hold its readLock() around the call.
Report buildReport(const Engine& e, const std::string& file, const ReportOptions& o = {});

} // namespace fs::analysis
