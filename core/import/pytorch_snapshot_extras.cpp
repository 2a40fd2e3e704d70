// PyTorch snapshots, the parts beyond segments and the trace's allocations: expandable segment
// reservations, external_annotations (frames, ranges, metrics), allocator_settings as JSON, and
// user_metadata/compile_context strings (docs/importers.md, "PyTorch allocator snapshots").
#include "pytorch_snapshot.h"

#include "core/json.h"

#include <algorithm>
#include <cmath>

namespace fs::import::snapshot {

std::string jsonQuote(std::string_view s)
{
    return '"' + JsonWriter::escape(s) + '"';
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
        return "null";
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
