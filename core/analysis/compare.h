// Comparison of two sessions (an actual run and its what-if replay, or two recordings):
// summary figures of each and per-frame (or per-instant) differences, all computed by the
// analysis engine (docs/whatif.md "Comparing two runs").
#pragma once

#include "summary.h"

#include "core/events.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fs::analysis {

class Engine;

struct SideSummary
{
    std::string path;
    std::string label; // the session's label meta (what-if runs have one), else ""
    bool synthetic = false;
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t frames = 0;
    int64_t frameMetrics = 0; // per-frame quality values
    // A what-if replay: its per-frame metrics (if any) are the recorded run's, copied.
    bool whatIf = false;
    int64_t collapses = 0;
    int64_t ooms = 0;
    // Collapses are known where frames carry quality metrics of their own (or there are no
    // frames); a replay cannot know how its frames would have looked.
    bool collapsesKnown() const { return !whatIf && (frames == 0 || frameMetrics > 0); }
    SummaryFigures figures; // Engine::trackSummary of the compared track
};

struct PointFigures
{
    // False where the session has no data (past its end, or a frame it lacks): a shorter run
    // ends where its data ends; the other figures are then 0.
    bool present = true;
    uint64_t reserved = 0;
    double fragmentation = 0;
    uint64_t largestFree = 0;
    bool collapsed = false; // frame rows: the frame belongs to a collapse
    int64_t ooms = 0;       // OOMs inside the frame (or since the previous sample)
};

struct CompareRow
{
    int64_t key = 0; // frame index, or ns from the session's start
    PointFigures a, b;
};

// B - A of the summaries.
struct SummaryDifference
{
    SummaryDelta figures;
    int64_t collapses = 0;
    int64_t ooms = 0;
};

struct Comparison
{
    SideSummary a, b;
    SummaryDifference difference;
    bool byFrame = false; // rows aligned by frame number, else by time from start
    std::vector<CompareRow> rows;
    std::vector<std::string> notes;
};

// Throws fs::SessionError on a bad file. `samples`: rows when aligning by time. engineA/B: the
// sessions already open (the GUI's scenes hold them), else each is opened here.
Comparison compareSessions(const std::string& a, const std::string& b, int samples = 100,
                           std::shared_ptr<const Engine> engineA = nullptr,
                           std::shared_ptr<const Engine> engineB = nullptr);

// ---- by call site ----

// Bytes one call site (Explorer::callSites, GroupBy::CallSite: the label of its innermost user
// frame) holds in each run at the compared instant.
struct CallSiteDelta
{
    std::string site;
    uint64_t aBytes = 0;
    uint64_t bBytes = 0;
    int64_t deltaBytes = 0; // b - a
};

// The live bytes of each session's default track grouped by call site, at each run's
// allocated-bytes peak (allocatedPeakTime; atEnd: at its end; a run that never allocates: its
// end). Rows: every site live in either, by deltaBytes descending (largest growth first), then
// by site; the rows of a side sum to its held bytes.
struct CallSiteComparison
{
    bool atEnd = false;
    int64_t aTime = kNoTime, bTime = kNoTime; // the instants compared
    uint64_t aBytes = 0, bBytes = 0;          // held at them
    bool stacksRecorded = false;              // either session has a stack
    std::vector<CallSiteDelta> rows;
};
CallSiteComparison compareCallSites(std::shared_ptr<const Engine> a,
                                    std::shared_ptr<const Engine> b, bool atEnd = false);

} // namespace fs::analysis
