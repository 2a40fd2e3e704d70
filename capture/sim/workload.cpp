#include "workload.h"

#include "mechanisms.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace fs::sim {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kDim = 5120;  // model width (a 14B-parameter video DiT)
constexpr uint64_t kFfn = 13824; // MLP width
constexpr uint64_t kBatch = 2;   // classifier-free guidance: conditional + unconditional
constexpr uint64_t kLayersPerGroup = 5;
constexpr uint64_t kBf16 = 2;
constexpr double kFlopsPerNs = 6e5;      // 600 TFLOP/s sustained
constexpr double kCopyBytesPerNs = 25.0; // host-to-device weight upload, 25 GB/s
constexpr double kCoherenceDrop = 5.0;   // score *= exp(-kCoherenceDrop * fallback fraction)
constexpr int64_t kVaeConvNs = 45'000'000;
constexpr int64_t kVaeTiledNs = kVaeConvNs * 13 / 10; // tiles overlap: 30 % more work
// Fallback kernels, named once: the events and the ground-truth table must agree.
constexpr const char* kAttnFallbackName = "flash_attn_fwd_splitkv_fallback";
constexpr const char* kAttnMathName = "attn_fwd_math_fallback";
constexpr const char* kVaeTiledName = "vae_decode_conv3d_tiled_kernel";

int64_t flopsNs(double flops)
{
    return static_cast<int64_t>(flops / kFlopsPerNs);
}
uint32_t u32(uint64_t v)
{
    return static_cast<uint32_t>(std::min<uint64_t>(v, 0x7fffffffu));
}
uint64_t roundUp(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

// The value a session reads back from a metric printed with `digits` decimals.
double printed(double v, int digits, std::string& text)
{
    text = fmt::format("{:.{}f}", v, digits);
    double back = 0;
    std::from_chars(text.data(), text.data() + text.size(), back);
    return back;
}

} // namespace

Workload::Workload(const Config& cfg, EventWriter& out)
    : cfg_(cfg), out_(out), rng_(cfg.seed),
      alloc_(out, cfg.capacityBytes, cfg.device, Rng::splitmix(cfg_.seed)), now_(cfg.startTimeNs)
{
    if (cfg_.frames < 1 || cfg_.blockGroups < 1 || cfg_.contextFrames < 1 ||
        cfg_.memoryFrames < 1 || cfg_.steps < 1 || cfg_.tokensPerFrame < 16 ||
        cfg_.memoryTokenDivisor < 1)
        throw std::invalid_argument(
            "simulator: frames, steps, block groups, context and memory frames must be "
            ">= 1 and tokens per frame >= 16");
    auto n = [&](std::string_view s) { return out_.intern(s); };
    tagTextEncoder_ = n("text_encoder.weights");
    tagCond_ = n("cond.text_embeds");
    tagNullCond_ = n("cond.null_embeds");
    tagVaeWeights_ = n("vae.weights");
    tagPatchEmbed_ = n("weights.patch_embed");
    for (const char* w :
         {"weights.attn.qkv", "weights.attn.out", "weights.cross_attn.q_o", "weights.cross_attn.kv",
          "weights.mlp.fc1", "weights.mlp.fc2", "weights.norm"})
        tagWeights_.push_back(n(w));
    tagLatent_ = n("frame.latent");
    tagNoise_ = n("frame.noise");
    tagStepIn_ = n("step.latent_in");
    tagHidden_ = n("step.hidden");
    tagCfg_ = n("step.cfg_guidance");
    tagKv_ = n("attn.kv_cache");
    tagMemory_ = n("attn.kv_memory");
    tagVaeBuf_ = n("vae.decode.buf");
    tagVaeTmp_ = n("vae.decode.tmp");
    tagRgb_ = n("frame.rgb_out");
    for (size_t i = 0; i < tagAct_.size(); ++i)
        tagAct_[i] = n(fmt::format("step.act.{}", i));
    tagWorkspace_ = n("attn.workspace");
    tagWorkspaceSplit_ = n("attn.workspace.splitkv");
    kT5_ = n("umt5_encoder_layer_kernel");
    kLayerNorm_ = n("vectorized_layer_norm_kernel");
    kGemmQkv_ = n("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_qkv_kernel");
    kGemmOut_ = n("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_out_kernel");
    kGemmFc1_ = n("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_fc1_kernel");
    kGemmFc2_ = n("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_fc2_kernel");
    kGelu_ = n("gelu_tanh_kernel");
    kSched_ = n("flow_match_scheduler_step_kernel");
    kCfg_ = n("cfg_combine_kernel");
    kKvAppend_ = n("kv_cache_append_kernel");
    kVaeConv_ = n("vae_decode_conv3d_kernel");
    kVaeConvTiled_ = n(kVaeTiledName);
    kMemory_ = n("kv_memory_compress_kernel");
    kVaeUp_ = n("vae_upsample_nearest3d_kernel");
    kQuantize_ = n("frame_to_uint8_kernel");
    kAttn_ = n("flash_attn_fwd_kernel");
    kAttnFallback_ = n(kAttnFallbackName);
    kAttnMath_ = n(kAttnMathName);
    if (cfg_.mechanisms != MechanismSet::Workspace) {
        // A shorter temporal window leaves the device headroom, so that only the triggered
        // mechanisms take the workspace away (docs/simulator.md "Mechanisms").
        cfg_.contextFrames = std::min(cfg_.contextFrames, 6);
        const Mechanisms::Realistic params = Mechanisms::realisticParams(cfg.seed);
        mech_ = std::make_unique<Mechanisms>(*this, Rng::splitmix(cfg_.seed) ^ 0x6d6978,
                                             cfg_.mechanisms == MechanismSet::Realistic ? &params
                                                                                        : nullptr);
    }
}

