// The simulated program: a video-diffusion generation run (docs/simulator.md "Workload"),
// driving the caching-allocator model and emitting kernels, graph launches, frame ranges and
// per-frame metric marks.
#pragma once

#include "caching_allocator.h"
#include "event_writer.h"
#include "rng.h"
#include "simulator.h"

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace fs::sim {

class Mechanisms;

class Workload
{
public:
    static constexpr uint32_t kMainStream = 7;
    static constexpr uint32_t kSideStream = 13;

    Workload(const Config& cfg, EventWriter& out);
    ~Workload();
    // Runs setup, every frame and teardown. With cfg.targetEvents the run goes on with further
    // videos ("clips") of cfg.frames frames each until that many events were emitted.
    void run();

    const CachingAllocator& allocator() const { return alloc_; }
    const std::vector<FrameStats>& frames() const { return frames_; }
    int64_t fallbackKernels() const { return fallbackKernels_; }

    // Events one frame emits, roughly (for progress totals).
    static int64_t eventsPerFrameEstimate(const Config& cfg);

private:
    friend class Mechanisms; // the mixed mode's triggers act through the workload's allocator

    // Sizes and nominal kernel durations of one frame (depend on the frame's index in its clip).
    struct Shape
    {
        uint64_t tokens = 0;
        uint64_t hidden = 0;    // bytes of one activation [batch, tokens, dim]
        uint64_t ffn = 0;       // bytes of the MLP hidden activation
        uint64_t workspace = 0; // contiguous attention workspace
        uint64_t ctx = 0;       // frames the temporal attention spans
        int64_t lnNs = 0, qkvNs = 0, attnNs = 0, outNs = 0, fc1Ns = 0, fc2Ns = 0, schedNs = 0;
        int64_t stepBudgetNs = 0;
        int64_t endBudgetNs = 0;
    };
    struct KernelName
    {
        Name normal;
        Name fallback; // empty when the kernel has no fallback variant
    };

    void setup();
    void newClip(int64_t clip);
    void frame(int64_t f, int64_t inClip);
    // The steps of a frame in mixed mode: a step that would start late is skipped.
    void mixedSteps(const Shape& s, int64_t f, int64_t inClip, FrameStats& fs);
    void step(const Shape& s, int64_t f, FrameStats& fs);
    void blockGroup(const Shape& s, Block*& x, FrameStats& fs, uint32_t& node);
    void frameEnd(const Shape& s, FrameStats& fs);
    void teardown();
    Shape shape(int64_t f) const;

    Block* alloc(uint64_t bytes, uint32_t stream, const Name& tag);
    // A kernel on another stream that runs from now until `end` while the host goes on.
    void asyncKernel(const Name& name, int64_t end, uint32_t stream);
    void release(Block*& b);
    void hostOp(); // host time between two allocator calls
    void kernel(const Name& name, int64_t nominalNs, uint32_t stream, uint32_t node,
                std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block);
    void idle(int64_t ns) { now_ += ns; }

    static constexpr int64_t kHostOpMaxNs = 4000;
    static constexpr double kJitterMax = 1.05;
    static constexpr double kFallbackSlowdown = 1.6;

    Config cfg_;
    EventWriter& out_;
    Rng rng_;
    CachingAllocator alloc_;
    int64_t now_ = 0;
    uint64_t correlation_ = 0;
    uint64_t graphId_ = 0; // aux2 of kernels launched by the current step's graph (0: none)
    int64_t fallbackKernels_ = 0;
    int64_t oomsAtFrameStart_ = 0;

    // Long-lived tensors.
    std::vector<Block*> weights_;
    std::vector<Block*> cond_;
    std::deque<std::vector<Block*>> kvCache_; // one entry per frame in the temporal window
    std::deque<std::vector<Block*>> memory_;  // one entry per frame in the long-range memory
    std::vector<FrameStats> frames_;
    std::unique_ptr<Mechanisms> mech_; // mixed mode only

    // Interned names.
    Name tagTextEncoder_, tagCond_, tagNullCond_, tagVaeWeights_, tagPatchEmbed_;
    std::vector<Name> tagWeights_;
    Name tagLatent_, tagNoise_, tagStepIn_, tagHidden_, tagCfg_, tagKv_, tagMemory_, tagVaeBuf_,
        tagVaeTmp_, tagRgb_;
    std::array<Name, 5> tagAct_;
    Name tagWorkspace_, tagWorkspaceSplit_;
    Name kT5_, kLayerNorm_, kGemmQkv_, kGemmOut_, kGemmFc1_, kGemmFc2_, kGelu_, kSched_, kCfg_,
        kKvAppend_, kVaeConv_, kVaeConvTiled_, kVaeUp_, kQuantize_, kMemory_;
    Name kAttn_, kAttnFallback_, kAttnMath_;
};

} // namespace fs::sim
