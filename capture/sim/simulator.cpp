#include "simulator.h"

#include "event_writer.h"
#include "graph_workload.h"
#include "mechanisms.h"
#include "workload.h"

#include <fmt/format.h>

namespace fs::sim {

const char* mechanismSetName(MechanismSet m)
{
    switch (m) {
    case MechanismSet::Mixed:
        return "mixed";
    case MechanismSet::Realistic:
        return "realistic";
    case MechanismSet::Workspace:
        break;
    }
    return "workspace";
}

bool parseMechanismSet(std::string_view text, MechanismSet& out)
{
    if (text == "workspace" || text == "default") {
        out = MechanismSet::Workspace;
        return true;
    }
    if (text == "mixed") {
        out = MechanismSet::Mixed;
        return true;
    }
    if (text == "realistic") {
        out = MechanismSet::Realistic;
        return true;
    }
    return false;
}

const char* workloadName(WorkloadKind k)
{
    switch (k) {
    case WorkloadKind::DecodeGraphs:
        return "decode-graphs";
    case WorkloadKind::VideoGraphs:
        return "video-graphs";
    case WorkloadKind::VideoDiffusion:
        break;
    }
    return "video-diffusion";
}

bool parseWorkload(std::string_view name, WorkloadKind& out)
{
    for (WorkloadKind k :
         {WorkloadKind::VideoDiffusion, WorkloadKind::DecodeGraphs, WorkloadKind::VideoGraphs})
        if (name == workloadName(k)) {
            out = k;
            return true;
        }
    return false;
}

Stats baseStats(const EventWriter& out, const AllocatorCounters& c)
{
    Stats st;
    st.events = out.events();
    st.eventHash = out.hash();
    st.allocs = c.allocs;
    st.frees = c.frees;
    st.segmentsCreated = c.segmentsCreated;
    st.segmentsReleased = c.segmentsReleased;
    st.ooms = c.ooms;
    st.cacheFlushes = c.cacheFlushes;
    st.kernels = out.count(EventType::Kernel);
    st.graphLaunches = out.count(EventType::GraphLaunch);
    st.marks = out.count(EventType::Mark);
    st.ranges = out.count(EventType::Range);
    st.peakReserved = c.peakReserved;
    st.peakAllocated = c.peakAllocated;
    st.allocatedAtEnd = c.allocated;
    st.reservedAtEnd = c.reserved;
    st.liveBlocksAtEnd = c.liveBlocks;
    st.timeBegin = out.firstTime();
    st.timeEnd = out.endTime();
    return st;
}

Simulator::Simulator(Config cfg) : cfg_(std::move(cfg)) {}

int64_t Simulator::estimatedEvents() const
{
    const int64_t setup = 24 * 2 + 24 + 2 + static_cast<int64_t>(cfg_.blockGroups) * 5 * 7 + 10;
    if (cfg_.workload == WorkloadKind::DecodeGraphs) return 600 + cfg_.replays * 6;
    if (cfg_.workload == WorkloadKind::VideoGraphs) return 600 + cfg_.frames * cfg_.steps * 8;
    const int64_t byFrames = setup * 2 + cfg_.frames * Workload::eventsPerFrameEstimate(cfg_);
    return std::max(byFrames, cfg_.targetEvents);
}

std::vector<std::pair<std::string, std::string>> Simulator::meta() const
{
    if (cfg_.workload != WorkloadKind::VideoDiffusion)
        return {
            {"sim.model", fmt::format("{} workload on a PyTorch-like caching allocator with CUDA "
                                      "graphs in private pools (docs/simulator.md)",
                                      workloadName(cfg_.workload))},
            {"sim.workload", workloadName(cfg_.workload)},
            {"sim.frames", std::to_string(cfg_.frames)},
            {"sim.steps", std::to_string(cfg_.steps)},
            {"sim.replays", std::to_string(cfg_.replays)},
            {"sim.seed", std::to_string(cfg_.seed)},
            {"sim.capacity_bytes", std::to_string(cfg_.capacityBytes)},
        };
    std::vector<std::pair<std::string, std::string>> m = {
        {"sim.model",
         "video-diffusion workload on a PyTorch-like caching allocator (docs/simulator.md)"},
        {"sim.frames", std::to_string(cfg_.frames)},
        {"sim.steps", std::to_string(cfg_.steps)},
        {"sim.seed", std::to_string(cfg_.seed)},
        {"sim.target_events", std::to_string(cfg_.targetEvents)},
        {"sim.capacity_bytes", std::to_string(cfg_.capacityBytes)},
        {"sim.block_groups", std::to_string(cfg_.blockGroups)},
        {"sim.context_frames", std::to_string(cfg_.contextFrames)},
        {"sim.tokens_per_frame", std::to_string(cfg_.tokensPerFrame)},
        {"sim.transient_chance", fmt::format("{}", cfg_.transientChance)},
        {"sim.coherence_model",
         "toy: attention workspace fallback lowers coherence_score (synthetic)"},
    };
    if (cfg_.mechanisms == MechanismSet::Mixed) {
        m.emplace_back("sim.mechanisms", mechanismSetName(cfg_.mechanisms));
        m.back().second += ": workspace fallback, OOM and retry, graph inputs moved, pending "
                           "frees, external memory, content-caused collapses, distractors "
                           "(synthetic)";
    }
    if (cfg_.mechanisms == MechanismSet::Realistic) {
        // The per-seed parameters, recorded with the ground truth (docs/simulator.md).
        m.emplace_back("sim.mechanisms",
                       "realistic: the mixed mechanisms, each also in healthy frames at a "
                       "per-seed base rate without lowering the score; a triggered one collapses "
                       "its frame with a per-seed chance; pairs; score noise (synthetic)");
        const Mechanisms::Realistic p = Mechanisms::realisticParams(cfg_.seed);
        for (int k = 0; k < Mechanisms::kAllocatorKinds; ++k) {
            const std::string kind = Mechanisms::name(static_cast<Mechanisms::Kind>(k));
            m.emplace_back("sim.realistic.base_rate." + kind,
                           fmt::format("{:.4f}", p.baseRate[static_cast<size_t>(k)]));
            m.emplace_back("sim.realistic.collapse_chance." + kind,
                           fmt::format("{:.4f}", p.collapseChance[static_cast<size_t>(k)]));
        }
        m.emplace_back("sim.realistic.pair_chance", fmt::format("{:.4f}", p.pairChance));
        m.emplace_back("sim.realistic.noise_sigma", fmt::format("{:.4f}", p.noiseSigma));
    }
    return m;
}

Stats Simulator::run(EventSink& sink, const ProgressFn& progress)
{
    EventWriter out(sink);
    const int64_t total = estimatedEvents();
    if (progress) out.setProgress([&](int64_t done) { progress(done, total); });
    for (const auto& [k, v] : meta())
        sink.setMeta(k, v);
    DeviceInfo dev;
    dev.id = cfg_.device;
    dev.name = cfg_.deviceName;
    dev.capacityBytes = cfg_.capacityBytes;
    dev.uuid = "GPU-simulated";
    sink.addDevice(dev);
    ProcessInfo proc;
    proc.pid = 0; // no real process behind a simulated run
    proc.commandLine = fmt::format("(simulated) generate_video.py --frames {} --steps {} --seed {}",
                                   cfg_.frames, cfg_.steps, cfg_.seed);
    proc.startTime = cfg_.startTimeNs;
    if (cfg_.workload != WorkloadKind::VideoDiffusion) {
        proc.commandLine =
            fmt::format("(simulated) {} --seed {}", workloadName(cfg_.workload), cfg_.seed);
        sink.addProcess(proc);
        ProgressFn each;
        if (progress) each = [&](int64_t done, int64_t) { progress(done, std::max(done, total)); };
        return runGraphWorkload(cfg_, sink, each);
    }
    sink.addProcess(proc);

    Workload w(cfg_, out);
    w.run();

    Stats st = baseStats(out, w.allocator().counters());
    st.fallbackKernels = w.fallbackKernels();
    st.perFrame = w.frames();
    st.frames = static_cast<int64_t>(st.perFrame.size());
    for (const FrameStats& f : st.perFrame)
        st.collapsedFrames += f.coherence < kCollapseThreshold ? 1 : 0;
    if (progress) progress(st.events, st.events);
    return st;
}

} // namespace fs::sim
