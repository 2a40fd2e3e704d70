// Kineto / torch.profiler Chrome-trace JSON (.json or .json.gz), parsed streaming: one event at a
// time, never a DOM of the whole file. [memory] events -> framework allocations per CUDA device;
// kernels -> kernels; user annotations -> ranges (those named "frame N" become frames).
#include "importer.h"
#include "json_reader.h"

#include "core/json.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

namespace fs::import {

namespace {

struct MemEvent
{
    int64_t time;
    uint64_t seq;
    uint64_t addr;
    int64_t bytes;
    int64_t total; // Total Allocated after this event (when hasTotal)
    uint32_t device;
    bool hasAddr;
    bool hasTotal;
};

struct DeviceMem
{
    int64_t allocs = 0, frees = 0;
    bool haveTotals = false;
    int64_t baseline = 0; // Total Allocated before the first event
    int64_t lastTotal = 0, peakTotal = 0;
    int64_t preexistingFrees = 0;
    int64_t preexistingFreedBytes = 0;
};

class KinetoImporter final : public Importer
{
public:
    KinetoImporter(const std::string& path, ImportOptions opts) : Importer(path, std::move(opts)) {}
    Format format() const override { return Format::Kineto; }
    void prepare() override
    {
        // Cheap check so that a file that is not JSON fails before any output exists.
        ByteReader r(path_);
        JsonReader j(r);
        const int c = j.peekToken();
        if (c != '{' && c != '[') j.fail("expected a Chrome-trace JSON object or array");
    }
    void configure(IngestOptions& o) const override
    {
        o.sourceKind = "kineto";
        o.sourcePath = path_;
        o.expectRegions = false; // Kineto reports blocks, not the segments holding them
        o.aliveAtEndIsAnomaly = false;
    }
    void emit(Ingest& ing) override;

private:
    void onEvent(const JsonDoc& d, Ingest& ing);
    void onTimelineRow(const JsonDoc& d);
    void onDevices(const JsonDoc& d, Ingest& ing);

