// A synthetic video-diffusion generation run on a simulated GPU (docs/simulator.md).
// The simulator knows nothing about files or ingest: it writes the whole session through an
// fs::EventSink, so the same events can go into a session file or a live stream.
// Everything it produces is SYNTHETIC: its coherence scores come from a toy model, not from
// images.
#pragma once

#include "core/event_sink.h"
#include "graph_truth.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fs::sim {

// Which collapse mechanisms a run contains (docs/simulator.md "Mechanisms").
enum class MechanismSet : uint8_t {
    // One mechanism, emergent: attention falls back to another kernel when the allocator cannot
    // give it its workspace (the default run: demo, tests and golden files rely on it).
    Workspace,
    // Several mechanisms per video, triggered at random frames with random parameters, plus
    // content-caused collapses and quiet distractors; the cause of every collapse is recorded.
    Mixed,
    // The mixed mechanisms, each also in healthy frames at a per-seed base rate without lowering
    // the score; a triggered one collapses its frame only with a per-seed chance, two may act in
    // one frame, the score has per-seed noise (docs/simulator.md "Realistic mechanisms").
    Realistic,
};
const char* mechanismSetName(MechanismSet m);
bool parseMechanismSet(std::string_view text, MechanismSet& out);

// What the simulated program is (docs/simulator.md): the default video-diffusion run, or one of
// the CUDA-graph workloads (graph_workload.h).
enum class WorkloadKind : uint8_t {
    VideoDiffusion, // the default run
    DecodeGraphs,   // LLM decoding: one graph per batch size, each in its own private pool
    VideoGraphs,    // video generation: denoising steps replay a graph re-captured per shape
};
const char* workloadName(WorkloadKind k);
bool parseWorkload(std::string_view name, WorkloadKind& out);

struct Config
{
    int64_t frames = 24; // frames of one generated video (clip)
    int64_t steps = 20;  // denoising steps per frame
    uint64_t seed = 17;
    // > 0: keep generating further videos of `frames` frames each until at least this many events
    // were emitted (memory stays bounded: nothing is held per event).
    int64_t targetEvents = 0;
    uint64_t capacityBytes = 80ull << 30; // usable device memory
    uint32_t device = 0;
    std::string deviceName = "Simulated H100 80GB (synthetic)";
    int64_t startTimeNs = 1'000'000'000;
    // Workload shape (docs/simulator.md "Workload").
    int blockGroups = 8;   // transformer layers are simulated in groups of five
    int contextFrames = 8; // temporal-attention window (frames kept in the KV cache)
    // Long-range memory: a compressed summary of every earlier frame (up to this many frames)
    // that the model keeps for consistency; small blocks that accumulate over the run.
    int memoryFrames = 24;
    uint64_t memoryTokenDivisor = 64; // summary tokens = frame tokens / this
    uint64_t tokensPerFrame = 3600;   // latent tokens per frame (720p, 2x2 patches)
    double transientChance = 0.15;    // chance per step of a large transient (CFG) buffer
    // Contiguous attention workspace: base + perFrame x (frames in the temporal window), MiB.
    uint64_t workspaceBaseMiB = 128;
    uint64_t workspacePerFrameMiB = 400;
    MechanismSet mechanisms = MechanismSet::Workspace;
    WorkloadKind workload = WorkloadKind::VideoDiffusion;
    // decode-graphs: decode steps, one graph replay each (video-graphs replays frames x steps
    // per video, two videos).
    int64_t replays = 20000;
};

// Per-frame view of the simulator, recorded at the end of each frame.
struct FrameStats
{
    double coherence = 0; // the metric emitted for the frame
    int attentionCalls = 0;
    int fallbacks = 0;           // attention calls that could not get their workspace
    int mathFallbacks = 0;       // ... of which not even the small split-KV one (math kernel)
    int tiledDecodes = 0;        // VAE decode calls that ran tiled (no effect on coherence)
    int skippedSteps = 0;        // denoising steps dropped because the frame ran late (mixed)
    int ooms = 0;                // OOMs during the frame
    uint64_t workspaceBytes = 0; // contiguous workspace the frame's attention asked for
    uint64_t reserved = 0;       // at the end of the frame
    uint64_t allocated = 0;
    uint64_t largestFree = 0;
    uint64_t totalFree = 0;
    double fragmentation = 0; // 1 - largest free / total free
};

struct Stats
{
    int64_t events = 0;
    uint64_t eventHash = 0; // hash of every event emitted (strings by their text)
    int64_t allocs = 0;
    int64_t frees = 0;
    int64_t segmentsCreated = 0;
    int64_t segmentsReleased = 0;
    int64_t ooms = 0;
    int64_t cacheFlushes = 0;
    int64_t kernels = 0;
    int64_t fallbackKernels = 0;
    int64_t graphLaunches = 0;
    int64_t marks = 0;  // Mark events (metrics)
    int64_t ranges = 0; // Range events (frames)
    int64_t frames = 0;
    int64_t collapsedFrames = 0; // coherence_score < kCollapseThreshold
    uint64_t peakReserved = 0;
    uint64_t peakAllocated = 0;
    uint64_t allocatedAtEnd = 0;
    uint64_t reservedAtEnd = 0;
    int64_t liveBlocksAtEnd = 0;
    int64_t timeBegin = 0;
    int64_t timeEnd = 0;
    std::vector<FrameStats> perFrame;
    std::optional<GraphTruth> graphs; // the graph workloads' ground truth (SYNTHETIC)
};

inline constexpr double kCollapseThreshold = 0.05; // default rule: coherence_score < 0.05

class EventWriter;
struct AllocatorCounters;
// The figures of Stats every workload fills the same way: events by type, the allocator's
// counters, the time span.
Stats baseStats(const EventWriter& out, const AllocatorCounters& c);

class Simulator
{
public:
    // Called about every 64k events with the number emitted so far and the expected total.
    using ProgressFn = std::function<void(int64_t done, int64_t total)>;

    explicit Simulator(Config cfg);
    const Config& config() const { return cfg_; }
    // Rough number of events a run of this configuration emits (for progress totals).
    int64_t estimatedEvents() const;
    // Emits the whole run into sink (each call is a fresh, identical run for the same Config).
    // Throws std::invalid_argument for a Config it cannot run (frames or steps < 1, ...).
    Stats run(EventSink& sink, const ProgressFn& progress = {});

    // Metadata describing the run (simulator parameters), also written with sink.setMeta.
    std::vector<std::pair<std::string, std::string>> meta() const;

private:
    Config cfg_;
};

} // namespace fs::sim
