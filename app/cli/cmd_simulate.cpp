// fragscope simulate -o FILE: a synthetic video-generation session from the allocator model
// (capture/sim, docs/simulator.md), written through Ingest like any other source.
#include "capture/recorder/live_sim.h"
#include "capture/sim/simulator.h"
#include "cli_settings.h"
#include "command.h"
#include "core/progress.h"
#include "core/store/ingest.h"
#include "core/store/session.h"
#include "simulate_session.h"

#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

using namespace fs;
using namespace fs::cli;

sim::Config fs::cli::simulateConfig(const Args& a)
{
    sim::Config cfg;
    cfg.frames = a.getInt("frames", cfg.frames);
    cfg.steps = a.getInt("steps", cfg.steps);
    cfg.seed = static_cast<uint64_t>(a.getInt("seed", static_cast<int64_t>(cfg.seed)));
    cfg.targetEvents = a.getInt("events", 0);
    cfg.capacityBytes =
        static_cast<uint64_t>(a.getInt("capacity", static_cast<int64_t>(cfg.capacityBytes)));
    if (const auto w = a.get("workload"); w && !sim::parseWorkload(*w, cfg.workload))
        throw UsageError("--workload must be video-diffusion, decode-graphs or video-graphs");
    cfg.replays = a.getInt("replays", cfg.replays);
    if (cfg.replays < 1 || cfg.replays > 100'000'000)
        throw UsageError("--replays must be between 1 and 100000000");
    if (cfg.frames < 1 || cfg.frames > 1'000'000)
        throw UsageError("--frames must be between 1 and 1000000");
    if (cfg.steps < 1 || cfg.steps > 10'000)
        throw UsageError("--steps must be between 1 and 10000");
    if (cfg.capacityBytes < (64ull << 20))
        throw UsageError("--capacity must be at least 64M bytes");
    if (const auto m = a.get("mechanisms"); m && !sim::parseMechanismSet(*m, cfg.mechanisms))
        throw UsageError("--mechanisms must be 'workspace', 'mixed' or 'realistic', not '" + *m +
                         "'");
    if (cfg.mechanisms != sim::MechanismSet::Workspace &&
        cfg.workload != sim::WorkloadKind::VideoDiffusion)
        throw UsageError("--mechanisms applies to the video-diffusion workload only");
    return cfg;
}

sim::Stats fs::cli::simulateSession(const sim::Config& cfg, const std::string& path,
                                    const std::vector<std::pair<std::string, std::string>>& meta,
                                    const Args& a)
{
    sim::Simulator simulator(cfg);
    IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.sourcePath = fmt::format(
        "fragscope simulate --frames {} --steps {} --seed {}{}", cfg.frames, cfg.steps, cfg.seed,
        cfg.targetEvents ? fmt::format(" --events {}", cfg.targetEvents) : "");
    o.synthetic = true;
    o.reorderWindowNs = 0; // the simulator emits in time order
    const bool graphs = cfg.workload != sim::WorkloadKind::VideoDiffusion;
    if (graphs) {
        o.sourcePath = fmt::format("fragscope simulate --workload {} --frames {} --steps {} "
                                   "--replays {} --seed {}",
                                   sim::workloadName(cfg.workload), cfg.frames, cfg.steps,
                                   cfg.replays, cfg.seed);
        o.aliveAtEndIsAnomaly = false; // graphs and their outputs live until the process exits
    }
    Ingest ingest(o);
    sim::Stats st;
    try {
        ingest.begin();
        Progress progress("simulate", simulator.estimatedEvents());
        st = simulator.run(ingest, [&](int64_t done, int64_t) { progress.update(done); });
        for (const auto& [k, v] : meta)
            ingest.setMeta(k, v);
        ingest.end();
        progress.finish();
    } catch (const std::invalid_argument& e) {
        ingest.abort();
        throw UsageError(e.what());
    } catch (...) {
        ingest.abort(); // no partial file from a failed run
        throw;
    }
    storeAnalysisIndex(path, a);
    return st;
}

namespace {

int runSimulate(Args& a)
{
    a.expectPositional(0, "");
    if (a.flag("live")) { // a capture target instead of a file (capture/recorder/live_sim.h)
        if (a.get("ranks")) throw UsageError("--ranks writes files: it cannot be used with --live");
        if (a.get("workload").value_or("video-diffusion") != "video-diffusion")
            throw UsageError("--live serves the video-diffusion workload only");
        capture::LiveSimOptions lo;
        lo.rateEventsPerSec = a.getInt("live-rate", 0);
        lo.clockEventsPerSec = a.getDouble("live-clock", 0);
        if (!(lo.clockEventsPerSec >= 0))
            throw UsageError("--live-clock must be a positive number of events per second");
        lo.commandLine = "fragscope simulate --live";
        return capture::runSimulatorLive(simulateConfig(a), lo);
    }
    const auto out = a.get("output");
    if (!out || out->empty())
        throw UsageError("missing -o FILE (usage: fragscope simulate -o FILE [options])");
    const sim::Config cfg = simulateConfig(a);
    if (a.get("ranks")) {
        if (cfg.workload != sim::WorkloadKind::VideoDiffusion)
            throw UsageError("--ranks simulates the video-diffusion workload only");
        return runSimulateRanks(a, cfg, *out);
    }
    const sim::Stats st = simulateSession(cfg, *out, {}, a);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(*out, ec);
    if (cfg.workload != sim::WorkloadKind::VideoDiffusion) {
        const sim::GraphTruth& t = *st.graphs;
        fmt::print("Simulated {} events ({} workload, seed {}) into {}: {} graphs in {} private "
                   "pools, {} graph launches, {} kernels, {} allocations, peak reserved {:.2f} "
                   "GiB; merging the pools of graphs that never run concurrently saves {:.2f} MiB "
                   "of peak reserved (the simulator's own run with them merged); file {:.1f} MB. "
                   "SYNTHETIC data; ground truth in meta sim.graphs_truth.\n",
                   st.events, sim::workloadName(cfg.workload), cfg.seed, *out, t.graphs.size(),
                   t.pools.size() - (t.pools.empty() || t.pools.front().pool != 0 ? 0 : 1),
                   st.graphLaunches, st.kernels, st.allocs,
                   static_cast<double>(st.peakReserved) / (1ull << 30),
                   static_cast<double>(t.all.peakReservedBefore - t.all.peakReservedAfter) /
                       (1ull << 20),
                   ec ? 0.0 : static_cast<double>(bytes) / 1e6);
        return Ok;
    }
    fmt::print(
        "Simulated {} events ({} frames x {} steps, seed {}) into {}: {} allocations, {} segments, "
        "{} kernels ({} attention fallbacks), {} graph launches, {} OOMs, peak reserved {:.2f} GiB "
        "of "
        "{:.2f} GiB; {} of {} frames collapsed (coherence_score < {}); file {:.1f} MB. "
        "SYNTHETIC data: scores come from a toy model, not from images.\n",
        st.events, st.frames, cfg.steps, cfg.seed, *out, st.allocs, st.segmentsCreated, st.kernels,
        st.fallbackKernels, st.graphLaunches, st.ooms,
        static_cast<double>(st.peakReserved) / (1ull << 30),
        static_cast<double>(cfg.capacityBytes) / (1ull << 30), st.collapsedFrames, st.frames,
        sim::kCollapseThreshold, ec ? 0.0 : static_cast<double>(bytes) / 1e6);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "simulate",
    .synopsis =
        "-o FILE [--workload W] [--frames N] [--steps S] [--seed S] [--events N] "
        "[--replays N] [--capacity BYTES] [--mechanisms workspace|mixed|realistic] [--ranks N "
        "[--tight-rank R] [--rank-deficit BYTES]] [--index|--no-index]",
    .summary = "Write a synthetic session: a video-diffusion run on a simulated GPU allocator",
    .options = withIndexOptions(
        {{"output", "FILE", "session file to write (replaced if it exists)"},
         {"frames", "N", "frames per generated video (default 24)"},
         {"steps", "S", "denoising steps per frame (default 20)"},
         {"seed", "S", "random seed; the same seed gives the same session (default 17)"},
         {"events", "N", "generate further videos until at least N events (k, M, G suffixes)"},
         {"capacity", "BYTES", "simulated device memory (default 80G binary: 85899345920)"},
         {"mechanisms", "SET",
          "workspace (default: the one emergent mechanism), mixed (several collapse "
          "mechanisms, content-caused collapses and distractors) or realistic (the same, each "
          "mechanism also harmless in healthy frames at a per-seed base rate; docs/simulator.md)"},
         {"workload", "W",
          "video-diffusion (default), or a CUDA-graph workload: decode-graphs (one graph per "
          "batch size, each in its own pool) or video-graphs (a denoising graph re-captured per "
          "shape); docs/simulator.md"},
         {"replays", "N", "decode-graphs: decode steps, one graph replay each (default 20000)"},
         {"ranks", "N",
          "N ranks of one job: FILE.rank0 ... FILE.rank<N-1>, one session each, with a shared "
          "wall clock (docs/simulator.md \"Ranks\")"},
         {"tight-rank", "R", "with --ranks: the rank with less memory (default N/2)"},
         {"rank-deficit", "BYTES",
          "with --ranks: memory the tight rank lacks (default 3 GiB: 3221225472)"},
         {"live", "",
          "no file: serve the run as a capture target for record/attach (docs/capture.md)"},
         {"live-rate", "N",
          "with --live: emit at most N events per second (default: as fast as read)"},
         {"live-clock", "N",
          "with --live: stretch the simulated clock to N events per simulated second (a run\n"
          "of hours at a realistic rate, delivered as fast as read: the flight recorder's "
          "bench)"}}),
    .details =
        "The session is marked synthetic: its coherence_score, id_match_rate and flow_l2_px are\n"
        "produced by a documented toy model (docs/simulator.md), never by real frames. In that\n"
        "model an attention step whose contiguous workspace the fragmented allocator cannot\n"
        "provide falls back to another kernel, and the frame's coherence drops.\n"
        "--mechanisms mixed adds further labelled synthetic mechanisms (OOM and retry, a\n"
        "captured graph whose input moved, pending frees, memory outside the allocator) and\n"
        "collapses the content caused, each recorded in the sim_truth_causes table.\n"
        "--mechanisms realistic runs the same mechanisms, each also in healthy frames at a\n"
        "per-seed base rate (0-40 % of frames) without lowering the score; a triggered one\n"
        "collapses its frame with a per-seed chance (30-100 %), two may act in one frame, and\n"
        "the score has per-seed noise (parameters in the session's sim.realistic.* meta keys).",
    .run = runSimulate,
    .order = 10,
});
