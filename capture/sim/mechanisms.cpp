#include "mechanisms.h"

#include "workload.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace fs::sim {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint32_t kCopyStream = 21; // host copies (offload, frame download)
// Activations a step needs beyond the workspace when none are cached (hidden, qkv, MLP, output,
// the occasional guidance buffer): what the triggers leave free besides the headroom they take.
constexpr uint64_t kStepActivations = 1600 * kMiB;
// Skipped or stale steps lower the toy score as fallbacks do, a little faster: a frame that lost
// half its refinement collapses.
constexpr double kLostStepDrop = 7.0;
// Warm-up: no event before the KV window is full and a baseline of healthy frames exists.
constexpr int64_t kFirstEventFrame = 10;

uint64_t roundUp(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

} // namespace

const char* Mechanisms::name(Kind k)
{
    switch (k) {
    case Kind::WorkspaceFallback:
        return "workspace_fallback";
    case Kind::OomRetry:
        return "oom_retry";
    case Kind::GraphInputsMoved:
        return "graph_inputs_moved";
    case Kind::PendingFree:
        return "pending_free";
    case Kind::ExternalGrowth:
        return "external_growth";
    case Kind::Content:
        return "content";
    }
    return "unknown";
}

Mechanisms::Realistic Mechanisms::realisticParams(uint64_t seed)
{
    uint64_t x = seed ^ 0x7265616c6973ull;
    Rng r(Rng::splitmix(x));
    Realistic p;
    for (int k = 0; k < kAllocatorKinds; ++k) {
        p.baseRate[static_cast<size_t>(k)] = r.uniform(0.0, 0.4);
        p.collapseChance[static_cast<size_t>(k)] = r.uniform(0.3, 1.0);
    }
    p.pairChance = r.uniform(0.0, 0.3);
    p.noiseSigma = r.uniform(0.02, 0.15);
    return p;
}

Mechanisms::Mechanisms(Workload& w, uint64_t seed, const Realistic* realistic)
    : w_(w), rng_(seed), realistic_(realistic != nullptr), real_(seed ^ 0x7265616c)
{
    if (realistic) params_ = *realistic;
    stepOf_.fill(-1);
    churnChance_ = rng_.uniform(0.1, 0.5);
    variantChance_ = rng_.uniform(0.05, 0.3);
    auto n = [&](std::string_view s) { return w_.out_.intern(s); };
    tagPrefetch_ = n("offload.prefetch");
    tagStaticInput_ = n("graph.static_input");
    tagRefine_ = n("refine.buffer");
    tagScratch_ = n("aux.scratch");
    kCopy_ = n("offload_copy_d2h_kernel");
    kFc1Alt_ = n("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_fc1_kernel");
}

Block* Mechanisms::allocate(uint64_t bytes, const Name& tag)
{
    return w_.alloc(bytes, Workload::kMainStream, tag);
}

uint64_t Mechanisms::headroom() const
{
    const uint64_t used = w_.alloc_.counters().reserved + w_.alloc_.externalBytes();
    return w_.alloc_.capacity() > used ? w_.alloc_.capacity() - used : 0;
}

void Mechanisms::clipStart(int64_t first, int64_t frames)
{
    // The step graph is captured on a static input buffer sized for the largest token count.
    staticInputBytes_ =
        roundUp(2 * roundUp(w_.cfg_.tokensPerFrame * 11 / 10, 16) * 5120 * 2, 2 * kMiB);
    staticInput_ = allocate(staticInputBytes_, tagStaticInput_);
    graph_ = ++graphsCaptured_;
    // Events: the first after the warm-up, then one every 4-6 frames; kinds dealt from a
    // shuffled deck so that every mechanism comes up equally often over a run.
    for (int64_t f = kFirstEventFrame + static_cast<int64_t>(rng_.below(3)); f < frames;
         f += 4 + static_cast<int64_t>(rng_.below(3))) {
        if (deck_.empty()) {
            for (int k = 0; k < kKinds; ++k)
                deck_.push_back(static_cast<Kind>(k));
            for (size_t i = deck_.size(); i > 1; --i)
                std::swap(deck_[i - 1], deck_[rng_.below(i)]);
        }
        Planned p;
        p.kind = deck_.back();
        deck_.pop_back();
        p.causeFrame = first + f;
        if (p.kind == Kind::ExternalGrowth) // the growth may start up to two frames earlier
            p.causeFrame -= static_cast<int64_t>(rng_.below(3));
        if (realistic_ && real_.chance(params_.pairChance)) {
            // A second mechanism acts in the same frame: any allocator kind but the first.
            do
                p.second = static_cast<Kind>(real_.below(kAllocatorKinds));
            while (p.second == p.kind);
        }
        planned_[first + f] = p;
    }
}

