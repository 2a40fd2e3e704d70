// PyTorch caching-allocator snapshots (torch.cuda.memory._dump_snapshot): segments -> regions,
// blocks -> framework allocations, device_traces -> events. The trace is a ring buffer that may
// start long after the segments were created, so the state at its first entry is reconstructed
// by undoing the trace backwards from the final segments/blocks; the forward replay then ends in
// exactly the snapshot's final state (docs/importers.md, "PyTorch snapshots").
#include "importer.h"
#include "pickle_reader.h"

#include "core/json.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

namespace fs::import {

namespace {

enum class Act : uint8_t {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Snapshot,
    Unknown,
};
constexpr std::array<std::string_view, 9> kActNames = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "oom",
    "snapshot",
};

Act actOf(std::string_view s)
{
    for (size_t i = 0; i < kActNames.size(); ++i)
        if (s == kActNames[i]) return static_cast<Act>(i);
    if (s == "free") // older PyTorch: one free action
        return Act::FreeCompleted;
    return Act::Unknown;
}

// Keys of trace entries, blocks and frames: dicts with only these keys are stored compactly
// (PickleOptions::compactKeys), and decoding switches on the key's index in this list.
enum Key : int {
    kAction,
    kAddr,
    kSize,
    kStream,
    kTimeUs,
    kFrames,
    kDeviceFree,
    kCompileContext,
    kUserMetadata,
    kAddress,
    kRequestedSize,
    kState,
    kHistory,
    kName,
    kFilename,
    kLine,
    kRealSize,
};
const std::vector<std::string> kCompactKeys = {
    "action",        "addr",    "size",           "stream",
    "time_us",       "frames",  "device_free",    "compile_context",
    "user_metadata", "address", "requested_size", "state",
    "history",       "name",    "filename",       "line",
    "real_size",
};

struct Entry
{
    int64_t time = 0;
    uint64_t addr = 0;
    uint64_t size = 0;
    uint64_t extra =
        0; // alloc: requested size (known only for blocks alive at the end); oom: device_free
    PValue frames;
    uint32_t stream = 0;
    Act act = Act::Unknown;
    bool hasTime = false;
};

struct SegInfo
{
    uint64_t size = 0;
    uint32_t stream = 0;
    uint64_t pool = 0;
    std::string type;
    bool expandable = false;
};

struct AllocInfo
{
    uint64_t size = 0;
    uint64_t requested = 0;
    uint32_t stream = 0;
    PValue frames;
    bool fromFinal = false;
};

// Mapped pieces of expandable segments: address -> size, merged when adjacent.
using Ranges = std::map<uint64_t, uint64_t>;

void addRange(Ranges& r, uint64_t a, uint64_t s)
{
    if (s == 0) return;
    uint64_t lo = a, hi = a + s;
    auto it = r.lower_bound(a);
    if (it != r.begin() && std::prev(it)->first + std::prev(it)->second >= a) --it;
    while (it != r.end() && it->first <= hi) {
        lo = std::min(lo, it->first);
        hi = std::max(hi, it->first + it->second);
        it = r.erase(it);
    }
    r[lo] = hi - lo;
}

void removeRange(Ranges& r, uint64_t a, uint64_t s)
{
    const uint64_t end = a + s;
    auto it = r.lower_bound(a);
    if (it != r.begin()) --it;
    while (it != r.end() && it->first < end) {
        const uint64_t pa = it->first, pe = it->first + it->second;
        if (pe <= a) {
            ++it;
            continue;
        }
        it = r.erase(it);
        if (pa < a) r[pa] = a - pa;
        if (pe > end) r[end] = pe - end;
    }
}

struct DeviceState
{
    std::map<uint64_t, SegInfo> finalSegs;
    std::map<uint64_t, AllocInfo> finalAllocs;
    Ranges finalMapped;
    std::map<uint64_t, SegInfo> initSegs;
    std::map<uint64_t, AllocInfo> initAllocs;
    Ranges initMapped;
    std::vector<PValue> trace; // the entry dicts, decoded on each pass (memory: 8 B per entry)
    // Block size, requested size and frames of the alloc entries whose block is alive at the
    // end (the final block is authoritative), by entry index.
    std::unordered_map<size_t, AllocInfo> finalInstance;
    uint64_t expLo = ~uint64_t{0}, expHi = 0; // bounding range of expandable memory
    int64_t inconsistent = 0;
    Act freeAct = Act::FreeCompleted;
    bool hasCompleted = false, hasRequested = false;
};

class PytorchSnapshotImporter final : public Importer
{
public:
    PytorchSnapshotImporter(const std::string& path, ImportOptions opts)
        : Importer(path, std::move(opts))
    {
    }
    Format format() const override { return Format::PytorchSnapshot; }
    void prepare() override;
    void configure(IngestOptions& o) const override
    {
        o.sourceKind = "pytorch-snapshot";
        o.sourcePath = path_;
        o.timeAxis = ordinal_ ? TimeAxis::Ordinal : TimeAxis::Nanoseconds;
        o.aliveAtEndIsAnomaly = false;
        o.expectRegions = true;
    }
    void emit(Ingest& ingest) override;

private:
    [[noreturn]] void bad(const std::string& what) const
    {
        throw ImportError(path_, "snapshot structure: " + what);
    }
    uint64_t u64(PValue v, const char* what) const
    {
        uint64_t out = 0;
        if (!doc_->toU64(v, out))
            bad(fmt::format("'{}' should be a non-negative integer, found {}", what,
                            ptypeName(v.type())));
        return out;
    }
    uint32_t streamId(PValue v)
    {
        int64_t raw = 0;
        uint64_t uraw = 0;
        if (doc_->toI64(v, raw))
            uraw = static_cast<uint64_t>(raw);
        else if (!doc_->toU64(v, uraw))
            return 0;
        if (uraw == 0) return 0;
        auto [it, inserted] = streams_.emplace(uraw, static_cast<uint32_t>(streams_.size() + 1));
        return it->second;
    }
    void decodeSegments(PValue segs);
    void decodeTrace(uint32_t device, PValue list);
    Entry decode(PValue ev, uint32_t device);
    void reconstruct(uint32_t device, DeviceState& d);
    uint64_t stackOf(PValue frames, Ingest& ing);
    StringId frameString(PValue frame, Ingest& ing);

