// The causal check `fragscope ab` (docs/ab.md): the same generation run again with only the
// allocator changed, every run's video scored with the video metrics, every frame compared with
// the baseline's same frame, and a verdict for every collapse of the baseline. Plain C++ over
// numbers: the runs are made by the CLI, the pixels measured in core/video (OpenCV); every figure
// a user sees (noise floor, spreads, verdicts, the text) is decided here, once, for the CLI and
// the GUI.
#pragma once

#include "core/analysis/stats.h"
#include "core/analysis/types.h"
#include "core/analysis/video_frames.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fs::study {

// study.json (docs/json.md "study.json"): bumped when a field is renamed, removed or changes
// meaning.
inline constexpr int kStudySchemaVersion = 1;
inline constexpr const char* kStudyFormat = "fragscope-study";
inline constexpr const char* kStudyFile = "study.json";

// One frame of a run against the baseline's same frame: mean squared error over B, G, R and
// pixels (0..255), its PSNR (+inf for identical frames) and the SSIM of the lumas (the same SSIM
// as `ssim_prev`, docs/video.md).
struct FrameDistance
{
    int64_t frame = 0;
    double mse = 0;
    double psnrDb = 0;
    double ssim = 1;
};

struct Run
{
    int index = 1;      // 1-based within its arm
    std::string folder; // relative to the study folder ("baseline-1"); {run} in the command
    int exitStatus = 0; // as a shell reports it (128 + N when killed by signal N)
    bool ran = false;   // the command ran to its end (false: interrupted, or never started)
    double seconds = 0; // wall-clock time of the command
    std::string video;  // the video measured (absolute), empty when none was found
    int64_t frames = 0;
    std::string error; // why the run cannot be compared; empty when it can
    std::vector<std::string> stderrTail;
    std::string session;    // recorded session (--record), relative; empty when none
    std::string thumbnails; // folder of its frames' thumbnails (NNNN.jpg), relative; empty: none
    std::vector<analysis::VideoFrameScore> scores; // frames 1.., as `metrics compute` scores them
    std::vector<FrameDistance> vsBaseline;         // frames 0.. (empty for the baseline itself)
    bool usable() const { return ran && error.empty() && !scores.empty(); }
};

enum class Role : uint8_t {
    Baseline, // the command as given
    Repeat,   // the same command again: the run-to-run noise
    Changed,  // an arm that changes the allocator (the defaults and --arm)
};
const char* roleName(Role r);

struct Arm
{
    std::string name;
    Role role = Role::Changed;
    std::vector<std::pair<std::string, std::string>> env; // variables set for its runs
    std::vector<Run> runs;
};

// How far two runs of the unchanged command differ on frames no collapse touches: the distances
// of every repeat run (and every baseline run after the first) to the first baseline run.
struct NoiseFloor
{
    int64_t samples = 0; // frames measured
    double mseMax = 0;   // the largest squared error among them
    double psnrMinDb = 0;
    double ssimMin = 1;
    bool identical() const { return samples > 0 && mseMax == 0; }
};

// A metric of an arm's run at a collapse, against the run's own healthy frames.
struct SpreadCheck
{
    std::string metric;
    double value = 0;  // the worst value over the collapse's frames
    double median = 0; // of the healthy frames
    double z = 0;      // robust z, the scale floored as the metric's own z-score
    double limit = 0;  // the z beyond which it departs (stats.h departure's threshold)
    bool outside = false;
};

// One run of an arm at one collapse of the baseline.
struct RunAtCollapse
{
    std::string folder;
    bool bad = false;         // a frame of the collapse breaks a collapse rule in this run
    bool inSpread = false;    // every video metric within the run's healthy spread
    bool beyondNoise = false; // further from the baseline's frame than the repeat's noise
    double psnrDb = 0;        // the smallest over the collapse's frames (vs the baseline)
    double ssim = 1;
    std::vector<SpreadCheck> spread;
    std::vector<std::string> brokenRules; // with values, at the first broken frame
    bool normal() const { return !bad && inSpread && beyondNoise; }
};

struct ArmAtCollapse
{
    std::string arm;
    Role role = Role::Changed;
    std::vector<RunAtCollapse> runs; // its usable runs
    bool bad() const;                // every run bad (false without runs)
    bool normal() const;             // every run back to normal (false without runs)
};

enum class Verdict : uint8_t {
    FollowsAllocator, // bad in baseline and repeat, back to normal under an allocator arm
    NotAllocator,     // bad under every allocator arm
    NotReproducible,  // not bad in the repeat: the allocator cannot be judged
    Undetermined,     // the study cannot decide (no repeat, no arm, mixed results)
};
const char* verdictName(Verdict v); // "follows_allocator", …

struct CollapseJudgement
{
    int64_t firstFrame = 0;
    int64_t lastFrame = 0;
    std::vector<std::string> brokenRules; // in the baseline, at its first frame
    Verdict verdict = Verdict::Undetermined;
    std::string reason;              // one sentence with the figures behind the verdict
    std::vector<ArmAtCollapse> arms; // every arm but the baseline, in study order
    std::string sessionVerdict;      // the recorded baseline session's own verdict (--record)
    std::vector<std::string> sessionEvidence;
};

struct Study
{
    std::string fragscopeVersion;
    std::string created; // ISO 8601, UTC
    std::vector<std::string> command;
    std::string video; // --video as given ({run} unreplaced); empty: found in the run folder
    int repeat = 1;
    bool recorded = false;
    bool interrupted = false;
    std::vector<analysis::CollapseRule> rules; // the collapse rules the runs were judged by
    std::vector<Arm> arms;                     // baseline first, then repeat, then the others
    // Filled by judge():
    NoiseFloor noise;
    std::vector<analysis::CommonRule> commonRules; // rules that fire on most baseline frames
    std::vector<CollapseJudgement> collapses;
    std::string problem; // why nothing could be judged (no usable baseline), empty otherwise

    const Arm* arm(const std::string& name) const;
    const Run* baseline() const; // the first baseline run when usable, else null
};

// Frames of a run that break one of the rules (frame 1..), with the broken rules' text.
std::map<int64_t, std::vector<std::string>>
brokenFrames(const Run& r, const std::vector<analysis::CollapseRule>&);

// Judges every collapse of the baseline (docs/ab.md "Verdicts"): fills noise, commonRules,
// collapses and problem. Deterministic; reads nothing but the study.
void judge(Study& s);

// The text summary `fragscope ab` prints (and `ab --report`).
std::string studyText(const Study& s);
// A run at a collapse in a few words: its first broken rule, "normal", or why it is neither.
std::string runStateText(const RunAtCollapse& r);
// "noise floor: 14 healthy frames of the repeat identical to the baseline's", …
std::string noiseFloorText(const NoiseFloor& n);
// A PSNR as the study shows it: "identical" for +inf, else "12.3".
std::string psnrText(double db);
// The run `folder` at collapse c (null when it was not judged there: the first baseline run, a
// failed run).
const RunAtCollapse* runAt(const CollapseJudgement& c, const std::string& folder);

// study.json. write: atomically (a temporary file renamed); throws std::runtime_error naming the
// file. read: throws SessionError naming the file and the offset or key that is wrong.
std::string studyJson(const Study& s);
void writeStudy(const Study& s, const std::string& folder);
Study readStudy(const std::string& folder);
// Whether folder holds a study (a study.json whose format is fragscope-study).
bool isStudyFolder(const std::string& folder);

} // namespace fs::study
