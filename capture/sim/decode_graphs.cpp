// `simulate --workload decode-graphs` (docs/simulator.md "Graph workloads"): an LLM server's
// decode loop. One CUDA graph per batch size is captured, largest first, each into its own
// private pool (PyTorch's default for a capture without `pool=`); every decode step replays the
// graph of its batch size. A speculative-decoding draft graph in its own pool replays on a side
// stream while decode graphs run. SYNTHETIC.
#include "graph_workload.h"

#include <algorithm>
#include <deque>
#include <fmt/format.h>
#include <stdexcept>

namespace fs::sim {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kHidden = 4096; // a 7-8 B decoder
constexpr uint64_t kQkv = 6144;
constexpr uint64_t kFfn = 14336;
constexpr uint64_t kVocab = 32000;
constexpr uint64_t kLayers = 32;
constexpr uint64_t kBf16 = 2;
constexpr int kLayerGroups = 4; // a capture's intermediates, in groups of eight layers
constexpr uint64_t kBatchSizes[] = {256, 128, 64, 32, 16, 8, 4, 2, 1};
constexpr size_t kSizes = std::size(kBatchSizes);
constexpr uint64_t kDraftBatch = 4;

// PyTorch names a capture's own pool (k, 0): graph_pool_handle() ids are (0, k).
constexpr uint64_t privatePool(uint64_t k)
{
    return k << 32;
}

class DecodeGraphs final : public GraphWorkload
{
public:
    DecodeGraphs(const Config& cfg, EventWriter& out, std::map<uint64_t, uint64_t> merge)
        : GraphWorkload(cfg, out, std::move(merge))
    {
        if (cfg_.replays < 1)
            throw std::invalid_argument("simulator: decode-graphs needs at least one replay");
        auto n = [&](std::string_view s) { return out_.intern(s); };
        tagWeights_ = n("weights.decoder");
        tagKv_ = n("kv_cache.blocks");
        tagInput_ = n("decode.static_input");
        tagQkv_ = n("graph.act.qkv");
        tagAttn_ = n("graph.act.attn");
        tagMlp_ = n("graph.act.mlp");
        tagHidden_ = n("graph.act.hidden");
        tagLogits_ = n("graph.out.logits");
        tagSampler_ = n("sampler.probs");
        tagPrefill_ = n("prefill.act");
        kForward_ = n("decode_layers_paged_attention_kernel");
        kSample_ = n("sampler_topk_topp_kernel");
        kDraft_ = n("draft_model_forward_kernel");
    }

    void run() override;
    std::vector<std::vector<uint64_t>> sharingGroups() const override
    {
        // Decode graphs run one after another on the compute stream: all may share one pool
        // (vLLM and SGLang do share one). The draft graph runs beside them.
        std::vector<uint64_t> decode;
        for (size_t k = 0; k < kSizes; ++k)
            decode.push_back(privatePool(k + 1));
        return {decode};
    }

private:
    // The graph's capture: per layer group qkv -> attention -> MLP -> hidden, freed as the
    // next needs them (they stay cached in the private pool), and the logits it keeps.
    void captureForward(uint64_t batch)
    {
        Block* x = nullptr;
        for (int grp = 0; grp < kLayerGroups; ++grp) {
            Block* qkv = captureAlloc(batch * kQkv * kBf16, tagQkv_);
            Block* attn = captureAlloc(batch * kHidden * kBf16, tagAttn_);
            release(qkv);
            Block* mlp = captureAlloc(batch * 2 * kFfn * kBf16, tagMlp_);
            release(attn);
            Block* next = captureAlloc(batch * kHidden * kBf16, tagHidden_);
            release(mlp);
            release(x);
            x = next;
        }
        captureAlloc(batch * kVocab * 4, tagLogits_, true);
        release(x);
    }
    static int64_t nominalNs(uint64_t batch)
    {
        return 1'200'000 + static_cast<int64_t>(batch) * 9'000;
    }