    std::unique_ptr<PickleDoc> doc_;
    std::map<uint32_t, DeviceState> devices_;
    std::map<uint64_t, uint32_t> streams_;
    std::array<int64_t, kActNames.size() + 1> actCounts_{};
    std::map<std::string, int64_t> unknownActs_;
    bool ordinal_ = false;
    bool anyTime_ = false;
    bool derivedAddresses_ = false;
    int64_t nonMonotonic_ = 0;
    int64_t untiledSegments_ = 0;
    std::unordered_map<uint64_t, StringId> frameCache_;
    std::unordered_map<std::string, uint64_t> stackCache_;
    std::string stackKey_;
};

void PytorchSnapshotImporter::prepare()
{
    ByteReader r(path_);
    PickleOptions po;
    po.compactKeys = kCompactKeys;
    const uint64_t total = r.fileSize();
    if (opts_.progress) po.progress = [&](uint64_t off) { opts_.progress(off, total); };
    doc_ = PickleReader::read(r, po);
    const PValue root = doc_->root();
    PValue segs, traces;
    if (root.type() == PType::Dict) {
        segs = doc_->get(root, "segments");
        traces = doc_->get(root, "device_traces");
        if (!segs.valid())
            bad("the top-level dict has no 'segments' (not a torch.cuda.memory snapshot)");
    } else if (root.type() == PType::List) {
        segs = root; // torch.cuda.memory_snapshot(): a bare list of segments
    } else {
        bad(fmt::format("the pickle holds a {}, expected a dict with 'segments'",
                        ptypeName(root.type())));
    }
    if (segs.type() != PType::List) bad("'segments' should be a list");
    decodeSegments(segs);
    if (traces.valid() && traces.type() != PType::None) {
        if (traces.type() != PType::List)
            bad("'device_traces' should be a list (one list per device)");
        uint32_t dev = 0;
        doc_->forEach(traces, [&](PValue t) { decodeTrace(dev++, t); });
    }
    // time_us x 1000 when any entry has it, else the entry's ordinal.
    ordinal_ = !anyTime_;
    for (auto& [id, d] : devices_)
        reconstruct(id, d);
    for (size_t i = 0; i < kActNames.size(); ++i)
        if (actCounts_[i]) report_.counts["trace." + std::string(kActNames[i])] = actCounts_[i];
}

void PytorchSnapshotImporter::decodeSegments(PValue segs)
{
    doc_->forEach(segs, [&](PValue s) {
        if (s.type() != PType::Dict)
            bad(fmt::format("a segment should be a dict, found {}", ptypeName(s.type())));
        SegInfo info;
        uint32_t device = 0;
        uint64_t addr = 0;
        bool haveAddr = false, haveSize = false;
        PValue blocks;
        doc_->forEachItem(s, [&](PValue k, PValue v) {
            const std::string_view key = doc_->str(k);
            if (key == "device")
                device = static_cast<uint32_t>(u64(v, "device"));
            else if (key == "address")
                addr = u64(v, "address"), haveAddr = true;
            else if (key == "total_size")
                info.size = u64(v, "total_size"), haveSize = true;
            else if (key == "stream")
                info.stream = streamId(v);
            else if (key == "segment_type")
                info.type = std::string(doc_->str(v));
            else if (key == "is_expandable")
                info.expandable = v.type() == PType::Bool && v.payload() != 0;
            else if (key == "segment_pool_id" && doc_->size(v) == 2) {
                uint64_t a = 0, b = 0;
                doc_->toU64(doc_->at(v, 0), a);
                doc_->toU64(doc_->at(v, 1), b);
                info.pool = (a << 32) | (b & 0xffffffffu);
            } else if (key == "blocks")
                blocks = v;
        });
        if (!haveAddr || !haveSize) bad("a segment lacks 'address' or 'total_size'");
        DeviceState& d = devices_[device];
        if (info.expandable) {
            addRange(d.finalMapped, addr, info.size);
            d.expLo = std::min(d.expLo, addr);
            d.expHi = std::max(d.expHi, addr + info.size);
        } else {
            d.finalSegs[addr] = info;
        }
        uint64_t cursor = addr;
        doc_->forEach(blocks, [&](PValue b) {
            if (b.type() != PType::Dict) bad("a block should be a dict");
            AllocInfo a;
            a.stream = info.stream;
            a.fromFinal = true;
            uint64_t baddr = cursor;
            bool active = false;
            PValue history;
            doc_->forEachItem(b, [&](PValue k, PValue v) {
                const std::string_view key = doc_->str(k);
                if (key == "address")
                    baddr = u64(v, "block address");
                else if (key == "size")
                    a.size = u64(v, "block size");
                else if (key == "requested_size")
                    a.requested = u64(v, "requested_size");
                else if (key == "state")
                    active = doc_->str(v).starts_with(
                        "active"); // active_allocated, active_awaiting_free
                else if (key == "frames")
                    a.frames = v;
                else if (key == "history")
                    history = v;
            });
            if (doc_->get(b, "address").valid() == false)
                derivedAddresses_ =
                    true; // ~2.0 format: address = segment address + sizes before it
            if (!a.frames.valid() && history.type() == PType::List && doc_->size(history) > 0)
                a.frames = doc_->get(doc_->at(history, doc_->size(history) - 1), "frames");
            if (active) d.finalAllocs[baddr] = a;
            cursor = baddr + a.size;
        });
        if (doc_->size(blocks) > 0 && cursor != addr + info.size) ++untiledSegments_;
    });
}

Entry PytorchSnapshotImporter::decode(PValue ev, uint32_t device)
{
    if (ev.type() != PType::Dict)
        bad(fmt::format("a trace entry of device {} should be a dict, found {}", device,
                        ptypeName(ev.type())));
    Entry e;
    std::string_view action;
    doc_->forEachItem(ev, [&](PValue k, PValue v) {
        switch (doc_->keyIndex(k)) {
        case kAction:
            action = doc_->str(v);
            break;
        case kAddr:
            e.addr = u64(v, "addr");
            break;
        case kSize:
            e.size = u64(v, "size");
            break;
        case kStream:
            e.stream = streamId(v);
            break;
        case kTimeUs: {
            int64_t t = 0;
            // Kept in a range where x1000 (ns) cannot overflow.
            if (doc_->toI64(v, t) && t > -(int64_t{1} << 52) && t < (int64_t{1} << 52)) {
                e.time = t;
                e.hasTime = true;
            }
            break;
        }
        case kFrames:
            e.frames = v;
            break;
        case kDeviceFree:
            doc_->toU64(v, e.extra);
            break;
        default:
            break;
        }
    });
    e.act = actOf(action);
    return e;
}

void PytorchSnapshotImporter::decodeTrace(uint32_t device, PValue list)
{
    if (list.type() != PType::List) bad(fmt::format("device_traces[{}] should be a list", device));
    DeviceState& d = devices_[device];
    d.trace.reserve(doc_->size(list));
    doc_->forEach(list, [&](PValue ev) {
        const Entry e = decode(ev, device);
        if (e.act == Act::Unknown) {
            std::string_view action;
            doc_->forEachItem(ev, [&](PValue k, PValue v) {
                if (doc_->keyIndex(k) == kAction) action = doc_->str(v);
            });
            ++unknownActs_[std::string(action)];
            ++actCounts_.back();
        } else {
            ++actCounts_[static_cast<size_t>(e.act)];
        }
        anyTime_ |= e.hasTime;
        d.hasCompleted |= e.act == Act::FreeCompleted;
        d.hasRequested |= e.act == Act::FreeRequested;
        if (e.act == Act::SegmentMap || e.act == Act::SegmentUnmap) {
            d.expLo = std::min(d.expLo, e.addr);
            d.expHi = std::max(d.expHi, e.addr + e.size);
        }
        d.trace.push_back(ev);
    });
}

void PytorchSnapshotImporter::reconstruct(uint32_t, DeviceState& d)
{
    // Which action frees a block: free_completed, since a block whose free was requested but is
    // still waiting on other streams (active_awaiting_free) is allocated in the final state.
    // Traces that record only free_requested fall back to it.
    const bool hasCompleted = d.hasCompleted, hasRequested = d.hasRequested;
    d.freeAct = !hasCompleted && hasRequested ? Act::FreeRequested : Act::FreeCompleted;

    auto segs = d.finalSegs;
    auto allocs = d.finalAllocs;
    Ranges mapped = d.finalMapped;
    for (size_t i = d.trace.size(); i-- > 0;) {
        const Entry e = decode(d.trace[i], 0);
        if (e.act == Act::Alloc) {
            auto it = allocs.find(e.addr);
            if (it == allocs.end()) {
                ++d.inconsistent;
                continue;
            }
            if (it->second.fromFinal) {
                // The instance alive at the end: its block size is authoritative (the trace
                // records the caller's size when the allocator hands out an unsplit block).
                AllocInfo fin = it->second;
                if (e.frames.valid()) fin.frames = e.frames;
                d.finalInstance[i] = fin;
            }
            allocs.erase(it);
        } else if (e.act == d.freeAct) {
            if (allocs.count(e.addr)) ++d.inconsistent;
            AllocInfo a;
            a.size = e.size;
            a.stream = e.stream;
            allocs[e.addr] = a; // allocated before the trace began: its stack is unknown
        } else if (e.act == Act::SegmentAlloc) {
            if (!segs.erase(e.addr)) ++d.inconsistent;
        } else if (e.act == Act::SegmentFree) {
            SegInfo s;
            s.size = e.size;
            s.stream = e.stream;
            s.type =
                e.size <= (2u << 20) ? "small" : "large"; // inferred: small-pool segments are 2 MiB
            segs[e.addr] = s;
        } else if (e.act == Act::SegmentMap) {
            removeRange(mapped, e.addr, e.size);
        } else if (e.act == Act::SegmentUnmap) {
            addRange(mapped, e.addr, e.size);
        }
    }
    d.initSegs = std::move(segs);
    d.initAllocs = std::move(allocs);
    d.initMapped = std::move(mapped);
}

StringId PytorchSnapshotImporter::frameString(PValue frame, Ingest& ing)
{
    auto it = frameCache_.find(frame.payload());
    if (it != frameCache_.end()) return it->second;
    std::string_view name, file;
    int64_t line = 0;
    doc_->forEachItem(frame, [&](PValue k, PValue v) {
        const std::string_view key = doc_->str(k);
        if (key == "name")
            name = doc_->str(v);
        else if (key == "filename")
            file = doc_->str(v);
        else if (key == "line")
            doc_->toI64(v, line);
    });
    std::string text(name);
    if (!file.empty() && file != "??")
        text += line > 0 ? fmt::format(" ({}:{})", file, line) : fmt::format(" ({})", file);
    const StringId id = ing.intern(text);
    frameCache_.emplace(frame.payload(), id);
    return id;
}

uint64_t PytorchSnapshotImporter::stackOf(PValue frames, Ingest& ing)
{
    if (frames.type() != PType::List || doc_->size(frames) == 0) return 0;
    // Every entry has its own frames list, but the frame dicts in it are memo references
    // shared across entries: the list of their ids is the cache key (few distinct stacks).
    stackKey_.clear();
    doc_->forEach(frames, [&](PValue f) {
        const uint64_t bits = f.payload() | (static_cast<uint64_t>(f.type()) << 60);
        stackKey_.append(reinterpret_cast<const char*>(&bits), sizeof bits);
    });
    auto it = stackCache_.find(stackKey_);
    if (it != stackCache_.end()) return it->second;
    std::vector<StringId> ids;
    ids.reserve(doc_->size(frames));
    doc_->forEach(frames, [&](PValue f) {
        if (f.type() == PType::Dict) ids.push_back(frameString(f, ing));
    });
    const uint64_t id = ids.empty() ? 0 : ing.internStack(ids);
    stackCache_.emplace(stackKey_, id);
    return id;
}

void PytorchSnapshotImporter::emit(Ingest& ing)
{
    const StringId expandableName = ing.intern("expandable");
    for (auto& [dev, d] : devices_) {
        DeviceInfo info;
        info.id = dev;
        info.name = fmt::format("cuda:{}", dev);
        ing.addDevice(info);
    }
    int64_t inconsistent = 0, fixed = 0, preexisting = 0;
    int64_t spanUs = -1;
    for (auto& [dev, d] : devices_) {
        // Time of the trace's first entry; the reconstructed state is placed there.
        int64_t t0 = 0;
        if (!ordinal_) {
            for (PValue ev : d.trace) {
                const Entry e = decode(ev, dev);
                if (e.hasTime) {
                    t0 = e.time * 1000;
                    break;
                }
            }
        }
        Event base;
        base.device = dev;
        base.level = Level::Framework;
        base.time = t0;
        std::map<uint64_t, uint64_t> curSegs;   // addr -> size, mirrors what ingest was told
        std::map<uint64_t, uint64_t> curAllocs; // addr -> size
        Ranges pieces;                          // expandable mapped pieces as ingest knows them
        const bool hasExpandable = d.expHi > d.expLo;
        auto regionCreate = [&](uint64_t a, const SegInfo& s, int64_t t) {
            Event e = base;
            e.type = EventType::RegionCreate;
            e.time = t;
            e.address = a;
            e.size = s.size;
            e.stream = s.stream;
            e.aux = s.pool;
            e.regionKind = RegionKind::Segment;
            e.name = s.type.empty() ? kNoString : ing.intern(s.type);
            ing.add(e);
            curSegs[a] = s.size;
        };
        if (hasExpandable) {
            // One reservation spanning every expandable mapping seen on this device; which parts
            // are backed is told by RegionMap/RegionUnmap (region_mappings).
            Event e = base;
            e.type = EventType::RegionCreate;
            e.address = d.expLo;
            e.size = d.expHi - d.expLo;
            e.regionKind = RegionKind::Vmm;
            e.name = expandableName;
            e.flags = 1;
            ing.add(e);
        }
        auto mapPiece = [&](uint64_t a, uint64_t s, int64_t t) {
            Event e = base;
            e.type = EventType::RegionMap;
            e.time = t;
            e.address = a;
            e.size = s;
            ing.add(e);
            pieces[a] = s;
        };
        auto unmap = [&](uint64_t a, uint64_t s, int64_t t) {
            const uint64_t end = a + s;
            auto it = pieces.lower_bound(a);
            if (it != pieces.begin()) --it;
            std::vector<std::pair<uint64_t, uint64_t>> hit;
            for (; it != pieces.end() && it->first < end; ++it)
                if (it->first + it->second > a) hit.emplace_back(*it);
            for (auto [pa, ps] : hit) {
                Event e = base;
                e.type = EventType::RegionUnmap;
                e.time = t;
                e.address = pa;
                e.size = ps;
                ing.add(e);
                pieces.erase(pa);
                if (pa < a) mapPiece(pa, a - pa, t);
                if (pa + ps > end) mapPiece(end, pa + ps - end, t);
            }
        };
        auto alloc = [&](uint64_t a, uint64_t size, uint64_t req, uint32_t stream, PValue frames,
                         int64_t t) {
            Event e = base;
            e.type = EventType::Alloc;
            e.time = t;
            e.address = a;
            e.size = size;
            e.requestedSize = req;
            e.stream = stream;
            e.aux = stackOf(frames, ing);
            ing.add(e);
            curAllocs[a] = size;
        };
        auto free = [&](uint64_t a, uint64_t size, uint32_t stream, int64_t t) {
            Event e = base;
            e.type = EventType::Free;
            e.time = t;
            e.address = a;
            e.size = size;
            e.stream = stream;
            ing.add(e);
            curAllocs.erase(a);
        };

        for (const auto& [a, s] : d.initSegs)
            regionCreate(a, s, t0);
        for (const auto& [a, s] : d.initMapped)
            mapPiece(a, s, t0);
        for (const auto& [a, al] : d.initAllocs) {
            alloc(a, al.size, al.requested, al.stream, al.frames, t0);
            ++preexisting;
        }

        int64_t t = t0, firstUs = 0, lastUs = 0;
        bool haveUs = false;
        for (size_t i = 0; i < d.trace.size(); ++i) {
            Entry e = decode(d.trace[i], dev);
            if (e.act == Act::Alloc) {
                auto fin = d.finalInstance.find(i);
                if (fin != d.finalInstance.end()) {
                    e.size = fin->second.size;
                    e.extra = fin->second.requested;
                    e.frames = fin->second.frames;
                }
            }
            if (ordinal_) {
                t = static_cast<int64_t>(i) + 1;
            } else if (e.hasTime) {
                if (!haveUs) firstUs = e.time;
                haveUs = true;
                lastUs = e.time;
                const int64_t ns = e.time * 1000;
                if (ns < t)
                    ++nonMonotonic_; // keep session time monotonic; the order is the trace's
                else
                    t = ns;
            }
            switch (e.act) {
            case Act::Alloc:
                alloc(e.addr, e.size, e.extra, e.stream, e.frames, t);
                break;
            case Act::SegmentAlloc: {
                auto fit = d.finalSegs.find(e.addr);
                SegInfo s = fit != d.finalSegs.end() && fit->second.size == e.size ? fit->second
                                                                                   : SegInfo{};
                if (s.size == 0) {
                    s.size = e.size;
                    s.stream = e.stream;
                    s.type = e.size <= (2u << 20) ? "small" : "large";
                }
                regionCreate(e.addr, s, t);
                break;
            }
            case Act::SegmentFree: {
                Event ev = base;
                ev.type = EventType::RegionDestroy;
                ev.time = t;
                ev.address = e.addr;
                ev.size = e.size;
                ing.add(ev);
                curSegs.erase(e.addr);
                break;
            }
            case Act::SegmentMap:
                mapPiece(e.addr, e.size, t);
                break;
            case Act::SegmentUnmap:
                unmap(e.addr, e.size, t);
                break;
            case Act::Oom: {
                Event ev = base;
                ev.type = EventType::Oom;
                ev.time = t;
                ev.size = e.size;
                ev.aux = e.extra;
                ev.stream = e.stream;
                ing.add(ev);
                break;
            }
            case Act::Snapshot: {
                Event ev = base;
                ev.type = EventType::Mark;
                ev.time = t;
                ev.name = ing.intern("pytorch snapshot");
                ing.add(ev);
                break;
            }
            default:
                if (e.act == d.freeAct) free(e.addr, e.size, e.stream, t);
                break;
            }
        }
        if (haveUs) spanUs = std::max(spanUs, lastUs - firstUs);

        // The replay must end in the snapshot's final state; where the trace disagrees with it
        // (entries lost from the ring buffer's middle, inconsistent dumps), correct at the end
        // and say so.
        const int64_t tEnd = t;
        for (auto it = curAllocs.begin(); it != curAllocs.end();) {
            auto f = d.finalAllocs.find(it->first);
            if (f == d.finalAllocs.end() || f->second.size != it->second) {
                const uint64_t a = it->first, s = it->second;
                ++it;
                free(a, s, 0, tEnd);
                ++fixed;
            } else {
                ++it;
            }
        }
        for (auto it = curSegs.begin(); it != curSegs.end();) {
            auto f = d.finalSegs.find(it->first);
            if (f == d.finalSegs.end() || f->second.size != it->second) {
                Event ev = base;
                ev.type = EventType::RegionDestroy;
                ev.time = tEnd;
                ev.address = it->first;
                ing.add(ev);
                it = curSegs.erase(it);
                ++fixed;
            } else {
                ++it;
            }
        }
        for (const auto& [a, s] : d.finalSegs)
            if (!curSegs.count(a)) {
                regionCreate(a, s, tEnd);
                ++fixed;
            }
        if (pieces != d.finalMapped) {
            for (auto [a, s] : Ranges(pieces))
                unmap(a, s, tEnd);
            for (auto [a, s] : d.finalMapped)
                mapPiece(a, s, tEnd);
            ++fixed;
        }
        for (const auto& [a, al] : d.finalAllocs)
            if (!curAllocs.count(a)) {
                alloc(a, al.size, al.requested, al.stream, al.frames, tEnd);
                ++fixed;
            }
        inconsistent += d.inconsistent;
    }

    // Figures about the input, for `fragscope info` and scripts.
    JsonWriter j(false);
    j.beginObject();
    for (size_t i = 0; i < kActNames.size(); ++i)
        if (actCounts_[i]) j.field(kActNames[i], actCounts_[i]);
    for (const auto& [name, n] : unknownActs_)
        j.field(name, n);
    j.endObject();
    ing.setMeta("pytorch.trace_actions", j.str());
    ing.setMeta("pytorch.free_event",
                devices_.empty() || devices_.begin()->second.freeAct == Act::FreeCompleted
                    ? "free_completed"
                    : "free_requested");
    ing.setMeta("pytorch.preexisting_allocations", std::to_string(preexisting));
    if (spanUs >= 0) ing.setMeta("pytorch.trace_span_us", std::to_string(spanUs));
    if (derivedAddresses_)
        ing.setMeta("pytorch.block_addresses",
                    "derived from segment address and preceding block sizes (PyTorch ~2.0 format)");
    report_.counts["preexisting_allocations"] = preexisting;
    report_.counts["inconsistent_entries"] = inconsistent;
    report_.counts["end_corrections"] = fixed;

    if (ordinal_)
        warn(&ing, "the snapshot's trace has no time_us: the time axis is the entry's ordinal");
    for (const auto& [name, n] : unknownActs_)
        warn(&ing, fmt::format("{} trace entries with unknown action '{}' were skipped", n, name));
    if (inconsistent > 0)
        warn(&ing,
             fmt::format(
                 "{} trace entries disagree with the state reconstructed from the final segments "
                 "(the ring buffer may have lost entries)",
                 inconsistent));
    if (fixed > 0)
        warn(&ing,
             fmt::format(
                 "{} allocations or segments were corrected at the end so that the session's final "
                 "state equals the snapshot's",
                 fixed));
    if (nonMonotonic_ > 0)
        warn(&ing,
             fmt::format(
                 "{} trace entries went back in time; kept in trace order at the previous time",
                 nonMonotonic_));
    if (untiledSegments_ > 0)
        warn(&ing, fmt::format("{} segments' blocks do not add up to the segment size",
                               untiledSegments_));
    doc_.reset(); // the document can be large; the session now has everything
}

} // namespace

std::unique_ptr<Importer> makePytorchSnapshotImporter(const std::string& path, ImportOptions opts)
{
    return std::make_unique<PytorchSnapshotImporter>(path, std::move(opts));
}

} // namespace fs::import
