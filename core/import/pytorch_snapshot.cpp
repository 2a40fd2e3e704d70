// PyTorch caching-allocator snapshots (torch.cuda.memory._dump_snapshot): segments -> regions,
// blocks -> framework allocations, device_traces -> events. The trace is a ring buffer that may
// start long after the segments were created, so the state at its first entry is reconstructed
// by undoing the trace backwards from the final segments/blocks; the forward replay then ends in
// exactly the snapshot's final state (docs/importers.md, "PyTorch snapshots").
#include "pytorch_snapshot.h"

#include "core/alloc/caching_allocator.h"
#include "core/alloc/config.h"
#include "core/mapped_pieces.h"

#include "core/json.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <regex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace fs::import::snapshot {

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
    if (root.type() == PType::Dict) {
        const PValue settings = doc_->get(root, "allocator_settings");
        if (settings.type() == PType::Dict) allocatorSettings_ = toJson(settings);
        const PValue ann = doc_->get(root, "external_annotations");
        if (ann.type() == PType::List) decodeAnnotations(ann);
        // Pinned host memory (newer PyTorch): segments and trace of the host allocator, on a
        // device of their own.
        const PValue hostSegs = doc_->get(root, "host_segments");
        if (hostSegs.type() == PType::List) decodeSegments(hostSegs, true);
    }
    if (traces.valid() && traces.type() != PType::None) {
        if (traces.type() != PType::List)
            bad("'device_traces' should be a list (one list per device)");
        uint32_t dev = 0;
        doc_->forEach(traces, [&](PValue t) { decodeTrace(dev++, t); });
    }
    if (root.type() == PType::Dict) {
        const PValue hostTraces = doc_->get(root, "host_traces");
        if (hostTraces.type() == PType::List) {
            // One list of entries, or one list per host allocator: all on the host device.
            const bool nested =
                doc_->size(hostTraces) > 0 && doc_->at(hostTraces, 0).type() == PType::List;
            if (nested)
                doc_->forEach(hostTraces, [&](PValue t) { decodeTrace(kHostDevice, t); });
            else
                decodeTrace(kHostDevice, hostTraces);
        }
        decodeHistorySettings(root, doc_->get(root, "allocator_settings"));
    }
    // torch.profiler's ProfilerStep#N ranges are the steps when no range is a "frame N".
    {
        const std::regex framePat(IngestOptions{}.framePattern,
                                  std::regex::ECMAScript | std::regex::icase);
        bool frames = false, steps = false;
        for (const Annotation& a : annotations_) {
            frames |= std::regex_search(a.name, framePat);
            steps |= a.name.starts_with("ProfilerStep#");
        }
        stepFrames_ = steps && !frames;
    }
    // time_us x 1000 when any entry has it, else the entry's ordinal.
    ordinal_ = !anyTime_;
    for (auto& [id, d] : devices_) {
        reconstruct(id, d);
        findClusters(d, id);
    }
    for (size_t i = 0; i < kActNames.size(); ++i)
        if (actCounts_[i]) report_.counts["trace." + std::string(kActNames[i])] = actCounts_[i];
}