    std::vector<MemEvent> mem_;
    std::vector<Event> other_;
    std::map<uint32_t, DeviceMem> dev_;
    int64_t memoryEvents_ = 0, cpuAllocs_ = 0, cpuFrees_ = 0, kernels_ = 0, annotations_ = 0;
    bool anyAddr_ = false, anyNoAddr_ = false;
    // torch.profiler export_memory_timeline rows [time_us, action, bytes, category].
    int64_t timelineRows_ = 0, timelinePreexisting_ = 0, timelinePreexistingBytes_ = 0;
    uint64_t seq_ = 0;
};

void KinetoImporter::onDevices(const JsonDoc& d, Ingest& ing)
{
    if (d.node(d.root()).type != JType::Array) return;
    for (uint32_t c = d.node(d.root()).first; c != JsonDoc::kNone; c = d.node(c).next) {
        int64_t id = 0, mem = 0;
        if (!d.toInt(d.member(c, "id"), id) || id < 0) continue;
        d.toInt(d.member(c, "totalGlobalMem"), mem);
        DeviceInfo info;
        info.id = static_cast<uint32_t>(id);
        info.name = std::string(d.str(d.member(c, "name")));
        info.capacityBytes = static_cast<uint64_t>(std::max<int64_t>(mem, 0));
        ing.addDevice(info);
    }
}

void KinetoImporter::onTimelineRow(const JsonDoc& d)
{
    // Actions (torch.profiler._memory_profiler.Action): 1 PREEXISTING, 2 CREATE, 3
    // INCREMENT_VERSION (a -bytes/+bytes pair that only changes the category), 4 DESTROY.
    ++timelineRows_;
    int64_t t = 0, action = 0, bytes = 0;
    const uint32_t root = d.root();
    // The first field is named time_us by the catalogue, but PyTorch writes nanoseconds
    // (values ~1.7e18 for 2023), so it is taken as ns.
    if (!d.toInt(d.child(root, 1), action) || !d.toInt(d.child(root, 2), bytes) ||
        !d.toInt(d.child(root, 0), t))
        return;
    if (action == 1) {
        ++timelinePreexisting_;
        timelinePreexistingBytes_ += bytes;
        return;
    }
    if (action != 2 && action != 4) return;
    mem_.push_back({t, seq_++, 0, bytes, 0, 0, false, false});
    anyNoAddr_ = true;
    ++memoryEvents_;
    (bytes >= 0 ? dev_[0].allocs : dev_[0].frees)++;
}

void KinetoImporter::onEvent(const JsonDoc& d, Ingest& ing)
{
    const uint32_t root = d.root();
    if (d.node(root).type != JType::Object) return;
    const std::string_view name = d.str(d.member(root, "name"));
    const std::string_view cat = d.str(d.member(root, "cat"));
    const uint32_t args = d.member(root, "args");
    int64_t t = 0;
    if (!d.toNanosFromMicros(d.member(root, "ts"), t))
        return; // metadata events ("ph": "M") have no time
    if (name == "[memory]") {
        ++memoryEvents_;
        int64_t type = -1, device = -1, bytes = 0, addr = 0, total = 0;
        d.toInt(d.member(args, "Device Type"), type);
        d.toInt(d.member(args, "Device Id"), device);
        d.toInt(d.member(args, "Bytes"), bytes);
        const bool hasAddr = d.toInt(d.member(args, "Addr"), addr);
        if (type != 1) { // 1 = CUDA; CPU memory is counted, not placed on a GPU's address space
            (bytes >= 0 ? cpuAllocs_ : cpuFrees_)++;
            return;
        }
        DeviceMem& dm = dev_[static_cast<uint32_t>(std::max<int64_t>(device, 0))];
        (bytes >= 0 ? dm.allocs : dm.frees)++;
        const bool hasTotal = d.toInt(d.member(args, "Total Allocated"), total);
        (hasAddr ? anyAddr_ : anyNoAddr_) = true;
        mem_.push_back({t, seq_++, static_cast<uint64_t>(addr), bytes, total,
                        static_cast<uint32_t>(std::max<int64_t>(device, 0)), hasAddr, hasTotal});
        return;
    }
    int64_t dur = 0;
    d.toNanosFromMicros(d.member(root, "dur"), dur);
    // Durations are bounded so that t + dur cannot overflow (hostile or corrupt input).
    dur = std::clamp<int64_t>(dur, 0, std::numeric_limits<int64_t>::max() / 4);
    if (t > std::numeric_limits<int64_t>::max() / 2 || t < std::numeric_limits<int64_t>::min() / 2)
        return;
    if (cat == "kernel" || cat == "Kernel") {
        ++kernels_;
        Event e;
        e.type = EventType::Kernel;
        e.time = t;
        e.endTime = t + std::max<int64_t>(dur, 0);
        e.name = ing.intern(name);
        int64_t v = 0;
        if (d.toInt(d.member(args, "device"), v) && v >= 0) e.device = static_cast<uint32_t>(v);
        if (d.toInt(d.member(args, "stream"), v) && v >= 0) e.stream = static_cast<uint32_t>(v);
        if (d.toInt(d.member(args, "correlation"), v) && v >= 0) e.aux = static_cast<uint64_t>(v);
        const uint32_t grid = d.member(args, "grid"), block = d.member(args, "block");
        for (size_t i = 0; i < 3; ++i) {
            if (d.toInt(d.child(grid, i), v) && v >= 0) e.grid[i] = static_cast<uint32_t>(v);
            if (d.toInt(d.child(block, i), v) && v >= 0) e.block[i] = static_cast<uint32_t>(v);
        }
        other_.push_back(e);
    } else if (cat == "user_annotation" || cat == "gpu_user_annotation") {
        ++annotations_;
        Event e;
        e.type = EventType::Range;
        e.time = t;
        e.endTime = t + std::max<int64_t>(dur, 0);
        e.name = ing.intern(name);
        other_.push_back(e);
    }
}

void KinetoImporter::emit(Ingest& ing)
{
    ByteReader r(path_);
    JsonReader j(r);
    JsonDoc doc;
    const uint64_t total = r.fileSize();
    uint64_t nextProgress = 0;
    auto progress = [&] {
        if (opts_.progress && r.offset() >= nextProgress) {
            opts_.progress(r.offset(), r.compressed() ? 0 : total);
            nextProgress = r.offset() + (4 << 20);
        }
    };
    auto readEvents = [&] {
        j.expect('[', "'[' starting the traceEvents array");
        if (j.accept(']')) return;
        while (true) {
            j.readValue(doc);
            if (doc.node(doc.root()).type == JType::Array)
                onTimelineRow(doc);
            else
                onEvent(doc, ing);
            progress();
            if (j.accept(',')) continue;
            j.expect(']', "',' or ']' in the traceEvents array");
            return;
        }
    };
    bool sawEvents = false;
    if (j.peekToken() == '[') {
        readEvents(); // the bare-array form of the Chrome trace format
        sawEvents = true;
    } else {
        j.expect('{', "a Chrome-trace JSON object");
        if (!j.accept('}')) {
            while (true) {
                const std::string key = j.readString();
                j.expect(':', "':' after an object key");
                if (key == "traceEvents") {
                    readEvents();
                    sawEvents = true;
                } else if (key == "deviceProperties") {
                    j.readValue(doc);
                    onDevices(doc, ing);
                } else {
                    j.skipValue();
                }
                if (j.accept(',')) continue;
                j.expect('}', "',' or '}' in the top-level object");
                break;
            }
        }
    }
    j.expectEnd();
    if (!sawEvents) throw ImportError(path_, "not a Kineto/Chrome trace: no 'traceEvents' array");

    // Memory events in time order (the file's order is by thread, not time); pairing follows.
    std::stable_sort(mem_.begin(), mem_.end(), [](const MemEvent& a, const MemEvent& b) {
        return a.time != b.time ? a.time < b.time : a.seq < b.seq;
    });
    std::map<uint32_t, std::map<uint64_t, uint64_t>> live;                // addr -> size
    std::map<uint32_t, std::map<uint64_t, std::vector<uint64_t>>> bySize; // no Addr: size -> addrs
    uint64_t synthetic = 0x1000; // addresses for traces without Addr: a bump pointer, never reused
    std::vector<Event> memEvents;
    memEvents.reserve(mem_.size());
    for (const MemEvent& m : mem_) {
        DeviceMem& dm = dev_[m.device];
        if (m.hasTotal) {
            // Baseline: what was allocated just before the first event in time order.
            if (!dm.haveTotals) dm.baseline = m.total - m.bytes;
            dm.haveTotals = true;
            dm.lastTotal = m.total;
            dm.peakTotal = std::max(dm.peakTotal, m.total);
        }
        Event e;
        e.time = m.time;
        e.device = m.device;
        e.level = Level::Framework;
        const uint64_t size = static_cast<uint64_t>(m.bytes >= 0 ? m.bytes : -m.bytes);
        e.size = size;
        if (m.bytes >= 0) {
            e.type = EventType::Alloc;
            if (m.hasAddr) {
                e.address = m.addr;
                live[m.device][m.addr] = size;
            } else {
                e.address = synthetic;
                synthetic += std::max<uint64_t>(size, 1);
                bySize[m.device][size].push_back(e.address);
            }
        } else {
            e.type = EventType::Free;
            if (m.hasAddr) {
                auto& lv = live[m.device];
                auto it = lv.find(m.addr);
                if (it == lv.end()) {
                    // Allocated before the trace started: part of the baseline, not an event.
                    ++dm.preexistingFrees;
                    dm.preexistingFreedBytes += static_cast<int64_t>(size);
                    continue;
                }
                lv.erase(it);
                e.address = m.addr;
            } else {
                auto& v = bySize[m.device][size];
                if (v.empty()) {
                    ++dm.preexistingFrees;
                    dm.preexistingFreedBytes += static_cast<int64_t>(size);
                    continue;
                }
                e.address = v.back(); // the most recent live allocation of that size
                v.pop_back();
            }
        }
        memEvents.push_back(e);
    }
    mem_.clear();
    mem_.shrink_to_fit();
    // Everything in one time order (ties: memory first, as it came first in the file order).
    std::vector<Event> all;
    all.reserve(memEvents.size() + other_.size());
    std::stable_sort(other_.begin(), other_.end(),
                     [](const Event& a, const Event& b) { return a.time < b.time; });
    std::merge(memEvents.begin(), memEvents.end(), other_.begin(), other_.end(),
               std::back_inserter(all),
               [](const Event& a, const Event& b) { return a.time < b.time; });
    memEvents.clear();
    other_.clear();
    for (const Event& e : all)
        ing.add(e);

    // Report what the trace says about itself.
    report_.counts["memory_events"] = memoryEvents_;
    report_.counts["kernels"] = kernels_;
    report_.counts["annotations"] = annotations_;
    report_.counts["cpu_allocs"] = cpuAllocs_;
    report_.counts["cpu_frees"] = cpuFrees_;
    JsonWriter jw(false);
    jw.beginObject();
    jw.field("memory_events", memoryEvents_)
        .field("kernels", kernels_)
        .field("cpu_allocs", cpuAllocs_)
        .field("cpu_frees", cpuFrees_);
    jw.key("cuda").beginObject();
    for (const auto& [id, dm] : dev_) {
        jw.key(std::to_string(id)).beginObject();
        jw.field("allocs", dm.allocs).field("frees", dm.frees);
        if (dm.haveTotals)
            jw.field("baseline_allocated_bytes", dm.baseline)
                .field("last_total_allocated", dm.lastTotal)
                .field("peak_total_allocated", dm.peakTotal);
        jw.field("preexisting_frees", dm.preexistingFrees);
        jw.endObject();
        report_.counts[fmt::format("cuda{}.allocs", id)] = dm.allocs;
        report_.counts[fmt::format("cuda{}.frees", id)] = dm.frees;
        if (dm.haveTotals) {
            report_.counts[fmt::format("cuda{}.baseline", id)] = dm.baseline;
            report_.counts[fmt::format("cuda{}.last_total", id)] = dm.lastTotal;
            report_.counts[fmt::format("cuda{}.peak_total", id)] = dm.peakTotal;
            // The baseline is reported, not invented as allocations (their addresses are unknown).
            ing.health(
                "preexisting_baseline", dm.baseline,
                fmt::format("device {}: {} B were allocated before the trace started (from 'Total "
                            "Allocated'); they are not in the allocations table",
                            id, dm.baseline));
        }
        if (dm.preexistingFrees > 0)
            warn(&ing,
                 fmt::format(
                     "device {}: {} frees ({} B) release memory allocated before the trace started",
                     id, dm.preexistingFrees, dm.preexistingFreedBytes));
    }
    jw.endObject().endObject();
    ing.setMeta("kineto.summary", jw.str());
    if (timelineRows_ > 0) {
        // A memory-timeline export: one device, no addresses; what existed before profiling
        // is the baseline.
        report_.counts["timeline_rows"] = timelineRows_;
        report_.counts["timeline_preexisting"] = timelinePreexisting_;
        ing.setMeta("kineto.format", "torch.profiler memory timeline (export_memory_timeline)");
        ing.setMeta("kineto.timeline",
                    fmt::format(R"({{"rows":{},"preexisting":{},"preexisting_bytes":{}}})",
                                timelineRows_, timelinePreexisting_, timelinePreexistingBytes_));
        ing.health(
            "preexisting_baseline", timelinePreexistingBytes_,
            fmt::format(
                "{} tensors ({} B) existed before profiling (action PREEXISTING); they are not in "
                "the allocations table",
                timelinePreexisting_, timelinePreexistingBytes_));
    }
    if (anyNoAddr_) {
        ing.setMeta("address_view", "unavailable");
        warn(&ing, "the trace's [memory] events have no 'Addr': the address view is unavailable; "
                   "allocations "
                   "carry placeholder addresses, frees are paired with the latest live allocation "
                   "of the same size");
    }
    if (memoryEvents_ == 0 && timelineRows_ == 0)
        warn(&ing, "the trace has no [memory] events (profile with profile_memory=True)");
}

} // namespace

std::unique_ptr<Importer> makeKinetoImporter(const std::string& path, ImportOptions opts)
{
    return std::make_unique<KinetoImporter>(path, std::move(opts));
}

} // namespace fs::import
