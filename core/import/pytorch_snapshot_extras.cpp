// PyTorch snapshots, the parts beyond segments and the trace's allocations: expandable segment
// reservations, external_annotations (frames, ranges, metrics), allocator_settings as JSON, and
// user_metadata/compile_context strings (docs/importers.md, "PyTorch allocator snapshots").
#include "pytorch_snapshot.h"

#include "core/json.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace fs::import::snapshot {

std::string jsonQuote(std::string_view s)
{
    return '"' + JsonWriter::escape(s) + '"';
}

std::string modelFrame(std::string_view trace)
{
    const size_t at = trace.rfind("File \"");
    if (at != std::string_view::npos) {
        const std::string_view rest = trace.substr(at + 6);
        const size_t q = rest.find("\", line ");
        if (q != std::string_view::npos) {
            const std::string_view file = rest.substr(0, q);
            std::string_view tail = rest.substr(q + 8);
            size_t n = 0;
            while (n < tail.size() && tail[n] >= '0' && tail[n] <= '9')
                ++n;
            const std::string_view line = tail.substr(0, n);
            tail = tail.substr(n);
            std::string_view name;
            if (tail.starts_with(", in ")) {
                name = tail.substr(5);
                name = name.substr(0, name.find_first_of("\r\n"));
            }
            if (!line.empty())
                return fmt::format("{} ({}:{})", name.empty() ? "<model>" : name, file, line);
        }
    }
    // No traceback line: its last non-empty line, trimmed.
    std::string_view s = trace;
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    const size_t nl = s.find_last_of('\n');
    if (nl != std::string_view::npos) s = s.substr(nl + 1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    return std::string(s);
}

void PytorchSnapshotImporter::findClusters(DeviceState& d, uint32_t device)
{
    // Expandable memory is split into reservations: ranges that overlap or touch belong to one;
    // a gap holding an ordinary segment, a change of stream, or final segments of another pool
    // or segment type (small/large) separate two (PyTorch reserves one address range per stream,
    // pool and size class for its expandable segments).
    auto& R = d.expRanges;
    if (R.empty()) return;
    std::sort(R.begin(), R.end());
    std::sort(d.fixedSegs.begin(), d.fixedSegs.end());
    auto fixedBetween = [&](uint64_t lo, uint64_t hi) {
        auto it = std::lower_bound(d.fixedSegs.begin(), d.fixedSegs.end(), lo);
        return it != d.fixedSegs.end() && *it < hi;
    };
    // The final segment inside [lo, hi), if any: its pool and type.
    auto finalIn = [&](uint64_t lo, uint64_t hi) -> const SegInfo* {
        auto it = expInfo_.lower_bound({device, lo});
        return it != expInfo_.end() && it->first.first == device && it->first.second < hi
                   ? &it->second
                   : nullptr;
    };
    Cluster cur{std::get<0>(R[0]), std::get<1>(R[0]), std::get<2>(R[0]), 0, {}};
    const SegInfo* curInfo = finalIn(cur.lo, cur.hi);
    for (size_t i = 1; i <= R.size(); ++i) {
        const bool last = i == R.size();
        if (!last) {
            const auto [lo, hi, stream] = R[i];
            const SegInfo* info = finalIn(lo, hi);
            const bool sameKind =
                !info || !curInfo || (info->pool == curInfo->pool && info->type == curInfo->type);
            if (lo <= cur.hi || (stream == cur.stream && sameKind && !fixedBetween(cur.hi, lo))) {
                cur.hi = std::max(cur.hi, hi);
                if (!curInfo) curInfo = info;
                continue;
            }
        }
        if (curInfo) {
            cur.pool = curInfo->pool;
            cur.type = curInfo->type;
        }
        d.clusters.push_back(cur);
        if (!last) {
            cur = Cluster{std::get<0>(R[i]), std::get<1>(R[i]), std::get<2>(R[i]), 0, {}};
            curInfo = finalIn(cur.lo, cur.hi);
        }
    }
    R.clear();
    R.shrink_to_fit();
}

void PytorchSnapshotImporter::decodeAnnotations(PValue list)
{
    // torch.profiler.record_function ranges kept by _record_memory_history: {stage: START|END,
    // name, device, time_us}.
    doc_->forEach(list, [&](PValue a) {
        if (a.type() != PType::Dict) return;
        Annotation x;
        bool haveTime = false, haveStage = false;
        doc_->forEachItem(a, [&](PValue k, PValue v) {
            const std::string_view key = doc_->str(k);
            if (key == "stage") {
                x.start = doc_->str(v) == "START";
                haveStage = x.start || doc_->str(v) == "END";
            } else if (key == "name") {
                x.name = std::string(doc_->str(v));
            } else if (key == "device") {
                uint64_t dv = 0;
                if (doc_->toU64(v, dv)) x.device = static_cast<uint32_t>(dv);
            } else if (key == "time_us") {
                int64_t t = 0;
                if (doc_->toI64(v, t) && t > -(int64_t{1} << 52) && t < (int64_t{1} << 52)) {
                    x.time = t * 1000;
                    haveTime = true;
                }
            }
        });
        if (haveTime && haveStage && !x.name.empty())
            annotations_.push_back(std::move(x));
        else
            ++badAnnotations_;
    });
}

void PytorchSnapshotImporter::decodeHistorySettings(PValue root, PValue settings)
{
    // trace_alloc_overflowed (the ring buffer wrapped: older entries were overwritten) and
    // trace_alloc_max_entries (its size), in allocator_settings or at the top level; one value
    // for every device, or a list with one per device.
    auto apply = [&](PValue dict) {
        if (dict.type() != PType::Dict) return;
        auto each = [&](std::string_view key, auto&& set) {
            const PValue v = doc_->get(dict, key);
            if (!v.valid() || v.type() == PType::None) return;
            if (v.type() == PType::List || v.type() == PType::Tuple) {
                uint32_t dev = 0;
                doc_->forEach(v, [&](PValue x) {
                    if (auto it = devices_.find(dev++); it != devices_.end()) set(it->second, x);
                });
            } else {
                for (auto& [dev, d] : devices_)
                    if (dev != kHostDevice) set(d, v);
            }
        };
        each("trace_alloc_overflowed", [&](DeviceState& d, PValue x) {
            int64_t b = 0;
            if (x.type() == PType::Bool || doc_->toI64(x, b))
                d.overflowed = (x.type() == PType::Bool ? x.payload() != 0 : b != 0) ? 1 : 0;
        });
        each("trace_alloc_max_entries", [&](DeviceState& d, PValue x) {
            int64_t n = 0;
            if (doc_->toI64(x, n) && n > 0) d.maxEntries = n;
        });
    };
    apply(root);
    apply(settings);
}

std::string
PytorchSnapshotImporter::historyMeta(const std::map<uint32_t, std::vector<uint64_t>>& ghosts,
                                     const std::map<uint32_t, int64_t>& ghostAt) const
{
    // One line per device (docs/importers.md "History"): read by core/analysis/history.h.
    std::string out;
    for (const auto& [dev, d] : devices_) {
        const int64_t entries = static_cast<int64_t>(d.trace.size());
        const bool truncated =
            d.overflowed == 1 || (d.overflowed < 0 && d.maxEntries > 0 && entries >= d.maxEntries);
        const auto g = ghosts.find(dev);
        const auto t = ghostAt.find(dev);
        out += fmt::format("device={} truncated={} max_entries={} entries={} ghost_blocks={} "
                           "ghost_ns={}",
                           dev, truncated ? 1 : 0, d.maxEntries, entries,
                           g == ghosts.end() ? 0 : g->second.size(),
                           t == ghostAt.end() ? 0 : t->second);
        if (g != ghosts.end() && !g->second.empty()) {
            out += " ghosts=";
            for (size_t i = 0; i < g->second.size(); ++i)
                out += fmt::format("{}{:x}", i ? "," : "", g->second[i]);
        }
        out += '\n';
    }
    return out;
}

std::string PytorchSnapshotImporter::toJson(PValue v) const
{
    int64_t budget = 100000;
    return toJson(v, 0, budget);
}

std::string PytorchSnapshotImporter::toJson(PValue v, int depth, int64_t& budget) const
{
    if (depth > 32 || --budget < 0) return "null";
    switch (v.type()) {
    case PType::None:
        return "null";
    case PType::Bool:
        return v.payload() ? "true" : "false";
    case PType::Int:
    case PType::BigInt: {
        int64_t i = 0;
        uint64_t u = 0;
        if (doc_->toI64(v, i)) return std::to_string(i);
        if (doc_->toU64(v, u)) return std::to_string(u);
        return doc_->decimal(v); // an integer wider than 64 bits (LONG1/LONG4), exactly
    }
    case PType::Float: {
        double x = 0;
        doc_->toDouble(v, x);
        return std::isfinite(x) ? fmt::format("{}", x) : "null";
    }
    case PType::Str:
    case PType::Bytes:
        return jsonQuote(doc_->str(v));
    case PType::Dict: {
        std::string out = "{";
        bool first = true;
        doc_->forEachItem(v, [&](PValue k, PValue x) {
            if (!first) out += ", ";
            first = false;
            out += k.type() == PType::Str ? jsonQuote(doc_->str(k))
                                          : jsonQuote(toJson(k, depth + 1, budget));
            out += ": ";
            out += toJson(x, depth + 1, budget);
        });
        return out + "}";
    }
    default: {
        if (!doc_->isContainer(v)) return "null";
        std::string out = "[";
        bool first = true;
        doc_->forEach(v, [&](PValue x) {
            if (!first) out += ", ";
            first = false;
            out += toJson(x, depth + 1, budget);
        });
        return out + "]";
    }
    }
}

StringId PytorchSnapshotImporter::noteString(PValue v, Ingest& ing)
{
    if (!v.valid() || v.type() == PType::None) return kNoString;
    // Cached per decoded value (type and payload), so that one container shared by many
    // allocations (a memo reference) is converted once.
    const uint64_t key = v.payload() | (static_cast<uint64_t>(v.type()) << 60);
    auto it = noteCache_.find(key);
    if (it != noteCache_.end()) return it->second;
    StringId id = kNoString;
    if (v.type() == PType::Str || v.type() == PType::Bytes)
        id = doc_->str(v).empty() ? kNoString : ing.intern(doc_->str(v));
    else
        id = ing.intern(toJson(v));
    noteCache_.emplace(key, id);
    return id;
}

void PytorchSnapshotImporter::emitAnnotations(Ingest& ing)
{
    if (annotations_.empty()) return;
    if (ordinal_) {
        warn(&ing, fmt::format("{} external annotations were skipped: the trace has no time_us to "
                               "place them on",
                               annotations_.size()));
        return;
    }
    // START/END pairs (innermost first, per device and name) become ranges, so that a
    // record_function("frame N") range is frame N and others are named ranges on the timeline;
    // a START that never ends is a mark (a frame mark lasts until the next frame starts).
    std::stable_sort(annotations_.begin(), annotations_.end(),
                     [](const Annotation& a, const Annotation& b) { return a.time < b.time; });
    std::map<std::pair<uint32_t, std::string>, std::vector<size_t>> open;
    std::vector<int64_t> ends(annotations_.size(), kNoTime);
    int64_t unmatched = 0;
    for (size_t i = 0; i < annotations_.size(); ++i) {
        const Annotation& a = annotations_[i];
        auto& stack = open[{a.device, a.name}];
        if (a.start) {
            stack.push_back(i);
        } else if (!stack.empty()) {
            ends[stack.back()] = a.time;
            stack.pop_back();
        } else {
            ++unmatched;
        }
    }
    for (size_t i = 0; i < annotations_.size(); ++i) {
        const Annotation& a = annotations_[i];
        if (!a.start) continue;
        Event e;
        e.device = a.device;
        e.time = a.time;
        e.name = ing.intern(a.name);
        e.type = ends[i] == kNoTime ? EventType::Mark : EventType::Range;
        if (ends[i] != kNoTime) e.endTime = ends[i];
        ing.add(e);
    }
    report_.counts["annotations"] = static_cast<int64_t>(annotations_.size());
    if (unmatched + badAnnotations_ > 0)
        warn(&ing,
             fmt::format("{} external annotations had no START, or no name, stage or time_us, "
                         "and were skipped",
                         unmatched + badAnnotations_));
}

} // namespace fs::import::snapshot