void Mechanisms::clipEnd()
{
    w_.release(staticInput_);
}

void Mechanisms::frameStart(int64_t f, int64_t /*inClip*/, uint64_t workspace, int64_t stepBudgetNs,
                            int64_t stepsEndNs, int64_t frameEndNs)
{
    frame_ = f;
    steps_ = w_.cfg_.steps;
    stepBudgetNs_ = stepBudgetNs;
    stepsEndNs_ = stepsEndNs;
    frameEndNs_ = frameEndNs;
    active_ = false;
    occ_.fill(Occurrence::None);
    collapses_.fill(false);
    acted_.fill(false);
    stepOf_.fill(-1);
    holdSteps_ = 0;
    graphLostSteps_ = 0;
    contentFactor_ = 1;
    pendingUntil_ = 0;
    stalled_ = false;
    if (graph_ == 0) graph_ = ++graphsCaptured_; // eager last frame: captured again
    // Distractors, in any frame: the autotuner picks another GEMM tile; a burst of scratch
    // allocations around one step.
    variantFrame_ = rng_.chance(variantChance_);
    churnStep_ =
        rng_.chance(churnChance_)
            ? static_cast<int64_t>(rng_.below(static_cast<uint64_t>(std::max<int64_t>(steps_, 1))))
            : -1;

    // External growth that starts before the failing frame: increments that still leave the
    // workspace room.
    bool growing = false;
    for (const auto& [at, p] : planned_)
        if (p.kind == Kind::ExternalGrowth && f >= p.causeFrame && f <= at) {
            growing = true;
            if (f < at) growExternal(f, false, workspace);
        }

    const auto it = planned_.find(f);
    if (it != planned_.end()) {
        active_ = true;
        event_ = it->second;
        occ_[static_cast<size_t>(event_.kind)] = Occurrence::Triggered;
        start(event_.kind, workspace);
        if (realistic_ && event_.second != Kind::Content) {
            occ_[static_cast<size_t>(event_.second)] = Occurrence::Triggered;
            start(event_.second, workspace);
        }
    }
    if (!realistic_) return;
    // Realistic mode: every mechanism also happens in any frame at its base rate, with the same
    // footprint and magnitudes, without lowering the score; a triggered one collapses the frame
    // only with its per-seed chance.
    for (int k = 0; k < kAllocatorKinds; ++k) {
        const auto kind = static_cast<Kind>(k);
        const bool occurs = real_.chance(params_.baseRate[static_cast<size_t>(k)]);
        if (!occurs || on(kind) || (kind == Kind::ExternalGrowth && growing)) continue;
        occ_[static_cast<size_t>(k)] = Occurrence::Benign;
        start(kind, workspace);
    }
    for (int k = 0; k < kAllocatorKinds; ++k)
        collapses_[static_cast<size_t>(k)] =
            real_.chance(params_.collapseChance[static_cast<size_t>(k)]) &&
            occ_[static_cast<size_t>(k)] == Occurrence::Triggered;
}

