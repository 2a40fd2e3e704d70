// The mixed mechanisms of `fragscope simulate --mechanisms mixed` (docs/simulator.md
// "Mechanisms"): per video, collapses triggered at random frames by one of several labelled
// synthetic mechanisms with randomly drawn parameters, content-caused collapses, and quiet
// distractors in every frame. Each mechanism leaves the allocator, kernel and graph footprint its
// real counterpart would; the simulator records which one lowered each frame's score (the
// sim_truth_causes table), which the analysis never reads.
//
// `--mechanisms realistic` (docs/simulator.md "Realistic mechanisms") runs the same mechanisms,
// and every one of them also happens in healthy frames at a per-seed base rate without lowering
// the score; a triggered one collapses its frame only with a per-seed chance, two may act in one
// frame, and the score has per-seed noise. Every draw of that mode comes from its own generator
// or happens only in it, so a mixed run's events do not change.
//
// The workload calls the hooks below only in mixed and realistic mode; the default run never
// constructs this class, so its event stream does not change.
#pragma once

#include "caching_allocator.h"
#include "core/event_sink.h"
#include "rng.h"

#include <array>
#include <cstdint>
#include <map>
#include <vector>

namespace fs::sim {

class Workload;
struct FrameStats;

class Mechanisms
{
public:
    enum class Kind : uint8_t {
        WorkspaceFallback, // pinned prefetch leaves no contiguous workspace: attention falls back
        OomRetry,          // a request fails (OOM), empty_cache, the step stalls, steps skipped
        GraphInputsMoved,  // a captured graph's static input moved: re-capture or eager launches
        PendingFree,       // record_stream: frees pending on a copy stream until it catches up
        ExternalGrowth,    // memory outside the allocator grows until the workspace cannot fit
        Content,           // a scene change in the prompt: quality drops, nothing else changes
    };
    static constexpr int kKinds = 6;
    static constexpr int kAllocatorKinds = 5; // every kind but Content
    // The ground-truth name ("workspace_fallback", "oom_retry", ...).
    static const char* name(Kind k);

    // The per-seed parameters of a realistic run (drawn from the seed alone, so that the
    // simulator's metadata can name them before the run).
    struct Realistic
    {
        std::array<double, kAllocatorKinds> baseRate{};       // share of frames, 0-40 %
        std::array<double, kAllocatorKinds> collapseChance{}; // of a triggered one, 30-100 %
        double pairChance = 0; // an event frame gets a second mechanism, 0-30 %
        double noiseSigma = 0; // the score is multiplied by exp(sigma N(0,1)), N clipped to 3
    };
    static Realistic realisticParams(uint64_t seed);

    // realistic: the realistic mode's parameters (nullptr: the mixed mode).
    Mechanisms(Workload& w, uint64_t seed, const Realistic* realistic = nullptr);

