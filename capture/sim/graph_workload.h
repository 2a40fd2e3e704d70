// The simulator's CUDA-graph workloads (docs/simulator.md "Graph workloads"): a decode-style LLM
// run capturing one graph per batch size, each in its own private pool (decode_graphs.cpp), and
// a video-generation run whose denoising steps replay a captured graph, re-captured when the
// shape changes (video_graphs.cpp). GraphWorkload holds what both need: graphs captured into
// private pools of the allocator model, instantiated, replayed with their kernels, and the
// ground truth (graph_truth.h) they record.
#pragma once

#include "caching_allocator.h"
#include "event_writer.h"
#include "graph_truth.h"
#include "rng.h"
#include "simulator.h"

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fs::sim {

class GraphWorkload
{
public:
    static constexpr uint32_t kMainStream = 7;
    static constexpr uint32_t kSideStream = 13;

    // merge: pool -> the pool it allocates from instead (the "shared pool" runs the ground
    // truth's sharing figures come from; empty for the recorded run).
    GraphWorkload(const Config& cfg, EventWriter& out, std::map<uint64_t, uint64_t> merge);
    virtual ~GraphWorkload() = default;
    GraphWorkload(const GraphWorkload&) = delete;
    GraphWorkload& operator=(const GraphWorkload&) = delete;

    virtual void run() = 0;
    // Emits what replays left for later (their launches and kernels, in time order).
    void finish() { flush(std::numeric_limits<int64_t>::max()); }
    // The pools whose graphs never run concurrently, by construction of the workload.
    virtual std::vector<std::vector<uint64_t>> sharingGroups() const = 0;
    static std::unique_ptr<GraphWorkload> make(const Config& cfg, EventWriter& out,
                                               std::map<uint64_t, uint64_t> merge = {});

    const CachingAllocator& allocator() const { return alloc_; }
    // Everything but the sharing groups' figures (runGraphWorkload adds those).
    GraphTruth truth() const;

protected:
    struct Graph
    {
        std::string name;
        Name label;
        uint64_t pool = 0; // as the workload means it (before any merge)
        uint32_t stream = kMainStream;
        int64_t cudaGraph = 0; // of the current capture
        uint64_t exec = 0;     // of the current capture
        int64_t captures = 0;
        int64_t replays = 0;
        std::vector<Block*> captured; // the current capture's allocations, in order
        std::vector<Block*> outputs;  // ... those the graph keeps (its static outputs)
        std::vector<std::pair<uint64_t, uint64_t>> layout; // (address, size) per allocation
    };

    size_t addGraph(const std::string& name, uint64_t pool, uint32_t stream);
    // A stream capture of graph g within budgetNs: emits the capture, runs body (which
    // allocates through captureAlloc and frees through release), instantiates the new graph
    // and destroys the previous exec; the previous capture's outputs are freed after it (a
    // re-capture holds both for a moment). Time ends at the capture's end.
    void capture(size_t g, int64_t budgetNs, const std::function<void()>& body);
    // An allocation of the capture in progress (in its graph's pool, on its stream); output:
    // kept as a static output of the graph until the next capture or the end of the run.
    Block* captureAlloc(uint64_t bytes, const Name& tag, bool output = false);
    // A replay of graph g starting at `start` (>= now) and lasting durationNs: the launch and its
    // kernels, emitted when time reaches them (time does not advance: the caller decides what
    // runs meanwhile). Returns its end.
    int64_t replay(size_t g, int64_t start, int64_t durationNs,
                   const std::vector<std::pair<Name, double>>& kernels);
    // The workload ran graphs a and b at the same time (ground truth).
    void concurrent(size_t a, size_t b);

    Block* alloc(uint64_t bytes, uint32_t stream, const Name& tag);
    void release(Block*& b);
    void hostOp();
    // Frees what the default pool still holds (weights, caches) and empties the cache; the
    // graphs and their outputs stay until the process exits, as in a serving process.
    void teardown(std::vector<Block*>& defaultPool);

    Config cfg_;
    EventWriter& out_;
    Rng rng_;
    CachingAllocator alloc_;
    std::map<uint64_t, uint64_t> merge_;
    int64_t now_ = 0;
    std::vector<Graph> graphs_;
    std::vector<GraphTruth::Recapture> recaptures_;
    std::vector<std::pair<std::string, std::string>> concurrent_;

    // Events wait here until time reaches them: a replay's kernels start after the events the
    // host emits meanwhile, and a session's events never go back in time.
    void flush(int64_t upTo);

private:
    uint64_t poolFor(const Graph& g) const;
    std::multimap<int64_t, std::pair<Event, Name>> pending_;
    size_t capturing_ = SIZE_MAX;
    int64_t nextCudaGraph_ = 100;
    uint64_t nextExec_ = 1000;
    uint64_t correlation_ = 0;
};

std::unique_ptr<GraphWorkload> makeDecodeGraphs(const Config& cfg, EventWriter& out,
                                                std::map<uint64_t, uint64_t> merge);
std::unique_ptr<GraphWorkload> makeVideoGraphs(const Config& cfg, EventWriter& out,
                                               std::map<uint64_t, uint64_t> merge);

// Runs cfg.workload's graph workload into sink and the shared-pool runs its truth needs.
Stats runGraphWorkload(const Config& cfg, EventSink& sink, const Simulator::ProgressFn& progress);

} // namespace fs::sim
