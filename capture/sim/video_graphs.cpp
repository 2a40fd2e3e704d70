// `simulate --workload video-graphs` (docs/simulator.md "Graph workloads"): two videos of a
// video-diffusion model whose denoising step is a captured CUDA graph, replayed once per step
// and re-captured (into its pool again) whenever the latent's shape changes: the first half of
// each video is generated at 480p, the second at 720p. The prompt encoder is a graph replayed at
// each video's start; the VAE decode is a graph replayed on a side stream at each frame's end,
// while the next frame's first steps run. SYNTHETIC.
#include "graph_workload.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace fs::sim {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kDim = 5120;
constexpr uint64_t kFfn = 13824;
constexpr uint64_t kBatch = 2; // classifier-free guidance
constexpr uint64_t kBf16 = 2;
constexpr int kBlockGroups = 4;
constexpr int kVideos = 2;
constexpr uint64_t kPromptPool = uint64_t{1} << 32;
constexpr uint64_t kDenoisePool = uint64_t{2} << 32;
constexpr uint64_t kVaePool = uint64_t{3} << 32;

class VideoGraphs final : public GraphWorkload
{
public:
    VideoGraphs(const Config& cfg, EventWriter& out, std::map<uint64_t, uint64_t> merge)
        : GraphWorkload(cfg, out, std::move(merge))
    {
        if (cfg_.frames < 1 || cfg_.steps < 1)
            throw std::invalid_argument("simulator: frames and steps must be >= 1");
        auto n = [&](std::string_view s) { return out_.intern(s); };
        tagWeights_ = n("weights.dit");
        tagVaeWeights_ = n("vae.weights");
        tagLatent_ = n("frame.latent");
        tagSched_ = n("step.scheduler_tmp");
        tagText_ = n("graph.act.text");
        tagEmbeds_ = n("graph.out.text_embeds");
        tagQkv_ = n("graph.act.qkv");
        tagWs_ = n("graph.act.attn_workspace");
        tagMlp_ = n("graph.act.mlp");
        tagHidden_ = n("graph.act.hidden");
        tagDenoised_ = n("graph.out.denoised");
        tagConv_ = n("graph.act.vae_conv");
        tagRgb_ = n("graph.out.rgb");
        kT5_ = n("umt5_encoder_layer_kernel");
        kAttn_ = n("flash_attn_fwd_kernel");
        kMlp_ = n("sm90_xmma_gemm_bf16_mlp_kernel");
        kVae_ = n("vae_decode_conv3d_kernel");
    }