void Mechanisms::start(Kind k, uint64_t workspace)
{
    const int64_t steps = std::max<int64_t>(steps_, 1);
    int64_t& step = stepOf_[static_cast<size_t>(k)];
    switch (k) {
    case Kind::WorkspaceFallback:
        // An offloaded module is prefetched into the cache for most of the frame's steps.
        holdSteps_ =
            std::max<int64_t>(1, static_cast<int64_t>(std::ceil(rng_.uniform(0.75, 1.0) * steps)));
        {
            const size_t pinned = pins_.size();
            pinWorkspace(workspace);
            acted_[static_cast<size_t>(k)] = pins_.size() > pinned;
        }
        break;
    case Kind::ExternalGrowth:
        growExternal(frame_, true, workspace);
        acted_[static_cast<size_t>(k)] = !external_.empty(); // this growth or the one before
        break;
    case Kind::OomRetry:
        step = static_cast<int64_t>(
            rng_.below(static_cast<uint64_t>(std::max<int64_t>(1, steps * 45 / 100))));
        break;
    case Kind::PendingFree:
        step = static_cast<int64_t>(
            rng_.below(static_cast<uint64_t>(std::max<int64_t>(1, steps / 5))));
        break;
    case Kind::GraphInputsMoved: {
        // The input grows into a larger shape bucket: the new buffer is allocated before the old
        // one is freed, so it lands elsewhere, and the captured graph reads a stale address.
        const uint64_t bytes = roundUp(
            static_cast<uint64_t>(static_cast<double>(staticInputBytes_) * rng_.uniform(1.0, 1.25)),
            2 * kMiB);
        Block* moved = allocate(bytes, tagStaticInput_);
        w_.release(staticInput_);
        staticInput_ = moved;
        eagerMode_ = rng_.chance(0.5);
        if (eagerMode_) // the library notices and launches the rest of the frame eagerly
            step = static_cast<int64_t>(
                rng_.below(static_cast<uint64_t>(std::max<int64_t>(1, steps * 4 / 10 + 1))));
        else // it replays the stale graph until a shape check re-captures it
            step = std::min<int64_t>(
                steps - 1, static_cast<int64_t>(std::ceil(rng_.uniform(0.6, 0.95) * steps)));
        break;
    }
    case Kind::Content:
        contentFactor_ = rng_.uniform(0.005, 0.045);
        break;
    }
}

void Mechanisms::pinWorkspace(uint64_t workspace)
{
    // 1. Take the headroom down to what the step's activations need plus less than one
    // workspace, with a prefetch carved into pieces of a third of a workspace, every other one
    // kept: free memory remains, in holes smaller than the workspace.
    const uint64_t target =
        kStepActivations +
        static_cast<uint64_t>(rng_.uniform(0.0, 1.0) *
                              static_cast<double>(workspace > kStepActivations / 4
                                                      ? workspace - kStepActivations / 4
                                                      : 0) *
                              0.5);
    const uint64_t room = headroom();
    if (room > target + 64 * kMiB) {
        const uint64_t span = roundUp(room - target, 2 * kMiB);
        Block* whole = allocate(span, tagPrefetch_);
        w_.release(whole); // the segment stays cached, free
        const uint64_t piece =
            roundUp(static_cast<uint64_t>(static_cast<double>(workspace) * rng_.uniform(0.25, 0.4)),
                    2 * kMiB);
        std::vector<Block*> pieces;
        for (uint64_t used = 0; used + piece <= span; used += piece)
            pieces.push_back(allocate(piece, tagPrefetch_));
        for (size_t i = 0; i < pieces.size(); ++i) {
            if (i % 2 == 1)
                w_.release(pieces[i]);
            else if (pieces[i])
                pins_.push_back(pieces[i]);
        }
    }
    // 2. Split every cached block that could still hold the workspace.
    for (int guard = 0; guard < 64; ++guard) {
        const uint64_t largest = w_.alloc_.largestFree(Workload::kMainStream);
        if (largest < workspace) break;
        Block* b = allocate(roundUp(largest - workspace / 4, 2 * kMiB), tagPrefetch_);
        if (!b) break;
        pins_.push_back(b);
    }
}

void Mechanisms::unpin()
{
    for (Block*& b : pins_)
        w_.release(b);
    pins_.clear();
}