void PytorchSnapshotImporter::decodeSegments(PValue segs, bool host)
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
            if (key == "device") {
                if (!host) device = static_cast<uint32_t>(u64(v, "device"));
            } else if (key == "address")
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
        if (host) device = kHostDevice;
        DeviceState& d = devices_[device];
        if (info.expandable) {
            // One snapshot segment per contiguous mapped range of an expandable segment.
            addRange(d.finalMapped, addr, info.size);
            d.expRanges.emplace_back(addr, addr + info.size, info.stream);
            expInfo_[{device, addr}] = info;
        } else {
            d.finalSegs[addr] = info;
            d.fixedSegs.push_back(addr);
        }
        uint64_t cursor = addr;
        doc_->forEach(blocks, [&](PValue b) {
            if (b.type() != PType::Dict) bad("a block should be a dict");
            AllocInfo a;
            a.stream = info.stream;
            a.fromFinal = true;
            uint64_t baddr = cursor;
            bool active = false, pending = false;
            PValue history;
            doc_->forEachItem(b, [&](PValue k, PValue v) {
                const std::string_view key = doc_->str(k);
                if (key == "address")
                    baddr = u64(v, "block address");
                else if (key == "size")
                    a.size = u64(v, "block size");
                else if (key == "requested_size")
                    a.requested = u64(v, "requested_size");
                else if (key == "state") {
                    // active_allocated is allocated; active_pending_free (freed, waiting on a
                    // stream event; active_awaiting_free in PyTorch's documentation and newer
                    // dumps) and inactive are free, as PyTorch's accounting counts them.
                    const std::string_view st = doc_->str(v);
                    active = st == "active_allocated";
                    pending = st.starts_with("active") && !active;
                } else if (key == "frames")
                    a.frames = v;
                else if (key == "history")
                    history = v;
            });
            if (doc_->get(b, "address").valid() == false)
                derivedAddresses_ =
                    true; // ~2.0 format: address = segment address + sizes before it
            if (history.type() == PType::List && doc_->size(history) > 0) {
                // ~2.0 format: the block's first history entry is its allocation (as
                // torch.cuda._memory_viz reads it): frames and real_size.
                const PValue h0 = doc_->at(history, 0);
                if (!a.frames.valid()) a.frames = doc_->get(h0, "frames");
                uint64_t real = 0;
                if (a.requested == 0 && doc_->toU64(doc_->get(h0, "real_size"), real))
                    a.requested = real;
            }
            if (active) d.finalAllocs[baddr] = a;
            if (pending) d.finalPending[baddr] = PendingInfo{a.size, a.stream, 0};
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
    PValue action;
    doc_->forEachKeyed(ev, [&](int key, PValue v) {
        switch (key) {
        case kAction:
            action = v;
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
        case kUserMetadata:
            e.userMetadata = v;
            break;
        case kCompileContext:
            e.compileContext = v;
            break;
        case kName:
            e.name = v;
            break;
        case kStage:
            e.stage = v;
            break;
        case kPoolId:
            if (doc_->size(v) == 2) {
                uint64_t a = 0, b = 0;
                doc_->toU64(doc_->at(v, 0), a);
                doc_->toU64(doc_->at(v, 1), b);
                e.pool = (a << 32) | (b & 0xffffffffu);
                e.hasPool = true;
            }
            break;
        default:
            break;
        }
    });
    // The action strings are memo references shared by all entries: one comparison per distinct
    // string, remembered by the string's value (a small direct-mapped cache).
    ActSlot& slot = actCache_[action.payload() % actCache_.size()];
    if (!slot.valid || !(slot.key == action)) {
        slot = {action, actOf(doc_->str(action)), true};
    }
    e.act = slot.act;
    return e;
}

void PytorchSnapshotImporter::decodeTrace(uint32_t device, PValue list)
{
    if (list.type() != PType::List) bad(fmt::format("device_traces[{}] should be a list", device));
    if (doc_->size(list) == 0) return; // adds no device (its segments, if any, already did)
    DeviceState& d = devices_[device];
    d.trace.reserve(doc_->size(list));
    std::unordered_map<uint64_t, bool> requested; // address -> its free was requested
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
        if (e.act == Act::Annotate) {
            // An annotation recorded into the trace: its name (else its user_metadata text),
            // stage START/END when given (a range), else a mark.
            Annotation x;
            x.device = device;
            x.time = e.time * 1000;
            const std::string_view stage =
                e.stage.type() == PType::Str ? doc_->str(e.stage) : std::string_view{};
            x.start = stage != "END";
            if (e.name.type() == PType::Str)
                x.name = std::string(doc_->str(e.name));
            else if (e.userMetadata.type() == PType::Str)
                x.name = std::string(doc_->str(e.userMetadata));
            else if (e.userMetadata.valid() && e.userMetadata.type() != PType::None)
                x.name = toJson(e.userMetadata);
            if (e.hasTime && !x.name.empty())
                annotations_.push_back(std::move(x));
            else
                ++badAnnotations_;
        }
        d.hasCompleted |= e.act == Act::FreeCompleted;
        d.hasRequested |= e.act == Act::FreeRequested;
        if (e.act == Act::SegmentMap || e.act == Act::SegmentUnmap)
            d.expRanges.emplace_back(e.addr, e.addr + e.size, e.stream);
        else if (e.act == Act::SegmentAlloc || e.act == Act::SegmentFree)
            d.fixedSegs.push_back(e.addr);
        // A free_completed whose free_requested is missing although its block was allocated in
        // the trace (an entry lost from the buffer) frees the block itself; one whose block
        // predates the trace ends a wait that began before it. (Used when the trace records
        // free_requested at all.)
        if (e.act == Act::Alloc) {
            requested[e.addr] = false;
        } else if (e.act == Act::FreeRequested) {
            requested[e.addr] = true;
        } else if (e.act == Act::FreeCompleted) {
            auto it = requested.find(e.addr);
            if (it != requested.end()) {
                if (!it->second) d.completedFrees.insert(d.trace.size());
                requested.erase(it);
            }
        }
        d.trace.push_back(ev);
    });
}

