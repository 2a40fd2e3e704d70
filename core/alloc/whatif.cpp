#include "whatif.h"
#include "whatif_rank.h"

#include "core/analysis/engine.h"
#include "core/event_sink.h"
#include "core/format.h"
#include "core/store/catalog.h"
#include "core/store/frames.h"
#include "core/store/ingest.h"
#include "core/store/kernels.h"
#include "core/store/session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <unistd.h>
#include <unordered_map>

namespace fs::alloc {

namespace {

std::string confText(const Config& c)
{
    const std::string s = c.describe();
    return s.empty() ? "PyTorch defaults" : s;
}

// The per-frame figures of one device's framework track, from the engine (the summary figures
// come from Engine::trackSummary, the one place they are computed).
std::vector<FrameFigure> frameFigures(const analysis::Engine& eng, uint32_t device)
{
    std::vector<FrameFigure> out;
    for (const analysis::FrameInfo& fi : eng.frames())
        for (const analysis::FrameAllocator& fa : fi.allocator)
            if (fa.device == device && fa.level == Level::Framework)
                out.push_back({fi.index, fa.atEnd.fragmentationRatio,
                               fa.atEnd.largestFreeFragmentBytes, fa.atEnd.reservedBytes});
    return out;
}

// Figures of one replayed session: the model's counters, and F read through the engine.
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
        f.timedByAssumption = r.taken.assumed;
        f.frames = frameFigures(*eng, r.device);
        out.push_back(std::move(f));
    }
    return out;
}

// The real run's figures: the engine's summary of the session (what `report` prints for it),
// and what the recording holds (its segments, cudaMallocs, OOMs).
DeviceFigures realFigures(const DeviceTrace& d, const analysis::Engine& eng)
{
    DeviceFigures f;
    f.device = d.device;
    f.summary = eng.trackSummary(d.device, Level::Framework).figures;
    for (const RecordedSegment& s : d.segments)
        f.segments += !s.expandable && s.destroyNs == kAliveNs ? 1 : 0;
    f.cudaMallocs = static_cast<int64_t>(d.backingSizes.size());
    f.ooms = d.recordedOoms;
    f.retries = -1; // not recorded
    f.frames = frameFigures(eng, d.device);
    return f;
}

// B - A on one device.
analysis::SummaryDifference difference(const DeviceFigures& a, const DeviceFigures& b)
{
    analysis::SummaryDifference x;
    x.figures = analysis::summaryDelta(a.summary, b.summary);
    x.ooms = b.ooms - a.ooms;
    return x;
}

bool sameState(const analysis::State& a, const analysis::State& b)
{
    return a.reservedBytes == b.reservedBytes && a.allocatedBytes == b.allocatedBytes &&
           a.regionCount == b.regionCount && a.liveAllocations == b.liveAllocations &&
           a.fragmentCount == b.fragmentCount &&
           a.largestFreeFragmentBytes == b.largestFreeFragmentBytes;
}

DeviceFidelity compareDevice(const DeviceTrace& d, const DeviceReplay& r,
                             const analysis::Engine& real, const analysis::Engine& rep,
                             int64_t resolutionNs)
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
    f.time = compareTimeCourse(d, r, resolutionNs);
    f.taken = r.taken;
    f.usableMark = r.usableMark;
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
    store::KernelRows::all(s, [&](const store::KernelRow& k) {
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
        return true;
    });
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

// Unique within the process too: the GUI may run two what-ifs at once (the ranking and a replay).
std::string tempPath(int n)
{
    static std::atomic<uint64_t> calls{0};
    return (std::filesystem::temp_directory_path() /
            fmt::format("fragscope-whatif-{}-{}-{}.fragscope", ::getpid(), calls++, n))
        .string();
}

} // namespace

std::vector<UnmodelledSetting> unmodelledSettings(const Config& c, const ReplayOptions& ro)
{
    std::vector<UnmodelledSetting> out = c.unmodelled();
    bool sized = ro.capacity > 0;
    for (const auto& [device, cap] : ro.deviceCapacity)
        sized |= cap > 0;
    if (c.memoryFraction < 1.0 && !sized)
        out.push_back({fmt::format("per_process_memory_fraction:{}", c.memoryFraction),
                       "no device size known (no OOM entry, no device size, no --capacity): "
                       "there is nothing to take the fraction of, so no limit is applied"});
    return out;
}

std::string bannerText(const Fidelity& f, const WhatIfResult& r)
{
    std::string s = "differences are against the replay under the recorded settings (model "
                    "against model), so each is the setting's effect on the model";
    if (!f.complete) return s + "; the trace is incomplete: " + f.completeNote;
    if (f.reproduced) return s + "; that replay reproduces the real run at every segment event";
    s += "; that replay is not exact";
    for (size_t k = 0; k < f.devices.size(); ++k) {
        const DeviceFidelity& d = f.devices[k];
        if (f.devices.size() > 1) s += fmt::format(", device {}", d.device);
        s += ": " + timeCourseText(d.time, f.ordinal);
        if (!r.runs.empty() && k < r.runs[0].devices.size() && k < r.real.size())
            s += fmt::format(", mean F {:.3f} against {:.3f} in the real run",
                             r.runs[0].devices[k].summary.meanFragmentationRatio,
                             r.real[k].summary.meanFragmentationRatio);
    }
    return s + ": differences of that size may be the model's error";
}