void Mechanisms::growExternal(int64_t f, bool crossing, uint64_t workspace)
{
    // Communication buffers (or another process) on the same device, outside the allocator.
    const uint64_t room = headroom();
    uint64_t grow = 0;
    if (crossing) {
        // Leave the activations their room and less than a workspace beside them.
        const uint64_t left =
            kStepActivations +
            static_cast<uint64_t>(rng_.uniform(0.1, 0.4) * static_cast<double>(workspace));
        grow = room > left ? room - left : 0;
    } else {
        const uint64_t step = static_cast<uint64_t>(rng_.uniform(0.5, 2.0) * kGiB);
        if (room > step + workspace + kStepActivations + kGiB) grow = step;
    }
    (void)f;
    if (grow < 2 * kMiB) return;
    w_.hostOp();
    const uint64_t addr = w_.alloc_.externalAlloc(grow, w_.now_);
    if (addr) external_.push_back(addr);
}

void Mechanisms::stallUntil(int64_t t, Kind why)
{
    // Never past the point where the frame's last step could still finish in its budget.
    const int64_t limit = stepsEndNs_ - 2 * stepBudgetNs_;
    t = std::min(t, limit);
    if (t > w_.now_) w_.now_ = t;
    stallKind_ = why;
    stalled_ = true;
}

bool Mechanisms::beforeStep(int64_t i)
{
    if (i == churnStep_) {
        const int n = 3 + static_cast<int>(rng_.below(10));
        for (int k = 0; k < n; ++k) {
            // Log-uniform between 256 KiB and 256 MiB: scratch of every size class.
            const double exp2 = rng_.uniform(18, 28);
            churn_.push_back(
                allocate(roundUp(static_cast<uint64_t>(std::exp2(exp2)), 512), tagScratch_));
        }
    }
    bool runs = true;
    for (int k = 0; k < kAllocatorKinds; ++k)
        if (stepOf_[static_cast<size_t>(k)] == i && !act(static_cast<Kind>(k), i)) runs = false;
    return runs;
}

bool Mechanisms::act(Kind k, int64_t i)
{
    const int64_t steps = std::max<int64_t>(steps_, 1);
    acted_[static_cast<size_t>(k)] = true;
    switch (k) {
    case Kind::OomRetry: {
        // A refinement pass asks for more than the device has: the allocator frees its cache
        // and retries, the request still fails (an OOM), the program calls empty_cache() and
        // waits before giving the refinement up; the frame runs late and drops steps.
        const auto& c = w_.alloc_.counters();
        const uint64_t avail = w_.alloc_.capacity() - w_.alloc_.externalBytes() - c.allocated;
        const uint64_t ask = avail + static_cast<uint64_t>(rng_.uniform(0.25, 2.0) * kGiB);
        Block* b = allocate(ask, tagRefine_);
        w_.release(b); // (only when the model served it after all)
        w_.hostOp();
        w_.alloc_.emptyCache(w_.now_);
        const double lost = rng_.uniform(0.55, 0.9);
        stallUntil(w_.now_ + static_cast<int64_t>(lost * static_cast<double>(steps) *
                                                  static_cast<double>(stepBudgetNs_)),
                   Kind::OomRetry);
        return false;
    }
    case Kind::PendingFree: {
        // From here the step's activations are also read by a copy stream (offload to host,
        // record_stream): their frees wait until it catches up, so the allocator cannot reuse
        // them, grows until the device is full, then synchronizes (the host stalls) to release
        // its cache.
        const double lost = rng_.uniform(0.75, 0.95);
        pendingUntil_ =
            std::min(stepsEndNs_ - 2 * stepBudgetNs_,
                     w_.now_ + static_cast<int64_t>(lost * static_cast<double>(steps) *
                                                    static_cast<double>(stepBudgetNs_)));
        w_.asyncKernel(kCopy_, pendingUntil_, kCopyStream);
        stallKind_ = Kind::PendingFree;
        return true;
    }
    case Kind::GraphInputsMoved:
        if (eagerMode_) {
            graph_ = 0;
            graphLostSteps_ = steps - i;
        } else {
            graph_ = ++graphsCaptured_;
            graphLostSteps_ = i;
        }
        return true;
    default:
        return true;
    }
}