Workload::~Workload() = default;

int64_t Workload::eventsPerFrameEstimate(const Config& cfg)
{
    // Per block group: 7 allocs, 7 frees, 7 kernels; per step: graph launch, 2-4 allocator events,
    // 1-2 kernels; per frame: cache and VAE work, the range and the metric mark.
    const int64_t perStep = cfg.blockGroups * 21 + 5;
    return cfg.steps * perStep + cfg.blockGroups * 6 + 20;
}

Workload::Shape Workload::shape(int64_t f) const
{
    Shape s;
    // Activation sizes follow the frame: the token count breathes with the scene (motion-adaptive
    // token merging in the model being imitated), so consecutive frames never ask for exactly the
    // same sizes and best-fit keeps splitting blocks.
    const double wave = 1.0 + 0.08 * std::sin(0.7 * static_cast<double>(f) + 0.3);
    s.tokens = roundUp(static_cast<uint64_t>(static_cast<double>(cfg_.tokensPerFrame) * wave), 16);
    s.ctx =
        1 + std::min<uint64_t>(static_cast<uint64_t>(f), static_cast<uint64_t>(cfg_.contextFrames));
    s.hidden = kBatch * s.tokens * kDim * kBf16;
    s.ffn = kBatch * s.tokens * kFfn * kBf16;
    // Temporal attention over ctx frames needs a split-K accumulation workspace that grows with
    // the window: this is the contiguous block the mechanism hinges on.
    const double scale = static_cast<double>(s.tokens) / static_cast<double>(cfg_.tokensPerFrame);
    s.workspace =
        roundUp(static_cast<uint64_t>(
                    static_cast<double>(
                        (cfg_.workspaceBaseMiB + cfg_.workspacePerFrameMiB * s.ctx) * kMiB) *
                    scale),
                kMiB);

    const double m = static_cast<double>(kBatch * s.tokens);
    const double d = static_cast<double>(kDim);
    const double l = static_cast<double>(kLayersPerGroup);
    s.lnNs = static_cast<int64_t>(kLayersPerGroup) * 25'000;
    s.qkvNs = flopsNs(2 * m * d * 3 * d * l);
    s.attnNs = flopsNs(4 * m * static_cast<double>(s.tokens * s.ctx) * d * l);
    s.outNs = flopsNs(2 * m * d * d * l);
    s.fc1Ns = flopsNs(2 * m * d * static_cast<double>(kFfn) * l);
    s.fc2Ns = s.fc1Ns;
    s.schedNs = 60'000;

    auto maxNs = [](int64_t nominal) {
        return static_cast<int64_t>(static_cast<double>(nominal) * kJitterMax) + 1;
    };
    const int64_t fallbackNs =
        static_cast<int64_t>(static_cast<double>(s.attnNs) * kFallbackSlowdown);
    const int64_t groupNs = maxNs(s.lnNs) + maxNs(s.qkvNs) + maxNs(fallbackNs) + maxNs(s.outNs) +
                            maxNs(s.fc1Ns) + maxNs(40'000 * static_cast<int64_t>(kLayersPerGroup)) +
                            maxNs(s.fc2Ns) + 16 * kHostOpMaxNs;
    s.stepBudgetNs =
        cfg_.blockGroups * groupNs + maxNs(s.schedNs) + maxNs(200'000) + 8 * kHostOpMaxNs;
    s.endBudgetNs = cfg_.blockGroups * (2 * maxNs(300'000) + 4 * kHostOpMaxNs) +
                    3 * maxNs(kVaeTiledNs) + 2 * maxNs(12'000'000) + maxNs(500'000) +
                    24 * kHostOpMaxNs + 3'000'000;
    return s;
}

Block* Workload::alloc(uint64_t bytes, uint32_t stream, const Name& tag)
{
    hostOp();
    Block* b = alloc_.allocate(bytes, stream, tag, now_);
    now_ = std::max(now_, alloc_.time()); // the allocator may have waited on a pending free
    return b;
}

void Workload::asyncKernel(const Name& name, int64_t end, uint32_t stream)
{
    Event e;
    e.type = EventType::Kernel;
    e.time = now_;
    e.endTime = std::max(end, now_ + 1);
    e.name = name.id;
    e.stream = stream;
    e.device = cfg_.device;
    e.aux = ++correlation_;
    for (int i = 0; i < 3; ++i)
        e.grid[i] = e.block[i] = 1;
    e.grid[0] = 1024;
    e.block[0] = 256;
    out_.emit(e, name);
}

void Workload::release(Block*& b)
{
    if (!b) return; // its allocation failed (OOM): nothing to free
    hostOp();
    alloc_.free(b, now_);
    b = nullptr;
}

void Workload::hostOp()
{
    now_ += 1500 + static_cast<int64_t>(rng_.below(kHostOpMaxNs - 1500));
}

void Workload::kernel(const Name& name, int64_t nominalNs, uint32_t stream, uint32_t node,
                      std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block)
{
    const auto dur =
        static_cast<int64_t>(static_cast<double>(nominalNs) * rng_.uniform(0.95, kJitterMax));
    Event e;
    e.type = EventType::Kernel;
    e.time = now_;
    e.endTime = now_ + std::max<int64_t>(dur, 1);
    e.name = name.id;
    e.stream = stream;
    e.device = cfg_.device;
    e.aux = ++correlation_;
    e.aux2 = graphId_ && stream == kMainStream ? (graphId_ << 32 | node) : 0;
    for (int i = 0; i < 3; ++i) {
        e.grid[i] = std::max<uint32_t>(grid[static_cast<size_t>(i)], 1);
        e.block[i] = std::max<uint32_t>(block[static_cast<size_t>(i)], 1);
    }
    out_.emit(e, name);
    now_ = e.endTime;
}

void Workload::run()
{
    setup();
    int64_t f = 0;
    for (int64_t clip = 0; clip == 0 || out_.events() < cfg_.targetEvents; ++clip) {
        if (clip > 0) newClip(clip);
        if (mech_) mech_->clipStart(f, cfg_.frames);
        for (int64_t i = 0; i < cfg_.frames; ++i)
            frame(f++, i);
        if (mech_) mech_->clipEnd();
    }
    teardown();
}

void Workload::setup()
{
    // The text encoder (umT5-XXL, ~11 GiB) is loaded, run once and freed before the DiT is
    // loaded: its segments stay cached and the DiT weights are carved out of them.
    std::vector<Block*> t5;
    for (int i = 0; i < 24; ++i) {
        const uint64_t bytes = roundUp(static_cast<uint64_t>(rng_.uniform(420, 500) * kMiB), 4096);
        t5.push_back(alloc(bytes, kMainStream, tagTextEncoder_));
        idle(static_cast<int64_t>(static_cast<double>(bytes) / kCopyBytesPerNs));
    }
    cond_.push_back(alloc(kBatch * 512 * 4096 * kBf16, kMainStream, tagCond_));
    cond_.push_back(alloc(kBatch * 512 * 4096 * kBf16, kMainStream, tagNullCond_));
    for (int i = 0; i < 24; ++i)
        kernel(kT5_, 2'000'000, kMainStream, 0, {512 / 64, 64, 2}, {256, 1, 1});
    for (auto& b : t5)
        release(b);

    weights_.push_back(alloc(16 * 4 * kDim * kBf16, kMainStream, tagPatchEmbed_));
    const uint64_t dd = kDim * kDim * kBf16;
    const uint64_t sizes[] = {
        3 * dd, dd, 2 * dd, 2 * dd, kDim * kFfn * kBf16, kFfn * kDim * kBf16, 3 * kDim * kBf16};
    const uint64_t layers = static_cast<uint64_t>(cfg_.blockGroups) * kLayersPerGroup;
    for (uint64_t layer = 0; layer < layers; ++layer) {
        for (size_t t = 0; t < tagWeights_.size(); ++t) {
            weights_.push_back(alloc(sizes[t], kMainStream, tagWeights_[t]));
            idle(static_cast<int64_t>(static_cast<double>(sizes[t]) / kCopyBytesPerNs));
        }
    }
    for (int i = 0; i < 8; ++i) {
        const uint64_t bytes = roundUp(static_cast<uint64_t>(rng_.uniform(20, 40) * kMiB), 4096);
        weights_.push_back(alloc(bytes, kSideStream, tagVaeWeights_));
        idle(static_cast<int64_t>(static_cast<double>(bytes) / kCopyBytesPerNs));
    }
}

void Workload::newClip(int64_t clip)
{
    // The next video: new prompt embeddings (encoded on the host); the temporal cache and the
    // long-range memory of the previous video are dropped. The allocator keeps its cached
    // segments, as PyTorch does.
    for (auto* store : {&kvCache_, &memory_}) {
        for (auto& entry : *store)
            for (Block*& b : entry)
                release(b);
        store->clear();
    }
    for (Block*& b : cond_)
        release(b);
    cond_.clear();
    hostOp();
    Event m;
    m.type = EventType::Mark;
    m.time = now_;
    m.device = cfg_.device;
    const Name mn = out_.intern(fmt::format("video {} start (prompt {})", clip, rng_.below(1000)));
    m.name = mn.id;
    out_.emit(m, mn);
    cond_.push_back(alloc(kBatch * 512 * 4096 * kBf16, kMainStream, tagCond_));
    cond_.push_back(alloc(kBatch * 512 * 4096 * kBf16, kMainStream, tagNullCond_));
}

void Workload::frame(int64_t f, int64_t inClip)
{
    const Shape s = shape(inClip);
    FrameStats fs;
    fs.workspaceBytes = s.workspace;
    oomsAtFrameStart_ = alloc_.counters().ooms;
    const int64_t start = now_;
    const int64_t end = start + cfg_.steps * s.stepBudgetNs + s.endBudgetNs;

    // The frame as an NVTX range, emitted when it opens (its planned end is known: every phase
    // runs within a fixed time budget, the GPU idles for what is left).
    Event r;
    r.type = EventType::Range;
    r.time = start;
    r.endTime = end;
    r.device = cfg_.device;
    const Name rn = out_.intern(fmt::format("frame {}", f));
    r.name = rn.id;
    out_.emit(r, rn);

    Block* latent = alloc(kBatch * s.tokens * 16 * 4, kMainStream, tagLatent_);
    Block* noise = alloc(kBatch * s.tokens * 16 * 4, kMainStream, tagNoise_);
    if (mech_) {
        mixedSteps(s, f, inClip, fs);
    } else {
        graphId_ = static_cast<uint64_t>(f) + 1; // re-captured per frame: the shapes change
    }
    for (int64_t i = 0; !mech_ && i < cfg_.steps; ++i) {
        const int64_t stepStart = now_;
        step(s, f, fs);
        if (now_ > stepStart + s.stepBudgetNs)
            throw std::logic_error("simulator: a step overran its time budget");
        now_ = stepStart + s.stepBudgetNs;
    }
    graphId_ = 0;
    frameEnd(s, fs);
    release(latent);
    release(noise);
    if (mech_) mech_->frameDone();
    if (now_ > end) throw std::logic_error("simulator: a frame overran its time budget");
    now_ = end;

    // Toy coherence model (docs/simulator.md): every attention call that had to fall back to the
    // split-KV kernel changes the numerics a little, and the denoising loop amplifies it.
    fs.ooms = static_cast<int>(alloc_.counters().ooms - oomsAtFrameStart_);
    const double frac =
        fs.attentionCalls ? static_cast<double>(fs.fallbacks) / fs.attentionCalls : 0.0;
    double score = rng_.uniform(0.93, 0.98);
    if (!mech_ || !mech_->appliesFallback()) score *= std::exp(-kCoherenceDrop * frac);
    std::vector<SimTruthFrame::Cause> causes;
    if (mech_)
        score *= mech_->qualityFactor(fs, frac, causes);
    else if (fs.ooms > 0)
        score *= 0.25; // tensors were missing altogether
    std::string scoreText, idText, flowText;
    fs.coherence = printed(score, 4, scoreText);
    printed(std::min(0.99, 0.52 + 0.45 * std::sqrt(fs.coherence) + rng_.uniform(-0.01, 0.01)), 4,
            idText);
    printed(1.6 + 8.5 * (1 - fs.coherence) * (1 - fs.coherence) + rng_.uniform(0, 0.4), 3,
            flowText);
    const FreeSpace free = alloc_.freeSpace();
    fs.reserved = alloc_.counters().reserved;
    fs.allocated = alloc_.counters().allocated;
    fs.largestFree = free.largestFree;
    fs.totalFree = free.totalFree;
    fs.fragmentation = free.fragmentation();

    Event m;
    m.type = EventType::Mark;
    m.time = now_;
    m.device = cfg_.device;
    const Name mn =
        out_.intern(fmt::format("metric coherence_score={} id_match_rate={} flow_l2_px={} frame={}",
                                scoreText, idText, flowText, f));
    m.name = mn.id;
    out_.emit(m, mn);
    frames_.push_back(fs);

    // Ground truth for evaluations (the sim_truth_* tables): only the attention fallbacks and
    // OOMs enter the coherence model above.
    SimTruthFrame truth;
    truth.frame = f;
    truth.attentionCalls = fs.attentionCalls;
    truth.workspaceFailures = fs.fallbacks;
    truth.ooms = fs.ooms;
    const std::pair<const char*, int> fallbacks[] = {
        {kAttnFallbackName, fs.fallbacks - fs.mathFallbacks},
        {kAttnMathName, fs.mathFallbacks},
        {kVaeTiledName, fs.tiledDecodes}};
    for (const auto& [name, calls] : fallbacks)
        if (calls > 0)
            truth.fallbackKernels.push_back(
                {name, calls, std::string_view(name) != std::string_view(kVaeTiledName)});
    if (!mech_ && (frac > 0 || fs.ooms > 0))
        causes.push_back({"workspace_fallback", f,
                          std::exp(-kCoherenceDrop * frac) * (fs.ooms > 0 ? 0.25 : 1.0)});
    truth.causes = std::move(causes);
    out_.sink().addSimTruth(truth);
}

void Workload::mixedSteps(const Shape& s, int64_t f, int64_t inClip, FrameStats& fs)
{
    const int64_t stepsEnd = now_ + cfg_.steps * s.stepBudgetNs;
    // The frame's end (Workload::frame): its start was two allocator calls before now.
    mech_->frameStart(f, inClip, s.workspace, s.stepBudgetNs, stepsEnd,
                      stepsEnd + s.endBudgetNs - 2 * kHostOpMaxNs);
    const int64_t first = now_;
    for (int64_t i = 0; i < cfg_.steps; ++i) {
        const int64_t planned = first + i * s.stepBudgetNs;
        // A frame that fell behind its schedule (the host stalled) drops the steps it has no
        // time for: the refinement they would have done is skipped.
        if (now_ > planned) {
            ++fs.skippedSteps;
            continue;
        }
        now_ = planned;
        if (!mech_->beforeStep(i)) {
            ++fs.skippedSteps;
            continue;
        }
        graphId_ = mech_->graphId();
        step(s, f, fs);
        mech_->afterStep(i);
    }
    mech_->stepsDone();
    now_ = std::max(now_, first + cfg_.steps * s.stepBudgetNs);
}

void Workload::step(const Shape& s, int64_t f, FrameStats& fs)
{
    (void)f;
    if (graphId_) { // eager steps (mixed mode) launch no graph
        Event g;
        g.type = EventType::GraphLaunch;
        g.time = now_;
        g.endTime = now_ + s.stepBudgetNs;
        g.stream = kMainStream;
        g.device = cfg_.device;
        g.aux = graphId_;  // graph id
        g.aux2 = graphId_; // exec id
        out_.emit(g, Name{});
    }

    Block* x = alloc(s.hidden, kMainStream, tagStepIn_);
    // Occasionally a large transient (the guidance buffer of a step that re-weights CFG).
    Block* cfgBuf = nullptr;
    if (rng_.chance(cfg_.transientChance)) {
        const uint64_t bytes = roundUp(
            static_cast<uint64_t>(rng_.uniform(0.4, 1.0) * static_cast<double>(kGiB)), kMiB);
        cfgBuf = alloc(bytes, kMainStream, tagCfg_);
    }
    uint32_t node = 0;
    for (int grp = 0; grp < cfg_.blockGroups; ++grp)
        blockGroup(s, x, fs, node);
    if (cfgBuf)
        kernel(kCfg_, 200'000, kMainStream, node++, {u32(s.tokens / 128), 1, 1}, {256, 1, 1});
    kernel(kSched_, s.schedNs, kMainStream, node++, {u32(s.tokens / 128), 1, 1}, {256, 1, 1});
    release(x);
    release(cfgBuf);
}

void Workload::blockGroup(const Shape& s, Block*& x, FrameStats& fs, uint32_t& node)
{
    const uint32_t rows = u32(kBatch * s.tokens);
    Block* n = alloc(s.hidden, kMainStream, tagAct_[0]);
    kernel(kLayerNorm_, s.lnNs, kMainStream, node++, {rows, 1, 1}, {256, 1, 1});
    Block* qkv = alloc(3 * s.hidden, kMainStream, tagAct_[1]);
    kernel(kGemmQkv_, s.qkvNs, kMainStream, node++, {u32(rows / 256 + 1), u32(3 * kDim / 128), 1},
           {384, 1, 1});
    release(n);

    // Attention wants one contiguous workspace. When the allocator cannot give it (no cached
    // block large enough and no room for a new segment even after releasing the cache), the
    // library falls back to the split-KV kernel with an eighth of the workspace.
    ++fs.attentionCalls;
    hostOp();
    Block* ws = alloc_.tryAllocate(s.workspace, kMainStream, tagWorkspace_, now_);
    now_ = std::max(now_, alloc_.time());
    const Name* attn = &kAttn_;
    int64_t attnNs = s.attnNs;
    std::array<uint32_t, 3> grid{u32(s.tokens / 128 + 1), 40, u32(kBatch)};
    if (!ws) {
        ++fs.fallbacks;
        ++fallbackKernels_;
        attnNs = static_cast<int64_t>(static_cast<double>(s.attnNs) * kFallbackSlowdown);
        grid = {u32(s.tokens / 64 + 1), 40, u32(kBatch * 4)};
        hostOp();
        ws = alloc_.tryAllocate(s.workspace / 8, kMainStream, tagWorkspaceSplit_, now_);
        now_ = std::max(now_, alloc_.time());
        attn = &kAttnFallback_;
        if (!ws) {
            // Even the small workspace is unavailable: the math path, which reports the OOM.
            ws = alloc(s.workspace / 8, kMainStream, tagWorkspaceSplit_);
            attn = &kAttnMath_;
            ++fs.mathFallbacks;
        }
    }
    Block* o = alloc(s.hidden, kMainStream, tagAct_[2]);
    kernel(*attn, attnNs, kMainStream, node++, grid, {128, 1, 1});
    release(ws);
    release(qkv);

    Block* proj = alloc(s.hidden, kMainStream, tagAct_[3]);
    kernel(kGemmOut_, s.outNs, kMainStream, node++, {u32(rows / 128 + 1), u32(kDim / 128), 1},
           {256, 1, 1});
    release(o);
    Block* mlp = alloc(s.ffn, kMainStream, tagAct_[4]);
    kernel(mech_ ? mech_->fc1Kernel() : kGemmFc1_, s.fc1Ns, kMainStream, node++,
           {u32(rows / 256 + 1), u32(kFfn / 128), 1}, {384, 1, 1});
    kernel(kGelu_, 40'000 * static_cast<int64_t>(kLayersPerGroup), kMainStream, node++,
           {rows, 1, 1}, {512, 1, 1});
    Block* next = alloc(s.hidden, kMainStream, tagHidden_);
    kernel(kGemmFc2_, s.fc2Ns, kMainStream, node++, {u32(rows / 256 + 1), u32(kDim / 128), 1},
           {384, 1, 1});
    if (mech_) { // mixed mode: a copy stream may still read them (record_stream)
        mech_->releaseActivation(mlp);
        mech_->releaseActivation(proj);
        mech_->releaseActivation(x);
    } else {
        release(mlp);
        release(proj);
        release(x);
    }
    x = next;
}

void Workload::frameEnd(const Shape& s, FrameStats& fs)
{
    // The frame's keys and values join the temporal-attention cache; the oldest frame leaves it
    // once the window is full. Entries differ in size from frame to frame (tokens kept after
    // merging), so a new entry rarely fits the hole an old one left exactly.
    while (kvCache_.size() >= static_cast<size_t>(cfg_.contextFrames)) {
        for (Block*& b : kvCache_.front())
            release(b);
        kvCache_.pop_front();
    }
    std::vector<Block*> entry;
    for (int g = 0; g < cfg_.blockGroups; ++g) {
        const uint64_t kept = roundUp(
            static_cast<uint64_t>(static_cast<double>(s.tokens) * rng_.uniform(0.8, 1.0)), 16);
        entry.push_back(
            alloc(kept * kDim * kBf16 * 2 * kBatch * kLayersPerGroup, kMainStream, tagKv_));
        kernel(kKvAppend_, 300'000, kMainStream, 0, {u32(kept / 64 + 1), 40, 2}, {128, 1, 1});
    }
    kvCache_.push_back(std::move(entry));
    // The long-range memory keeps a compressed summary of each frame; these small blocks pile up
    // over the run and pin the segments they land in.
    std::vector<Block*> summary;
    const uint64_t memTokens = roundUp(s.tokens / cfg_.memoryTokenDivisor, 16);
    for (int g = 0; g < cfg_.blockGroups; ++g) {
        const uint64_t bytes =
            roundUp(static_cast<uint64_t>(static_cast<double>(memTokens) * rng_.uniform(0.8, 1.2)),
                    16) *
            kDim * kBf16 * 2 * kBatch * kLayersPerGroup;
        summary.push_back(alloc(bytes, kMainStream, tagMemory_));
        kernel(kMemory_, 300'000, kMainStream, 0, {u32(memTokens / 64 + 1), 40, 2}, {128, 1, 1});
    }
    memory_.push_back(std::move(summary));
    while (memory_.size() > static_cast<size_t>(cfg_.memoryFrames)) {
        for (Block*& b : memory_.front())
            release(b);
        memory_.pop_front();
    }

    // VAE decode on the side stream: its blocks live in that stream's own segments. Short of
    // memory it decodes in tiles with a quarter of the buffer (slower, same frame).
    const uint64_t bufBytes =
        roundUp(static_cast<uint64_t>(rng_.uniform(2.0, 3.5) * static_cast<double>(kGiB)), kMiB);
    hostOp();
    Block* buf = alloc_.tryAllocate(bufBytes, kSideStream, tagVaeBuf_, now_);
    bool tiled = false;
    if (!buf) {
        tiled = true;
        fs.tiledDecodes = 3; // every conv of the decode runs tiled
        buf = alloc(bufBytes / 4, kSideStream, tagVaeBuf_);
    }
    std::array<Block*, 3> tmp{};
    for (auto& t : tmp)
        t = alloc(roundUp(static_cast<uint64_t>(rng_.uniform(24, 40) * kMiB), 4096), kSideStream,
                  tagVaeTmp_);
    for (int i = 0; i < 3; ++i)
        kernel(tiled ? kVaeConvTiled_ : kVaeConv_, tiled ? kVaeTiledNs : kVaeConvNs, kSideStream, 0,
               {80, 45, 16}, {256, 1, 1});
    for (int i = 0; i < 2; ++i)
        kernel(kVaeUp_, 12'000'000, kSideStream, 0, {160, 90, 16}, {256, 1, 1});
    for (auto& t : tmp)
        release(t);
    Block* rgb = alloc(1280 * 720 * 3, kSideStream, tagRgb_);
    kernel(kQuantize_, 500'000, kSideStream, 0, {3600, 1, 1}, {256, 1, 1});
    release(buf);
    if (mech_)
        mech_->releaseFrameOutput(rgb);
    else
        release(rgb);
}

void Workload::teardown()
{
    for (auto* store : {&kvCache_, &memory_}) {
        for (auto& entry : *store)
            for (Block*& b : entry)
                release(b);
        store->clear();
    }
    for (Block*& b : cond_)
        release(b);
    for (auto it = weights_.rbegin(); it != weights_.rend(); ++it)
        release(*it);
    cond_.clear();
    weights_.clear();
    hostOp();
    alloc_.emptyCache(now_); // torch.cuda.empty_cache() at exit: every segment goes back
}

} // namespace fs::sim