    // A video (clip) of `frames` frames starts at frame index `first`: its events are scheduled
    // and the step graph is captured on a fresh static input buffer.
    void clipStart(int64_t first, int64_t frames);
    void clipEnd();
    // Frame f opens (its latent and noise exist): triggers that act before the first step.
    // frameEndNs: when the frame's time budget ends (its end work included).
    void frameStart(int64_t f, int64_t inClip, uint64_t workspace, int64_t stepBudgetNs,
                    int64_t stepsEndNs, int64_t frameEndNs);
    // Around step i of the frame (called only for steps on schedule); false when the step is
    // lost (the host stalled in it).
    bool beforeStep(int64_t i);
    void afterStep(int64_t i);
    // The last step is over (before the frame's end work): external memory goes back.
    void stepsDone();
    // The frame's end work is done.
    void frameDone();
    // A block the current step is done with: freed, or pending while the copy stream reads it.
    void releaseActivation(Block*& b);
    // The frame's RGB output: copied to the host on the copy stream, so its free is pending.
    void releaseFrameOutput(Block*& b);
    // The first MLP GEMM's kernel this frame (the autotuner sometimes picks another tile).
    const Name& fc1Kernel() const;
    // Graph id of the step graph (0: the steps launch eagerly).
    uint64_t graphId() const { return graph_; }
    // The product of the quality factors of every mechanism except the attention fallback (the
    // workload applies exp(-5 p) itself), with the frame's truth causes (fallback included).
    // Realistic mode: every factor, the fallback's and the noise included (appliesFallback()).
    double qualityFactor(const FrameStats& fs, double fallbackFraction,
                         std::vector<SimTruthFrame::Cause>& causes);
    // Whether qualityFactor() includes the attention fallback's factor (realistic mode).
    bool appliesFallback() const { return realistic_; }

private:
    struct Planned
    {
        Kind kind = Kind::Content;
        int64_t causeFrame = 0;      // where the mechanism starts (growth can begin earlier)
        Kind second = Kind::Content; // realistic: a second mechanism in the frame (Content: none)
    };
    // What a mechanism is doing in the current frame.
    enum class Occurrence : uint8_t { None, Triggered, Benign };
    // Starts mechanism k in the current frame (its footprint; the draws of the mixed mode).
    void start(Kind k, uint64_t workspace);
    // What mechanism k does at its step i; false when the step is lost.
    bool act(Kind k, int64_t i);
    // The quality factor of a realistic occurrence whose natural factor (the mixed mode's) is
    // `natural`: itself when the occurrence collapses its frame, natural^0.2 when it only lowers
    // it, 1 when benign.
    double realisticFactor(Kind k, double natural) const;
    double realisticQuality(const FrameStats& fs, double fallbackFraction,
                            std::vector<SimTruthFrame::Cause>& causes);
    bool on(Kind k) const { return occ_[static_cast<size_t>(k)] != Occurrence::None; }
    void pinWorkspace(uint64_t workspace);
    void unpin();
    void growExternal(int64_t f, bool crossing, uint64_t workspace);
    uint64_t headroom() const;
    Block* allocate(uint64_t bytes, const Name& tag);
    void stallUntil(int64_t t, Kind why);

    Workload& w_;
    Rng rng_;
    bool realistic_ = false;
    Rng real_;           // realistic mode's own draws (base rates, collapse, noise, pairs)
    Realistic params_{}; // realistic mode's per-seed parameters
    std::array<Occurrence, kKinds> occ_{};
    std::array<bool, kKinds> collapses_{}; // realistic: a triggered occurrence collapses
    // realistic: the mechanism left its footprint this frame (a trigger step skipped because
    // the frame ran late did not; a prefetch that found no room pinned nothing)
    std::array<bool, kKinds> acted_{};
    std::array<int64_t, kKinds> stepOf_{}; // the step a mechanism acts at (-1: none)
    std::vector<Kind> deck_;               // kinds still to deal in this round (balanced mix)
    std::map<int64_t, Planned> planned_;
    // Per-seed distractor rates.
    double churnChance_ = 0;
    double variantChance_ = 0;
    // The current frame.
    int64_t frame_ = -1;
    int64_t steps_ = 0;
    int64_t stepBudgetNs_ = 0;
    int64_t stepsEndNs_ = 0;
    int64_t frameEndNs_ = 0;
    bool active_ = false;
    Planned event_;
    int64_t holdSteps_ = 0;  // workspace fallback: steps the prefetch stays pinned
    bool eagerMode_ = false; // graph: eager launches from triggerStep_ (else re-capture there)
    int64_t graphLostSteps_ = 0;
    double contentFactor_ = 1;
    int64_t pendingUntil_ = 0; // pending-free trigger: the copy stream's end
    Kind stallKind_ = Kind::OomRetry;
    bool stalled_ = false;
    bool variantFrame_ = false;
    int64_t churnStep_ = -1;
    std::vector<Block*> pins_;
    std::vector<Block*> churn_;
    std::vector<uint64_t> external_; // addresses of the external regions alive
    Block* staticInput_ = nullptr;
    uint64_t staticInputBytes_ = 0;
    uint64_t graph_ = 0;
    uint64_t graphsCaptured_ = 0;
    Name tagPrefetch_, tagStaticInput_, tagRefine_, tagScratch_, kCopy_, kFc1Alt_;
};

} // namespace fs::sim