void Mechanisms::afterStep(int64_t i)
{
    if (i == churnStep_) {
        for (Block*& b : churn_)
            w_.release(b);
        churn_.clear();
    }
    if (on(Kind::WorkspaceFallback) && i + 1 == holdSteps_) unpin();
    if (pendingUntil_ > 0 && w_.now_ >= pendingUntil_) pendingUntil_ = 0;
}

void Mechanisms::stepsDone()
{
    unpin();
    for (Block*& b : churn_)
        w_.release(b);
    churn_.clear();
    pendingUntil_ = 0;
    // The collective is over: communication buffers go back with the frame's last step.
    if (!external_.empty() && on(Kind::ExternalGrowth)) {
        for (uint64_t addr : external_) {
            w_.hostOp();
            w_.alloc_.externalFree(addr, w_.now_);
        }
        external_.clear();
    }
}

void Mechanisms::frameDone()
{
    // The mixed workload empties the allocator's cache after every frame, as many video
    // pipelines do between frames: each frame starts from the blocks still alive.
    w_.hostOp();
    w_.alloc_.emptyCache(w_.now_);
}

void Mechanisms::releaseActivation(Block*& b)
{
    if (!b) return;
    if (pendingUntil_ > w_.now_) {
        w_.hostOp();
        w_.alloc_.freePending(b, w_.now_, pendingUntil_);
        w_.now_ = std::max(w_.now_, w_.alloc_.time());
        b = nullptr;
        return;
    }
    w_.release(b);
}

void Mechanisms::releaseFrameOutput(Block*& b)
{
    if (!b) return;
    // The frame is downloaded on the copy stream: a routine pending free of a few milliseconds.
    int64_t until = w_.now_ + static_cast<int64_t>(rng_.uniform(1e6, 6e6));
    // Realistic mode: stalls of harmless mechanisms can leave the end work late; the download
    // still ends inside the frame's budget (a millisecond before its end).
    if (realistic_) until = std::max(w_.now_ + 1, std::min(until, frameEndNs_ - 1'000'000));
    w_.asyncKernel(kCopy_, until, kCopyStream);
    w_.hostOp();
    w_.alloc_.freePending(b, w_.now_, until);
    w_.now_ = std::max(w_.now_, w_.alloc_.time());
    b = nullptr;
}

const Name& Mechanisms::fc1Kernel() const
{
    return variantFrame_ ? kFc1Alt_ : w_.kGemmFc1_;
}

double Mechanisms::qualityFactor(const FrameStats& fs, double fallbackFraction,
                                 std::vector<SimTruthFrame::Cause>& causes)
{
    if (realistic_) return realisticQuality(fs, fallbackFraction, causes);
    const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
    const bool triggered = active_;
    auto causeOf = [&](Kind k) {
        return triggered && event_.kind == k ? event_.causeFrame : frame_;
    };
    double factor = 1;
    if (fallbackFraction > 0) {
        // The workload applies exp(-5 p); the cause is the trigger that took the workspace away,
        // else the allocator's own state (the default run's emergent mechanism).
        const Kind k = triggered && (event_.kind == Kind::WorkspaceFallback ||
                                     event_.kind == Kind::ExternalGrowth)
                           ? event_.kind
                           : Kind::WorkspaceFallback;
        causes.push_back({name(k), causeOf(k), std::exp(-5.0 * fallbackFraction)});
    }
    if (fs.skippedSteps > 0) {
        // Steps dropped because the host stalled: in an OOM's retry, or in the synchronize that
        // waited for the copy stream.
        const double f = std::exp(-kLostStepDrop * fs.skippedSteps / steps);
        const bool known =
            triggered && (event_.kind == Kind::OomRetry || event_.kind == Kind::PendingFree);
        causes.push_back(
            {known ? name(event_.kind) : "late_frame", known ? event_.causeFrame : frame_, f});
        factor *= f;
    }
    if (graphLostSteps_ > 0) {
        const double f = std::exp(-kLostStepDrop * static_cast<double>(graphLostSteps_) / steps);
        causes.push_back({name(Kind::GraphInputsMoved), causeOf(Kind::GraphInputsMoved), f});
        factor *= f;
    }
    if (contentFactor_ < 1) {
        causes.push_back({name(Kind::Content), frame_, contentFactor_});
        factor *= contentFactor_;
    }
    return factor;
}

