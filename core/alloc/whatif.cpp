#include "whatif.h"

#include "core/analysis/engine.h"
#include "core/event_sink.h"
#include "core/store/catalog.h"
#include "core/store/frames.h"
#include "core/store/ingest.h"
#include "core/store/kernels.h"
#include "core/store/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>
#include <unordered_map>

namespace fs::alloc {

namespace {

std::string confText(const Config& c)
{
    const std::string s = c.describe();
    return s.empty() ? "PyTorch defaults" : s;
}

// Figures of one replayed session, read through the analysis engine.
std::vector<DeviceFigures> figuresOf(const std::string& path,
                                     const std::vector<DeviceReplay>& replays)
{
    analysis::LoadOptions lo;
    lo.integrityCheck = false; // just written by us
    const auto eng = analysis::Engine::open(path, lo);
    std::vector<DeviceFigures> out;
    for (const DeviceReplay& r : replays) {
        DeviceFigures f;
        f.device = r.device;
        f.summary = eng->trackSummary(r.device, Level::Framework).figures;
        f.segments = r.counters.liveSegments;
        f.cudaMallocs = r.counters.cudaMallocs;
        f.ooms = r.counters.ooms;
        f.retries = r.counters.retries;
        for (const analysis::FrameInfo& fi : eng->frames())
            for (const analysis::FrameAllocator& fa : fi.allocator)
                if (fa.device == r.device && fa.level == Level::Framework)
                    f.frames.push_back({fi.index, fa.atEnd.fragmentationRatio,
                                        fa.atEnd.largestFreeFragmentBytes, fa.atEnd.reservedBytes});
        out.push_back(std::move(f));
    }
    return out;
}

bool sameState(const analysis::State& a, const analysis::State& b)
{
    return a.reservedBytes == b.reservedBytes && a.allocatedBytes == b.allocatedBytes &&
           a.regionCount == b.regionCount && a.liveAllocations == b.liveAllocations &&
           a.fragmentCount == b.fragmentCount &&
           a.largestFreeFragmentBytes == b.largestFreeFragmentBytes;
}

DeviceFidelity compareDevice(const DeviceTrace& d, const DeviceReplay& r,
                             const analysis::Engine& real, const analysis::Engine& rep)
{
    DeviceFidelity f;
    f.device = d.device;
    std::vector<std::pair<uint64_t, uint64_t>> realSegs, realBlocks;
    for (const RecordedSegment& s : d.segments)
        if (!s.expandable && s.destroyNs == kAliveNs) realSegs.emplace_back(s.address, s.size);
    f.realSegmentSizes = d.backingSizes;
    f.replaySegmentSizes = r.segmentSizes;
    const size_t n = std::min(f.realSegmentSizes.size(), f.replaySegmentSizes.size());
    for (size_t i = 0; i < n && f.firstSegmentMismatch < 0; ++i)
        if (f.realSegmentSizes[i] != f.replaySegmentSizes[i])
            f.firstSegmentMismatch = static_cast<int64_t>(i);
    if (f.firstSegmentMismatch < 0 && f.realSegmentSizes.size() != f.replaySegmentSizes.size())
        f.firstSegmentMismatch = static_cast<int64_t>(n);
    f.realFinalReserved = d.recordedFinalReserved;
    f.realPeakReserved = d.recordedPeakReserved;
    f.replayFinalReserved = r.counters.reserved;
    f.replayPeakReserved = r.peakReserved;
    f.realSegments = static_cast<int64_t>(realSegs.size());
    f.replaySegments = r.counters.liveSegments;
    f.allocations = static_cast<int64_t>(d.allocs.size());
    for (size_t i = 0; i < d.allocs.size(); ++i) {
        if (d.allocs[i].address == r.addresses[i])
            ++f.addressesMatched;
        else if (f.firstAddressMismatch < 0)
            f.firstAddressMismatch = static_cast<int64_t>(i);
        if (d.allocs[i].freeNs == kAliveNs)
            realBlocks.emplace_back(d.allocs[i].address, d.allocs[i].size);
    }
    std::sort(realSegs.begin(), realSegs.end());
    std::sort(realBlocks.begin(), realBlocks.end());
    f.finalLayoutEqual = realSegs == r.finalSegments && realBlocks == r.finalBlocks;
    f.stateAtEndEqual = sameState(real.stateAt(d.device, Level::Framework, real.timeEnd()),
                                  rep.stateAt(d.device, Level::Framework, rep.timeEnd()));
    return f;
}

// What maps 1:1 from the source session into a kept replay: kernels, graph launches, processes
// and the per-frame metrics (the recorded run's: a replay cannot know how its frames would have
// looked, so their source says where they come from). Frames and annotations come with the
// replay's markers; call stacks with its allocations (ReplayOptions::carryStacks).
void carrySource(const std::string& path, const Trace& trace, EventSink& sink)
{
    Session s = Session::open(path);
    std::unordered_map<int64_t, StringId> names;
    auto name = [&](int64_t src) {
        auto [it, inserted] = names.emplace(src, kNoString);
        if (inserted && src > 0 && static_cast<size_t>(src) < trace.strings.size())
            it->second = sink.intern(trace.strings[static_cast<size_t>(src)]);
        return it->second;
    };
    auto rowEvent = [](EventType type, int64_t device, std::optional<int64_t> stream) {
        Event e;
        e.type = type;
        e.device = static_cast<uint32_t>(device);
        e.stream = static_cast<uint32_t>(stream.value_or(0));
        return e;
    };
    {
        store::KernelRows rows = store::KernelRows::all(s);
        store::KernelRow k;
        while (rows.next(k)) {
            Event e = rowEvent(EventType::Kernel, k.device, k.stream);
            e.time = k.startNs;
            e.endTime = k.endNs;
            e.name = name(k.name);
            e.aux = k.correlationId.value_or(0);
            for (int d = 0; d < 3; ++d) {
                e.grid[d] = static_cast<uint32_t>(k.grid[d]);
                e.block[d] = static_cast<uint32_t>(k.block[d]);
            }
            if (k.graphId) e.aux2 = *k.graphId << 32 | (k.graphNodeId.value_or(0) & 0xffffffffu);
            sink.add(e);
        }
    }
    for (const store::GraphLaunchRow& g : store::graphLaunches(s)) {
        Event e = rowEvent(EventType::GraphLaunch, g.device, g.stream);
        e.aux = g.graphId.value_or(0);
        e.aux2 = g.execId.value_or(0);
        e.time = g.startNs;
        e.endTime = g.endNs;
        sink.add(e);
    }
    for (const store::ProcessRow& p : store::processes(s))
        sink.addProcess({p.pid, p.commandLine.value_or(std::string()), p.startNs.value_or(0)});
    const std::string from = "recorded run " + std::filesystem::path(path).filename().string();
    for (const store::FrameMetricRow& m : store::frameMetrics(s))
        sink.addFrameMetric(m.frame, m.name, m.value, fmt::format("{} ({})", from, m.source));
}

std::string tempPath(int n)
{
    return (std::filesystem::temp_directory_path() /
            fmt::format("fragscope-whatif-{}-{}.fragscope", ::getpid(), n))
        .string();
}

} // namespace

std::string whatIfLabel(const RunSpec& spec, const std::string& conf, const std::string& file)
{
    std::string settings = spec.recorded ? fmt::format("recorded settings ({})", conf) : conf;
    if (spec.policy == Policy::Tiered) settings += " + tiered policy (experimental)";
    return fmt::format("what-if: {} replay of {}", settings,
                       std::filesystem::path(file).filename().string());
}

WhatIfResult whatIf(const WhatIfOptions& opts)
{
    WhatIfResult res;
    res.session = opts.session;
    int done = 0; // percent
    auto say = [&](const std::string& s) {
        if (opts.cancel && opts.cancel->load()) throw Cancelled{};
        if (opts.progress) opts.progress(s);
        if (opts.percent) opts.percent(done, s);
    };
    say("reading " + opts.session);
    const Trace trace = readTrace(opts.session);
    Fidelity& fid = res.fidelity;
    fid.complete = trace.complete;
    fid.completeNote = trace.completeNote;
    fid.settingsKnown = trace.settingsKnown;
    fid.settingsNote = trace.settingsNote;
    fid.recordedConf = confText(trace.recorded);
    for (const DeviceTrace& d : trace.devices) {
        fid.pendingFrees += d.pendingFrees;
        fid.pendingFreesBeforeTrace += d.pendingFreesUnmatched;
    }

    std::vector<RunSpec> specs;
    RunSpec rec;
    rec.recorded = true;
    rec.config = trace.recorded;
    specs.push_back(rec);
    for (RunSpec s : opts.runs) {
        if (s.recordedConfig) s.config = trace.recorded;
        specs.push_back(s);
    }

    const auto real = analysis::Engine::open(opts.session);
    for (const DeviceTrace& d : trace.devices)
        res.real.emplace_back(d.device, real->trackSummary(d.device, Level::Framework).figures);
    for (size_t i = 0; i < specs.size(); ++i) {
        const RunSpec& spec = specs[i];
        RunResult run;
        run.spec = spec;
        run.allocConf = confText(spec.config);
        const bool keep = i + 1 == specs.size() && !opts.output.empty();
        const std::string path = keep ? opts.output : tempPath(static_cast<int>(i));
        done = 5 + static_cast<int>(90 * i / specs.size());
        say(fmt::format("replaying under {} ({})", run.allocConf, policyName(spec.policy)));

        ReplayOptions ro;
        ro.cancel = opts.cancel;
        ro.config = spec.config;
        ro.policy = spec.policy;
        for (const DeviceTrace& d : trace.devices) {
            // The memory the recording had: OOM entries tell it, else the device's size; what-if
            // runs get --capacity instead when given (the recorded run only when nothing
            // else tells), else no limit.
            uint64_t cap = d.usableBytes ? d.usableBytes : d.capacityBytes;
            if (opts.capacity && (!spec.recorded || cap == 0)) cap = opts.capacity;
            ro.deviceCapacity[d.device] = cap;
        }
        IngestOptions io;
        io.path = path;
        io.sourceKind = "whatif";
        io.sourcePath = opts.session;
        io.synthetic = true; // a model's replay, never a measurement
        io.timeAxis = trace.ordinalTime ? TimeAxis::Ordinal : TimeAxis::Nanoseconds;
        io.aliveAtEndIsAnomaly = false;
        std::vector<DeviceReplay> replays;
        {
            Ingest ing(io);
            ing.begin();
            const std::string label = whatIfLabel(spec, run.allocConf, opts.session);
            ing.setMeta("label", label);
            ing.setMeta("whatif.source", opts.session);
            ing.setMeta("whatif.alloc_conf", run.allocConf);
            ing.setMeta("whatif.policy", policyName(spec.policy));
            for (const DeviceTrace& d : trace.devices) {
                DeviceInfo di;
                di.id = d.device;
                di.name = d.name;
                di.capacityBytes = ro.deviceCapacity[d.device];
                ing.addDevice(di);
            }
            ing.warn(label + ": computed by fragscope's allocator model, not measured");
            ro.sink = &ing;
            ro.carryStacks = keep;
            const auto t0 = std::chrono::steady_clock::now();
            try {
                replays = replay(trace, ro);
            } catch (const Cancelled&) {
                ing.abort(); // removes the unfinished file
                throw;
            }
            run.replaySeconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (keep) carrySource(opts.session, trace, ing);
            ing.end();
        }
        for (const DeviceReplay& r : replays)
            run.requests += r.requests;
        run.devices = figuresOf(path, replays);
        if (spec.recorded) {
            analysis::LoadOptions lo;
            lo.integrityCheck = false;
            const auto rep = analysis::Engine::open(path, lo);
            fid.reproduced = true;
            for (size_t k = 0; k < trace.devices.size(); ++k) {
                fid.devices.push_back(compareDevice(trace.devices[k], replays[k], *real, *rep));
                fid.reproduced &= fid.devices.back().reproduced();
            }
        }
        if (keep)
            run.sessionPath = path;
        else
            std::filesystem::remove(path);
        res.runs.push_back(std::move(run));
    }

    if (!fid.complete)
        fid.verdict = "not a replay of the whole run: " + fid.completeNote +
                      "; the figures start from the trace's first entry";
    else if (fid.reproduced)
        fid.verdict = "the replay under the recorded settings reproduces the real run exactly";
    else
        fid.verdict = "the replay under the recorded settings differs from the real run (see "
                      "devices): what-if figures are the model's, not a reproduction";
    if (trace.allocationsWithoutStream > 0)
        fid.verdict += fmt::format("; {} allocations have no stream in the session: replayed on "
                                   "one stream, so best fit may pick blocks the real allocator "
                                   "could not",
                                   trace.allocationsWithoutStream);
    if (fid.pendingFreesBeforeTrace > 0)
        fid.verdict += fmt::format("; {} frees waiting on stream events began before the trace "
                                   "(their blocks are not in it): not replayed",
                                   fid.pendingFreesBeforeTrace);
    if (!fid.settingsKnown) fid.verdict += "; " + fid.settingsNote;
    return res;
}

} // namespace fs::alloc