void PytorchSnapshotImporter::reconstruct(uint32_t, DeviceState& d)
{
    // Which action frees a block: free_requested where the trace records it, since PyTorch counts
    // a block whose free waits on other streams (active_pending_free) as free; the wait until
    // free_completed is kept apart (pending_frees). Older traces have only one free action.
    const bool hasRequested = d.hasRequested;
    d.freeAct = hasRequested ? Act::FreeRequested : Act::FreeCompleted;

    if (d.freeAct != Act::FreeRequested) d.completedFrees.clear();
    auto segs = d.finalSegs;
    auto allocs = d.finalAllocs;
    auto pending = d.finalPending;
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
        } else if (e.act == d.freeAct || d.completedFrees.count(i)) {
            if (allocs.count(e.addr)) ++d.inconsistent;
            AllocInfo a;
            a.size = e.size;
            a.stream = e.stream;
            allocs[e.addr] = a; // allocated before the trace began: its stack is unknown
            pending.erase(e.addr);
        } else if (e.act == Act::FreeCompleted && d.freeAct == Act::FreeRequested) {
            pending[e.addr] = PendingInfo{e.size, e.stream, 0}; // its wait began earlier
        } else if (e.act == Act::SegmentAlloc) {
            if (!segs.erase(e.addr)) ++d.inconsistent;
        } else if (e.act == Act::SegmentFree) {
            SegInfo s;
            s.size = e.size;
            s.stream = e.stream;
            s.type =
                e.size <= (2u << 20) ? "small" : "large"; // inferred: small-pool segments are 2 MiB
            s.pool = e.pool; // pool_id of the entry (newer PyTorch), else the default pool
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
    d.initPending = std::move(pending);
}

std::pair<StringId, StringId> PytorchSnapshotImporter::frameString(PValue frame, Ingest& ing)
{
    auto it = frameCache_.find(frame.payload());
    if (it != frameCache_.end()) return it->second;
    std::string_view name, file, fxOp, fxName, fxTarget, fxTrace;
    int64_t line = 0;
    doc_->forEachItem(frame, [&](PValue k, PValue v) {
        const std::string_view key = doc_->str(k);
        auto text = [&] { return v.type() == PType::Str ? doc_->str(v) : std::string_view{}; };
        if (key == "name")
            name = doc_->str(v);
        else if (key == "filename")
            file = doc_->str(v);
        else if (key == "line")
            doc_->toI64(v, line);
        else if (key == "fx_node_op")
            fxOp = text();
        else if (key == "fx_node_name")
            fxName = text();
        else if (key == "fx_node_target")
            fxTarget = text();
        else if (key == "fx_original_trace")
            fxTrace = text();
    });
    std::string text(name);
    // A frame of FX-generated code (torch.compile): the graph node it runs, as memory_viz shows.
    std::string fx;
    for (auto [k, v] : {std::pair{"node", fxName}, {"op", fxOp}, {"target", fxTarget}})
        if (!v.empty()) fx += fmt::format("{}{}={}", fx.empty() ? "" : ", ", k, v);
    if (!fx.empty()) text += " [fx " + fx + "]";
    if (!file.empty() && file != "??")
        text += line > 0 ? fmt::format(" ({}:{})", file, line) : fmt::format(" ({})", file);
    const StringId id = ing.intern(text);
    StringId model = kNoString;
    if (!fxTrace.empty()) model = ing.intern(modelFrame(fxTrace));
    frameCache_.emplace(frame.payload(), std::pair{id, model});
    return {id, model};
}