double Mechanisms::realisticFactor(Kind k, double natural) const
{
    switch (occ_[static_cast<size_t>(k)]) {
    case Occurrence::Benign:
        return 1;
    case Occurrence::Triggered:
        // The effect grows with the occurrence's size either way; only a collapsing one takes
        // the whole natural drop (a frame at natural^0.2 >= exp(-1.4) keeps its score above the
        // collapse rule).
        return collapses_[static_cast<size_t>(k)] ? natural : std::pow(natural, 0.2);
    case Occurrence::None:
        break;
    }
    return natural; // the allocator's own state, no trigger (the default run's mechanism)
}

double Mechanisms::realisticQuality(const FrameStats& fs, double fallbackFraction,
                                    std::vector<SimTruthFrame::Cause>& causes)
{
    const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
    std::array<bool, kKinds> recorded{};
    double factor = 1;
    auto record = [&](Kind k, double natural) {
        const bool primary = active_ && event_.kind == k;
        const double f = realisticFactor(k, natural);
        causes.push_back({name(k), primary ? event_.causeFrame : frame_, f});
        recorded[static_cast<size_t>(k)] = true;
        factor *= f;
    };
    // The kind behind an effect two mechanisms can have: a triggered one that acted first, then
    // a benign one; Content when neither acted (a step skipped because the frame ran late never
    // ran its trigger).
    auto whichOf = [&](Kind a, Kind b) {
        for (Occurrence want : {Occurrence::Triggered, Occurrence::Benign})
            for (Kind k : {a, b})
                if (occ_[static_cast<size_t>(k)] == want && acted_[static_cast<size_t>(k)])
                    return k;
        return Kind::Content;
    };
    if (fallbackFraction > 0) {
        const Kind k = whichOf(Kind::WorkspaceFallback, Kind::ExternalGrowth);
        record(k == Kind::Content ? Kind::WorkspaceFallback : k, std::exp(-5.0 * fallbackFraction));
    }
    if (fs.skippedSteps > 0) {
        const double f = std::exp(-kLostStepDrop * fs.skippedSteps / steps);
        const Kind k = whichOf(Kind::OomRetry, Kind::PendingFree);
        if (k == Kind::Content) {
            causes.push_back({"late_frame", frame_, f});
            factor *= f;
        } else {
            record(k, f);
        }
    }
    if (graphLostSteps_ > 0)
        record(Kind::GraphInputsMoved,
               std::exp(-kLostStepDrop * static_cast<double>(graphLostSteps_) / steps));
    if (contentFactor_ < 1) {
        causes.push_back({name(Kind::Content), frame_, contentFactor_});
        factor *= contentFactor_;
    }
    // Occurrences that acted without lowering the score are recorded too (factor 1): the truth
    // of which allocator events a frame had.
    for (int k = 0; k < kAllocatorKinds; ++k)
        if (on(static_cast<Kind>(k)) && acted_[static_cast<size_t>(k)] &&
            !recorded[static_cast<size_t>(k)])
            causes.push_back({name(static_cast<Kind>(k)), frame_, 1.0});
    // Per-seed noise: exp(sigma N(0,1)), N clipped to +-3 (Box-Muller).
    const double u1 = 1.0 - real_.uniform(), u2 = real_.uniform();
    const double n =
        std::clamp(std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2), -3.0, 3.0);
    return factor * std::exp(params_.noiseSigma * n);
}

} // namespace fs::sim
