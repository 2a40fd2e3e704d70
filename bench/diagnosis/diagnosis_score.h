// bench_diagnosis's scoring, shared with the default-suite test tst_diagnosis: the simulator's
// ground truth of a collapse, whether a precursor row names that cause, the baseline orderings
// measured on the same rows, the tallies of a run over seeds and its goals.
#pragma once

#include "capture/sim/simulator.h"
#include "core/analysis/types.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs::bench {

// The mechanisms the mixed and realistic simulator records (docs/simulator.md "Mechanisms"), in
// table order.
const std::vector<std::string>& allocatorMechanisms(); // every one but "content"
// The verdict mechanism (engine name) that matches a truth mechanism ("" when none does).
std::string engineMechanism(const std::string& truth);

// What the simulator recorded about a collapse's first frame (read from the session, as any
// user could: the sim_truth_* tables, which the analysis never reads).
struct Truth
{
    std::string mechanism; // the cause with the smallest quality factor below 1; "" when none
    int64_t causeFrame = -1;
    // Further recorded causes of the same frame with a factor below 1 (a content-caused collapse
    // with an allocator mechanism beside it is not scored as content).
    std::vector<std::string> otherCauses;
    // Allocator mechanisms that occurred in the frame without lowering its score (factor 1: the
    // realistic mode's base-rate occurrences).
    std::vector<std::string> benign;
    std::set<std::string> causalKernels; // fallback kernels the quality model counts
    int64_t ooms = 0;
};
Truth readTruth(const std::string& path, int64_t frame);

// Whether row p names the recorded cause of the collapse whose first frame is f.
bool namesCause(const analysis::Precursor& p, const Truth& t, const analysis::FrameInfo& f);
// 1-based rank of the first row naming the cause; 0 when none does.
int rankOf(const std::vector<analysis::Precursor>& rows, const Truth& t,
           const analysis::FrameInfo& f);

// Baselines: the same rows in another order (ties by time, never by the engine's ranking).
struct Baseline
{
    const char* name;
    const char* what;
    std::vector<analysis::Precursor> (*order)(std::vector<analysis::Precursor> rows);
};
const std::vector<Baseline>& baselines();

// ---- a run over seeds ------------------------------------------------------------------------

struct DiagnosisOptions
{
    std::vector<uint64_t> seeds;
    int64_t frames = 48;
    int64_t steps = 20;
    int64_t lookback = 2;
    sim::MechanismSet mechanisms = sim::MechanismSet::Mixed;
    std::string dir;   // where the sessions are written
    bool keep = false; // keep them
    // One line per collapse (nullptr: none).
    std::function<void(const std::string&)> verbose;
};

struct Tally
{
    int64_t collapses = 0, top1 = 0, top3 = 0, verdictRight = 0;
    int64_t rankedFirst = 0; // the cause's row first, whatever the verdict
    std::map<std::string, int64_t> baselineTop1;
    double share(int64_t k) const
    {
        return collapses ? static_cast<double>(k) / static_cast<double>(collapses) : 0.0;
    }
};

struct DiagnosisResult
{
    std::map<std::string, Tally> byMechanism; // every allocator mechanism, even with 0 collapses
    Tally all;                                // every allocator-caused collapse
    int64_t content = 0, contentBlamed = 0;   // content-caused collapses, called allocator
    int64_t confounded = 0, confoundedBlamed = 0; // ... of them with a benign allocator event
    int64_t calledAllocator = 0, calledRight = 0; // scored collapses called allocator-related,
                                                  // ... whose truth is an allocator mechanism
    int64_t recalled = 0; // allocator-caused collapses called allocator-related
    // Collapses that cannot be scored: no recorded cause (or only dropped steps without a
    // trigger), or content and an allocator mechanism both lowering the frame.
    int64_t ambiguous = 0, noCause = 0, contentAndAllocator = 0;
    int64_t noReport = 0; // allocator-caused collapses without a report (counted as misses)
    // The same verdict counts had a row that stands out been enough whether common or not (what
    // the base-rate rule changes; docs/analysis.md "Base rates"): collapses with such a change
    // or explanation row, by truth.
    struct
    {
        int64_t called = 0, right = 0, contentBlamed = 0, confoundedBlamed = 0;
    } ignoringBaseRates;
    double queryMs = 0;
    int64_t queries = 0;

    double precision() const;
    double recall() const;
    double falseBlame() const;
    double falseBlameConfounded() const;
    // The best baseline's top-1 over every allocator-caused collapse, and its name.
    std::pair<std::string, double> bestBaseline() const;
};

// Simulates every seed, asks the engine for each collapse's verdict and rows and scores them.
DiagnosisResult runDiagnosis(const DiagnosisOptions& o);

// The goals (docs/analysis.md "Measured figures"): per mechanism top-1 >= 85 % and top-3 >= 95 %,
// verdict precision >= 90 %, false blame on confounded content-caused collapses <= 10 %, top-1
// over every mechanism 20 points above the best baseline.
constexpr double kTop1Goal = 0.85;
constexpr double kTop3Goal = 0.95;
constexpr double kPrecisionGoal = 0.90;
constexpr double kConfoundedBlameGoal = 0.10;
constexpr double kBaselineMargin = 0.20;
// The goals missed, one sentence each (empty: every goal met; no allocator-caused collapse at
// all is a miss: nothing was measured).
std::vector<std::string> missedGoals(const DiagnosisResult& r);
// The one JSON object of `bench_diagnosis --json`.
std::string diagnosisJson(const DiagnosisResult& r);

} // namespace fs::bench