StackId PytorchSnapshotImporter::stackOf(PValue frames, Ingest& ing)
{
    if (frames.type() != PType::List || doc_->size(frames) == 0) return kNoStack;
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
        if (f.type() != PType::Dict) return;
        const auto [id, model] = frameString(f, ing);
        if (model != kNoString) ids.push_back(model); // the model's line before the FX code
        ids.push_back(id);
    });
    const StackId id = ids.empty() ? kNoStack : ing.internStack(ids);
    stackCache_.emplace(stackKey_, id);
    return id;
}

void PytorchSnapshotImporter::emit(Ingest& ing)
{
    const StringId expandableName = ing.intern("expandable");
    for (auto& [dev, d] : devices_) {
        DeviceInfo info;
        info.id = dev;
        info.name = dev == kHostDevice ? std::string("host (pinned)") : fmt::format("cuda:{}", dev);
        ing.addDevice(info);
    }
    int64_t inconsistent = 0, fixed = 0, preexisting = 0, pendingCount = 0;
    int64_t spanUs = -1;
    // Blocks alive before each trace's first entry (memory_viz's "ghost blocks"): addresses.
    std::map<uint32_t, std::vector<uint64_t>> ghosts;
    std::map<uint32_t, int64_t> ghostAt;
    // Time of each trace's first entry; the reconstructed state is placed there (a device
    // without a timed trace: the earliest of the others, so that all share one clock).
    std::map<uint32_t, int64_t> firstTime;
    int64_t earliest = 0;
    if (!ordinal_) {
        bool any = false;
        for (auto& [dev, d] : devices_)
            for (PValue ev : d.trace) {
                const Entry e = decode(ev, dev);
                if (!e.hasTime) continue;
                firstTime[dev] = e.time * 1000;
                earliest = any ? std::min(earliest, e.time * 1000) : e.time * 1000;
                any = true;
                break;
            }
    }
    // The recorded allocator settings, for the block sizes of allocations freed before the end
    // (blockSize below); PyTorch's defaults when the snapshot has none or they are unreadable
    // (the what-if says which it used).
    alloc::Config allocCfg;
    if (!allocatorSettings_.empty()) {
        try {
            allocCfg = alloc::Config::fromSnapshotSettings(allocatorSettings_);
        } catch (const std::invalid_argument&) {
        }
    }
    for (auto& [dev, d] : devices_) {
        const auto ft = firstTime.find(dev);
        const int64_t t0 = ft != firstTime.end() ? ft->second : earliest;
        Event base;
        base.device = dev;
        base.level = Level::Framework;
        base.time = t0;
        std::map<uint64_t, uint64_t> curSegs;   // addr -> size, mirrors what ingest was told
        std::map<uint64_t, uint64_t> curAllocs; // addr -> size
        // Allocations whose block is larger than the trace's size: addr -> the trace's size.
        std::map<uint64_t, uint64_t> widened;
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
        for (const Cluster& c : d.clusters) {
            // One reservation per expandable segment; which parts are backed is told by
            // RegionMap/RegionUnmap (region_mappings).
            Event e = base;
            e.type = EventType::RegionCreate;
            e.address = c.lo;
            e.size = c.hi - c.lo;
            e.stream = c.stream;
            e.aux = c.pool;
            e.regionKind = RegionKind::Vmm;
            e.name = c.type.empty() ? expandableName : ing.intern(c.type);
            e.flags = 1;
            ing.add(e);
        }
        // segment_map / segment_unmap go to ingest as PyTorch reports them (page runs); ingest
        // keeps each reservation's mapped pieces maximal, and so does this mirror of them (per
        // reservation, for the check of the final state against the snapshot's segments).
        std::map<uint64_t, MappedPieces<char>> mirror; // reservation start -> its pieces
        auto clusterOf = [&](uint64_t a) -> const Cluster* {
            auto it = std::upper_bound(d.clusters.begin(), d.clusters.end(), a,
                                       [](uint64_t v, const Cluster& c) { return v < c.lo; });
            if (it == d.clusters.begin()) return nullptr;
            --it;
            return a < it->hi ? &*it : nullptr;
        };
        auto mapping = [&](EventType type, uint64_t a, uint64_t s, int64_t t) {
            if (s == 0) return;
            Event e = base;
            e.type = type;
            e.time = t;
            e.address = a;
            e.size = s;
            ing.add(e);
            const Cluster* c = clusterOf(a);
            if (!c) return; // ingest records the anomaly
            auto ended = [](uint64_t, const auto&) {};
            auto started = [](uint64_t, uint64_t) { return char{}; };
            if (type == EventType::RegionMap)
                mirror[c->lo].map(a, s, ended, started);
            else
                mirror[c->lo].unmap(a, s, ended, started);
        };
        auto mapPiece = [&](uint64_t a, uint64_t s, int64_t t) {
            mapping(EventType::RegionMap, a, s, t);
        };
        auto unmap = [&](uint64_t a, uint64_t s, int64_t t) {
            mapping(EventType::RegionUnmap, a, s, t);
        };
        auto alloc = [&](uint64_t a, uint64_t size, uint64_t req, uint32_t stream, PValue frames,
                         int64_t t, PValue userMeta = {}, PValue compileCtx = {}) {
            Event e = base;
            e.type = EventType::Alloc;
            e.time = t;
            e.address = a;
            e.size = size;
            e.requestedSize = req;
            e.stream = stream;
            e.aux = stackOf(frames, ing).value;
            e.aux2 = noteString(userMeta, ing).value |
                     (static_cast<uint64_t>(noteString(compileCtx, ing).value) << 32);
            ing.add(e);
            curAllocs[a] = size;
        };
        std::map<uint64_t, PendingInfo> pendingNow = d.initPending;
        for (auto& [a, p] : pendingNow)
            p.since = t0;
        auto pendingDone = [&](uint64_t a, const PendingInfo& p, int64_t t) {
            Event e = base;
            e.type = EventType::PendingFree;
            e.time = p.since;
            e.endTime = t;
            e.address = a;
            e.size = p.size;
            e.stream = p.stream;
            ing.add(e);
        };
        auto free = [&](uint64_t a, uint64_t size, uint32_t stream, int64_t t) {
            if (auto w = widened.find(a); w != widened.end()) {
                if (w->second == size) size = curAllocs[a]; // the block, as allocated
                widened.erase(w);
            }
            Event e = base;
            e.type = EventType::Free;
            e.time = t;
            e.address = a;
            e.size = size;
            e.stream = stream;
            ing.add(e);
            curAllocs.erase(a);
        };

        // The block PyTorch handed out for a request of `orig` bytes at `a`, which its
        // allocated_bytes counts (the trace records only the request): the request rounded
        // (round_size), or the whole free block it came from when too little would remain to
        // split off (should_split). That free block starts at `a` and reaches the next block in
        // use (allocated or waiting on streams) or the segment's end, as free neighbours are
        // always merged. Expandable segments, and layouts the trace contradicts, keep `orig`.
        auto blockSize = [&](uint64_t a, uint64_t orig) -> uint64_t {
            auto seg = curSegs.upper_bound(a);
            if (seg == curSegs.begin()) return orig;
            --seg;
            uint64_t end = seg->first + seg->second;
            if (a >= end) return orig;
            if (auto n = curAllocs.upper_bound(a); n != curAllocs.end())
                end = std::min(end, n->first);
            if (auto n = pendingNow.upper_bound(a); n != pendingNow.end())
                end = std::min(end, n->first);
            using CA = alloc::CachingAllocator;
            const uint64_t rounded = CA::roundSize(orig, allocCfg), room = end - a;
            if (room < rounded) return orig;
            return CA::splits(room, rounded, CA::smallPool(rounded), allocCfg) ? rounded : room;
        };

        for (const auto& [a, s] : d.initSegs)
            regionCreate(a, s, t0);
        for (const auto& [a, s] : d.initMapped)
            mapPiece(a, s, t0);
        for (const auto& [a, al] : d.initAllocs) {
            alloc(a, al.size, al.requested, al.stream, al.frames, t0);
            ghosts[dev].push_back(a);
            ++preexisting;
        }
        ghostAt[dev] = t0;

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
                } else {
                    e.extra = e.size; // the request (orig_size)
                    e.size = blockSize(e.addr, e.size);
                    if (e.size != e.extra) widened[e.addr] = e.extra;
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
                alloc(e.addr, e.size, e.extra, e.stream, e.frames, t, e.userMetadata,
                      e.compileContext);
                break;
            case Act::FreeRequested:
                if (d.freeAct == Act::FreeRequested) {
                    auto c = curAllocs.find(e.addr);
                    pendingNow[e.addr] =
                        PendingInfo{c != curAllocs.end() ? c->second : e.size, e.stream, t, i};
                    free(e.addr, e.size, e.stream, t);
                }
                break;
            case Act::FreeCompleted:
                if (d.freeAct == Act::FreeCompleted || d.completedFrees.count(i)) {
                    free(e.addr, e.size, e.stream, t);
                } else if (auto p = pendingNow.find(e.addr); p != pendingNow.end()) {
                    // Completed by the very next entry: no other event saw it wait (the usual
                    // case: nothing else used the block), so there is no wait to keep.
                    if (p->second.entry == ~size_t{0} || p->second.entry + 1 != i)
                        pendingDone(p->first, p->second, t);
                    pendingNow.erase(p);
                }
                break;
            case Act::SegmentAlloc: {
                auto fit = d.finalSegs.find(e.addr);
                SegInfo s = fit != d.finalSegs.end() && fit->second.size == e.size ? fit->second
                                                                                   : SegInfo{};
                if (s.size == 0) {
                    s.size = e.size;
                    s.stream = e.stream;
                    s.type = e.size <= (2u << 20) ? "small" : "large";
                    s.pool = e.pool; // the entry's pool_id (newer PyTorch), else the default
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
        // Expandable mapped ranges as ingest knows them (maximal, as PyTorch's snapshot reports
        // one segment per contiguous mapped range).
        Ranges pieces;
        for (const auto& [lo, m] : mirror)
            for (const auto& [a, p] : m.pieces())
                pieces[a] = p.size;
        if (pieces != d.finalMapped) {
            for (auto [a, s] : pieces)
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
        for (const auto& [a, p] : pendingNow) // still waiting when the snapshot was taken
            pendingDone(a, p, kNoTime);
        pendingCount += static_cast<int64_t>(pendingNow.size());
        inconsistent += d.inconsistent;
    }
    emitAnnotations(ing);
    if (!allocatorSettings_.empty()) ing.setMeta("allocator_settings", allocatorSettings_);
    if (pendingCount > 0) ing.setMeta("pytorch.pending_free_at_end", std::to_string(pendingCount));

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
    ing.setMeta("pytorch.history", historyMeta(ghosts, ghostAt));
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

} // namespace fs::import::snapshot

namespace fs::import {

std::unique_ptr<Importer> makePytorchSnapshotImporter(const std::string& path, ImportOptions opts)
{
    return std::make_unique<snapshot::PytorchSnapshotImporter>(path, std::move(opts));
}

} // namespace fs::import