    void run() override;
    std::vector<std::vector<uint64_t>> sharingGroups() const override
    {
        // The prompt encoder and the denoising step run one after the other on the compute
        // stream; the VAE decode overlaps both.
        return {{kPromptPool, kDenoisePool}};
    }

private:
    // 480p in the first half of a video, 720p in the second (latent tokens per frame).
    uint64_t tokens(int64_t frameInVideo) const
    {
        return frameInVideo < cfg_.frames / 2 ? 1560 : 3600;
    }
    static int64_t stepNs(uint64_t tokens) { return static_cast<int64_t>(tokens) * 7'800; }
    void captureDenoise(uint64_t t)
    {
        Block* x = nullptr;
        for (int grp = 0; grp < kBlockGroups; ++grp) {
            Block* qkv = captureAlloc(3 * kBatch * t * kDim * kBf16, tagQkv_);
            Block* ws = captureAlloc(4 * t * kDim * kBf16, tagWs_);
            release(qkv);
            Block* mlp = captureAlloc(kBatch * t * kFfn * kBf16, tagMlp_);
            release(ws);
            Block* next = captureAlloc(kBatch * t * kDim * kBf16, tagHidden_);
            release(mlp);
            release(x);
            x = next;
        }
        captureAlloc(kBatch * t * 16 * 4, tagDenoised_, true);
        release(x);
    }

    Name tagWeights_, tagVaeWeights_, tagLatent_, tagSched_, tagText_, tagEmbeds_, tagQkv_, tagWs_,
        tagMlp_, tagHidden_, tagDenoised_, tagConv_, tagRgb_;
    Name kT5_, kAttn_, kMlp_, kVae_;
};

void VideoGraphs::run()
{
    std::vector<Block*> held;
    for (int i = 0; i < 20; ++i)
        held.push_back(
            alloc(static_cast<uint64_t>(rng_.uniform(400, 600)) * kMiB, kMainStream, tagWeights_));
    for (int i = 0; i < 8; ++i)
        held.push_back(
            alloc(static_cast<uint64_t>(rng_.uniform(20, 40)) * kMiB, kSideStream, tagVaeWeights_));
    const size_t prompt = addGraph("prompt_encode", kPromptPool, kMainStream);
    const size_t denoise = addGraph("denoise_step", kDenoisePool, kMainStream);
    const size_t vae = addGraph("vae_decode", kVaePool, kSideStream);

    uint64_t captured = 0; // the denoising graph's tokens
    bool vaeCaptured = false;
    int64_t vaeEnd = 0;
    for (int v = 0; v < kVideos; ++v) {
        if (v == 0)
            capture(prompt, 30'000'000, [&] {
                // umT5-XXL's layer activations: large, freed when the embeddings are out (their
                // blocks stay cached in the pool: what a shared pool would lend the denoiser).
                std::vector<Block*> act;
                for (int i = 0; i < 3; ++i)
                    act.push_back(captureAlloc(static_cast<uint64_t>(rng_.uniform(160, 320)) * kMiB,
                                               tagText_));
                captureAlloc(kBatch * 512 * 4096 * kBf16, tagEmbeds_, true);
                for (Block*& a : act)
                    release(a);
            });
        const int64_t ps = now_ + 2000;
        const int64_t pe = replay(prompt, ps, 25'000'000, {{kT5_, 1.0}});
        if (ps < vaeEnd) concurrent(prompt, vae); // the last frame's decode is still running
        now_ = pe;
        for (int64_t f = 0; f < cfg_.frames; ++f) {
            const uint64_t t = tokens(f);
            if (t != captured) {
                capture(denoise, 80'000'000, [&] { captureDenoise(t); });
                captured = t;
            }
            Block* latent = alloc(kBatch * t * 16 * 4, kMainStream, tagLatent_);
            for (int64_t s = 0; s < cfg_.steps; ++s) {
                Block* tmp = alloc(static_cast<uint64_t>(rng_.uniform(1, 64)) * kMiB, kMainStream,
                                   tagSched_);
                const int64_t start = now_ + 2000;
                const auto dur =
                    static_cast<int64_t>(static_cast<double>(stepNs(t)) * rng_.uniform(0.98, 1.05));
                const int64_t end = replay(denoise, start, dur, {{kAttn_, 0.6}, {kMlp_, 0.4}});
                if (start < vaeEnd) concurrent(denoise, vae);
                now_ = end;
                release(tmp);
            }
            release(latent);
            if (!vaeCaptured) {
                capture(vae, 60'000'000, [&] {
                    for (int i = 0; i < 3; ++i) {
                        Block* c = captureAlloc(static_cast<uint64_t>(rng_.uniform(96, 160)) * kMiB,
                                                tagConv_);
                        release(c);
                    }
                    captureAlloc(1280 * 720 * 3, tagRgb_, true);
                });
                vaeCaptured = true;
            }
            // The decode overlaps the next frame's first steps (up to three), never the next
            // decode: it lasts less than a frame.
            const double steps = std::min<double>(3.0, static_cast<double>(cfg_.steps)) - 0.05;
            const int64_t vs = now_ + 2000;
            vaeEnd = replay(vae, vs, static_cast<int64_t>(static_cast<double>(stepNs(t)) * steps),
                            {{kVae_, 1.0}});
        }
    }
    teardown(held);
}

} // namespace

std::unique_ptr<GraphWorkload> makeVideoGraphs(const Config& cfg, EventWriter& out,
                                               std::map<uint64_t, uint64_t> merge)
{
    return std::make_unique<VideoGraphs>(cfg, out, std::move(merge));
}

} // namespace fs::sim