    Name tagWeights_, tagKv_, tagInput_, tagQkv_, tagAttn_, tagMlp_, tagHidden_, tagLogits_,
        tagSampler_, tagPrefill_;
    Name kForward_, kSample_, kDraft_;
};

void DecodeGraphs::run()
{
    std::vector<Block*> held; // the default pool's long-lived tensors
    held.push_back(alloc(kVocab * kHidden * kBf16, kMainStream, tagWeights_));
    const uint64_t perLayer[] = {kHidden * kQkv * kBf16, kHidden * kHidden * kBf16,
                                 kHidden * 2 * kFfn * kBf16, kFfn * kHidden * kBf16};
    for (uint64_t l = 0; l < kLayers; ++l)
        for (uint64_t bytes : perLayer)
            held.push_back(alloc(bytes, kMainStream, tagWeights_));
    held.push_back(alloc(24ull << 30, kMainStream, tagKv_)); // the paged KV cache
    held.push_back(alloc(kBatchSizes[0] * 8, kMainStream, tagInput_));

    std::vector<size_t> graph(kSizes);
    for (size_t k = 0; k < kSizes; ++k) {
        graph[k] =
            addGraph(fmt::format("decode bs={}", kBatchSizes[k]), privatePool(k + 1), kMainStream);
        capture(graph[k], 40'000'000, [&] { captureForward(kBatchSizes[k]); });
    }
    const size_t draft = addGraph("draft bs=4", privatePool(kSizes + 1), kSideStream);
    capture(draft, 20'000'000, [&] { captureForward(kDraftBatch); });

    // Decode steps: a warm-up visits every batch size once, then the batch size follows the
    // load (a random walk). The draft runs beside the first replay of every batch size and
    // every eighth step after.
    std::vector<bool> drafted(kSizes, false);
    std::deque<Block*> prefill;
    size_t bi = kSizes / 2;
    for (int64_t s = 0; s < cfg_.replays; ++s) {
        if (s < static_cast<int64_t>(kSizes))
            bi = static_cast<size_t>(s);
        else if (s == static_cast<int64_t>(kSizes))
            bi = kSizes / 2;
        else if (s % 64 == 0)
            bi = static_cast<size_t>(std::clamp<int64_t>(
                static_cast<int64_t>(bi) + static_cast<int64_t>(rng_.below(3)) - 1, 0,
                static_cast<int64_t>(kSizes) - 1));
        const uint64_t batch = kBatchSizes[bi];
        if (s % 16 == 0) { // a prefill chunk's activations in the default pool, kept a while
            for (int i = 0; i < 2; ++i)
                prefill.push_back(alloc(static_cast<uint64_t>(rng_.uniform(64, 512)) * kMiB,
                                        kMainStream, tagPrefill_));
            while (prefill.size() > 4) {
                release(prefill.front());
                prefill.pop_front();
            }
        }
        Block* probs = alloc(batch * kVocab * kBf16, kMainStream, tagSampler_);
        const int64_t start = now_ + 2000;
        const auto dur =
            static_cast<int64_t>(static_cast<double>(nominalNs(batch)) * rng_.uniform(0.97, 1.06));
        const int64_t end = replay(graph[bi], start, dur, {{kForward_, 0.9}, {kSample_, 0.1}});
        if (!drafted[bi] || s % 8 == 0) {
            replay(draft, start + dur / 10, dur * 6 / 10, {{kDraft_, 1.0}});
            concurrent(graph[bi], draft);
            drafted[bi] = true;
        }
        now_ = end; // the host waits for the sampled tokens
        release(probs);
    }
    for (Block*& b : prefill)
        release(b);
    teardown(held);
}

} // namespace

std::unique_ptr<GraphWorkload> makeDecodeGraphs(const Config& cfg, EventWriter& out,
                                                std::map<uint64_t, uint64_t> merge)
{
    return std::make_unique<DecodeGraphs>(cfg, out, std::move(merge));
}

} // namespace fs::sim