namespace {

// A duration for the verdict: ms (or ns when under a µs), or entries on an ordinal time axis.
std::string duration(int64_t ns, bool ordinal)
{
    if (ordinal) return fmt::format("{} trace entries", ns);
    if (ns < 1000) return fmt::format("{} ns", ns);
    return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
}

} // namespace

std::string takenText(const DeviceFidelity& d, bool ordinal)
{
    const TakenFromTrace& t = d.taken;
    std::string s =
        fmt::format("the times of {} segment creations and {} releases", t.creations, t.releases);
    if (t.maxBurstSpanNs > 0)
        s += fmt::format(" (release bursts spread over up to {})",
                         duration(t.maxBurstSpanNs, ordinal));
    s += fmt::format(", empty_cache() calls: {}", t.emptyCaches);
    if (t.emptyCachesBefore > 0)
        s += fmt::format(" ({} right before a cudaMalloc the model could skip)",
                         t.emptyCachesBefore);
    s += fmt::format(", free-and-retries: {}", t.retries);
    if (d.usableMark > 0) s += fmt::format(" (usable memory then at most {} B)", d.usableMark);
    if (t.failuresFollowed > 0)
        s += fmt::format(", requests refused as recorded: {}", t.failuresFollowed);
    return s;
}

std::string timeCourseText(const TimeCourse& t, bool ordinal)
{
    std::string s = fmt::format("{} segment events at another time or missing in one run ({} in "
                                "the real run, {} in the replay)",
                                t.timeDiffers, t.realEvents, t.replayEvents);
    if (t.maxTimeDiffNs > 0)
        s += fmt::format(", paired events up to {} apart", duration(t.maxTimeDiffNs, ordinal));
    s += fmt::format(", reserved bytes differ by up to {}", humanBytes(t.maxReservedDiff));
    if (t.maxAllocatedDiff > 0)
        s += fmt::format(", allocated by up to {}", humanBytes(t.maxAllocatedDiff));
    return s;
}

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
    fid.resolutionNs = trace.resolutionNs;
    fid.ordinal = trace.ordinalTime;
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
    // What the replay under the recorded settings found, for the other runs.
    std::map<uint32_t, std::vector<uint32_t>> emptyCacheFirst;
    std::map<uint32_t, uint64_t> usableMark;
    // A run's replay options: the same for a full run and a model-only one (the ranking's).
    auto optionsFor = [&](const RunSpec& spec) {
        ReplayOptions ro;
        ro.cancel = opts.cancel;
        ro.config = spec.config;
        ro.policy = spec.policy;
        if (!spec.recorded) ro.emptyCacheFirst = &emptyCacheFirst;
        for (const DeviceTrace& d : trace.devices) {
            // The memory the recording had: OOM entries tell it, else the device's size; for
            // what-if runs also a free-and-retry the recorded replay reproduced (but never less
            // than the recorded run held: usable memory may have varied); --capacity instead
            // when given (the recorded run only when nothing else tells), else no limit.
            uint64_t cap = d.usableBytes ? d.usableBytes : d.capacityBytes;
            const auto mark = usableMark.find(d.device);
            if (!spec.recorded && mark != usableMark.end()) {
                const uint64_t m = std::max(mark->second, d.recordedPeakReserved);
                cap = cap ? std::min(cap, m) : m;
            }
            if (opts.capacity && (!spec.recorded || cap == 0)) cap = opts.capacity;
            ro.deviceCapacity[d.device] = cap;
        }
        return ro;
    };
    // -o keeps the last run asked for, else the recorded one (never a ranked alternative's).
    const size_t outputRun = opts.runs.size();
    // The ranking's rows of the default alternatives (model only), and which of them, if any, is
    // replayed in full after the others (specs[alternativeRun]).
    std::vector<RankedRun> screened;
    int screenedBest = -1;
    size_t alternativeRun = SIZE_MAX;
    std::vector<std::string> kept;
    try {
        for (size_t i = 0; i < specs.size(); ++i) {
            const RunSpec& spec = specs[i];
            RunResult run;
            run.spec = spec;
            run.allocConf = confText(spec.config);
            std::string keepAt;
            if (i == outputRun && !opts.output.empty())
                keepAt = opts.output;
            else if (i == 0 && !opts.outputRecorded.empty())
                keepAt = opts.outputRecorded;
            const bool keep = !keepAt.empty();
            const std::string path = keep ? keepAt : tempPath(static_cast<int>(i));
            done = 5 + static_cast<int>(90 * i / specs.size());
            say(fmt::format("replaying under {} ({})", run.allocConf, policyName(spec.policy)));

            ReplayOptions ro = optionsFor(spec);
            run.unmodelled = unmodelledSettings(spec.config, ro);
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
            for (const DeviceReplay& r : replays) {
                run.requests += r.requests;
                if (spec.recorded) {
                    emptyCacheFirst[r.device] = r.emptyCacheFirst;
                    if (r.usableMark) usableMark[r.device] = r.usableMark;
                }
            }
            if (i == alternativeRun) {
                screened[static_cast<size_t>(screenedBest)].run = static_cast<int>(i);
            } else {
                res.ranking.push_back(rankedRun(spec, run.allocConf, replays));
                res.ranking.back().run = static_cast<int>(i);
                res.ranking.back().unmodelled = run.unmodelled;
            }
            run.devices = figuresOf(path, replays);
            if (!res.runs.empty()) // against the replay under the recorded settings
                for (size_t k = 0; k < run.devices.size(); ++k)
                    run.devices[k].vsRecorded = difference(res.runs[0].devices[k], run.devices[k]);
            if (spec.recorded) {
                analysis::LoadOptions lo;
                lo.integrityCheck = false;
                const auto rep = analysis::Engine::open(path, lo);
                fid.reproduced = true;
                for (size_t k = 0; k < trace.devices.size(); ++k) {
                    fid.devices.push_back(compareDevice(trace.devices[k], replays[k], *real, *rep,
                                                        trace.resolutionNs));
                    fid.reproduced &= fid.devices.back().reproduced();
                }
            }
            if (keep) {
                run.sessionPath = path;
                kept.push_back(path);
            } else {
                std::filesystem::remove(path);
            }
            res.runs.push_back(std::move(run));
            if (i == 0 && opts.rankAlternatives) {
                // The default alternatives through the model alone; the best, when it beats the
                // recorded settings, is replayed in full as the last run.
                bool capacityKnown = false;
                for (const auto& [device, cap] : optionsFor(RunSpec{}).deviceCapacity)
                    capacityKnown |= cap > 0;
                AlternativeSet alt = defaultAlternatives(trace, capacityKnown);
                res.skipped = std::move(alt.skipped);
                done = 5 + static_cast<int>(90 / specs.size());
                say(fmt::format("ranking {} alternatives (model only)", alt.tried.size()));
                screened = screenAlternatives(trace, alt.tried, optionsFor);
                WhatIfResult pick;
                pick.runs.push_back(res.runs.front());
                pick.ranking = res.ranking;
                pick.ranking.insert(pick.ranking.end(), screened.begin(), screened.end());
                rankRuns(pick.ranking);
                recommend(pick);
                if (pick.recommended >= 0) {
                    const RankedRun& best = pick.ranking[static_cast<size_t>(pick.recommended)];
                    for (size_t k = 0; k < screened.size() && screenedBest < 0; ++k)
                        if (screened[k].label == best.label) screenedBest = static_cast<int>(k);
                    alternativeRun = specs.size();
                    specs.push_back(alt.tried[static_cast<size_t>(screenedBest)].spec);
                }
            }
        }
    } catch (const Cancelled&) {
        for (const std::string& k : kept) // a cancelled what-if leaves nothing behind
            std::filesystem::remove(k);
        throw;
    }
    for (const DeviceTrace& d : trace.devices)
        res.real.push_back(realFigures(d, *real));
    fid.banner = bannerText(fid, res);
    fid.summary = fidelitySummary(fid);
    res.ranking.insert(res.ranking.end(), screened.begin(), screened.end());
    rankRuns(res.ranking);
    recommend(res);

    if (!fid.complete)
        fid.verdict = "not a replay of the whole run: " + fid.completeNote +
                      "; the figures start from the trace's first entry";
    else if (fid.reproduced)
        fid.verdict = "the replay under the recorded settings reproduces the real run exactly, "
                      "every segment event at its recorded time";
    else
        fid.verdict = "the replay under the recorded settings differs from the real run (see "
                      "devices): what-if figures are the model's, not a reproduction";
    for (const DeviceFidelity& d : fid.devices) {
        if (!d.time.exact())
            fid.verdict +=
                fmt::format("; device {}: {}", d.device, timeCourseText(d.time, fid.ordinal));
        fid.verdict += fmt::format("; taken from the trace{}: {}",
                                   fid.devices.size() > 1 ? fmt::format(" (device {})", d.device)
                                                          : std::string(),
                                   takenText(d, fid.ordinal));
    }
    std::string assumed;
    for (const RunResult& run : res.runs) {
        int64_t n = 0;
        for (const DeviceFigures& d : run.devices)
            n += d.timedByAssumption;
        if (n > 0)
            assumed += fmt::format("{}{} under {}", assumed.empty() ? "" : ", ", n, run.allocConf);
    }
    if (!assumed.empty())
        fid.verdict += "; segment events the recording did not make during the same request are "
                       "timed by assumption: a release takes the recording's release times of "
                       "that request in order (the k-th at its k-th, more at its last; the burst "
                       "lasts as it did), anything else its request's time (" +
                       assumed + ")";
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
