// Memory by category (categories.h): the rules, the matcher and the breakdown at an instant.
#include "categories.h"

#include "explore_impl.h"

#include "core/format.h"
#include "core/store/allocations.h"
#include "core/store/frames.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <unordered_map>

namespace fs::analysis {

namespace {

// Lower case, a backslash read as '/' (a Windows path matches the patterns' "torch/optim/").
std::string lower(std::string_view s)
{
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
        return c == '\\' ? '/' : static_cast<char>(std::tolower(c));
    });
    return out;
}

// Whether one line contains the pieces of a lower-case pattern split at '*', in order.
bool lineMatches(std::string_view line, const std::vector<std::string>& pieces)
{
    size_t at = 0;
    for (const std::string& p : pieces) {
        if (p.empty()) continue;
        const size_t f = line.find(p, at);
        if (f == std::string_view::npos) return false;
        at = f + p.size();
    }
    return true;
}

std::vector<std::string> piecesOf(std::string_view pattern)
{
    std::vector<std::string> out;
    const std::string p = lower(pattern);
    size_t from = 0;
    while (true) {
        const size_t star = p.find('*', from);
        out.push_back(p.substr(from, star == std::string::npos ? std::string::npos : star - from));
        if (star == std::string::npos) break;
        from = star + 1;
    }
    return out;
}

// text is lower case already.
bool matchesLower(const std::vector<std::string>& pieces, std::string_view text)
{
    if (std::all_of(pieces.begin(), pieces.end(), [](const std::string& p) { return p.empty(); }))
        return false; // an empty pattern (or only '*') names nothing
    size_t from = 0;
    while (from <= text.size()) {
        const size_t nl = text.find('\n', from);
        const size_t end = nl == std::string_view::npos ? text.size() : nl;
        if (lineMatches(text.substr(from, end - from), pieces)) return true;
        if (nl == std::string_view::npos) break;
        from = nl + 1;
    }
    return false;
}

struct CompiledRule
{
    std::vector<std::string> pieces;
    MemoryCategory category;
};

std::vector<CompiledRule> compile(const std::vector<CategoryRule>& userRules)
{
    std::vector<CompiledRule> out;
    for (const auto* list : {&userRules, &defaultCategoryRules()})
        for (const CategoryRule& r : *list)
            out.push_back({piecesOf(r.pattern), r.category});
    return out;
}

MemoryCategory firstMatch(const std::vector<CompiledRule>& rules, std::string_view lowerText)
{
    for (const CompiledRule& r : rules)
        if (matchesLower(r.pieces, lowerText)) return r.category;
    return MemoryCategory::Other;
}

} // namespace

const char* memoryCategoryName(MemoryCategory c)
{
    switch (c) {
    case MemoryCategory::Parameters:
        return "parameters";
    case MemoryCategory::Gradients:
        return "gradients";
    case MemoryCategory::OptimizerState:
        return "optimizer_state";
    case MemoryCategory::Activations:
        return "activations";
    case MemoryCategory::KvCache:
        return "kv_cache";
    case MemoryCategory::Workspace:
        return "workspace";
    case MemoryCategory::Other:
        return "other";
    }
    return "other";
}

bool parseMemoryCategory(std::string_view s, MemoryCategory& out)
{
    std::string n = lower(s);
    std::replace(n.begin(), n.end(), '-', '_');
    std::replace(n.begin(), n.end(), ' ', '_');
    for (int k = 0; k < kMemoryCategoryCount; ++k) {
        const auto c = static_cast<MemoryCategory>(k);
        if (n == memoryCategoryName(c)) {
            out = c;
            return true;
        }
    }
    return false;
}

const std::vector<CategoryRule>& defaultCategoryRules()
{
    using C = MemoryCategory;
    // Most specific first: a cuBLAS workspace or a KV cache is allocated inside forward, an
    // optimizer's state outside backward, and "forward" only decides what nothing else did.
    static const std::vector<CategoryRule> rules = {
        // cuBLAS / cuBLASLt / cuDNN workspaces (getCUDABlasLtWorkspace, cudnn workspace), and
        // sources that tag theirs.
        {"workspace", C::Workspace},
        // KV caches: HF transformers' cache_utils (DynamicCache, StaticCache), past_key_values,
        // vLLM's key_cache / value_cache, tags such as "attn.kv_cache".
        {"kv_cache", C::KvCache},
        {"kvcache", C::KvCache},
        {"past_key_value", C::KvCache},
        {"key_cache", C::KvCache},
        {"value_cache", C::KvCache},
        {"cache_utils.py", C::KvCache},
        // Optimizer state: anything under torch/optim/ (Adam's exp_avg, exp_avg_sq, ...).
        {"torch/optim/", C::OptimizerState},
        {"optimizer", C::OptimizerState},
        // Parameters: created, moved or loaded by nn.Module (Parameter, _apply behind .to() and
        // .cuda(), load_state_dict, reset_parameters), HF from_pretrained, weights by tag.
        {"nn/parameter.py", C::Parameters},
        {"_apply (*nn/modules/module.py", C::Parameters},
        {"to (*nn/modules/module.py", C::Parameters},
        {"cuda (*nn/modules/module.py", C::Parameters},
        {"to_empty (*nn/modules/module.py", C::Parameters},
        {"load_state_dict", C::Parameters},
        {"reset_parameters", C::Parameters},
        {"from_pretrained", C::Parameters},
        {"weights", C::Parameters},
        // Gradients: whatever the backward pass allocates (autograd's engine, backward()).
        {"backward", C::Gradients},
        {"autograd::engine", C::Gradients},
        {"evaluate_function", C::Gradients},
        {"accumulategrad", C::Gradients},
        // Activations: allocated inside a module's forward.
        {"forward", C::Activations},
        {"activation", C::Activations},
        {"hidden_states", C::Activations},
    };
    return rules;
}

bool categoryPatternMatches(std::string_view pattern, std::string_view text)
{
    return matchesLower(piecesOf(pattern), lower(text));
}

MemoryCategory categorise(std::string_view text, const std::vector<CategoryRule>& userRules)
{
    return firstMatch(compile(userRules), lower(text));
}

uint64_t CategoryBreakdown::bytesOf(MemoryCategory c) const
{
    for (const CategoryRow& r : rows)
        if (r.category == c) return r.bytes;
    return 0;
}

std::vector<MemoryCategory> categoriesOf(const ExploreContext& c,
                                         const std::vector<uint32_t>& indices,
                                         const std::vector<CategoryRule>& userRules, bool* recorded)
{
    const TrackData& td = c.td;
    const TrackAttrs& attrs = *c.attrs;
    const StackTable& stacks = *c.stacks;
    std::vector<MemoryCategory> out(indices.size(), MemoryCategory::Other);
    std::vector<int64_t> ids;
    ids.reserve(indices.size());
    for (uint32_t i : indices)
        ids.push_back(td.allocs[i].id);
    // What the session says beyond the stacks and tags: the blocks' notes, and the ranges
    // (markers with an end) open at each allocation.
    std::vector<store::AllocationNotes> notes;
    std::vector<store::MarkerRow> ranges;
    {
        std::lock_guard db(c.d.dbMutex);
        if (c.d.session) {
            const Session& s = *c.d.session;
            notes = store::allocationNotes(s, ids);
            for (store::MarkerRow& m : store::markers(s))
                if (m.endNs && *m.endNs > m.timeNs) ranges.push_back(std::move(m));
        }
    }
    notes.resize(indices.size());
    std::sort(
        ranges.begin(), ranges.end(),
        [](const store::MarkerRow& a, const store::MarkerRow& b) { return a.timeNs < b.timeNs; });
    // The blocks by allocation time, the ranges swept once: those started and not yet ended.
    std::vector<size_t> order(indices.size());
    for (size_t k = 0; k < order.size(); ++k)
        order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return td.allocs[indices[x]].allocNs < td.allocs[indices[y]].allocNs;
    });
    const std::vector<CompiledRule> rules = compile(userRules);
    std::unordered_map<std::string, MemoryCategory> memo; // one match per distinct texts
    std::vector<size_t> active;                           // ranges started, maybe ended
    size_t nextRange = 0;
    for (size_t k : order) {
        const uint32_t i = indices[k];
        const int64_t t = td.allocs[i].allocNs;
        while (nextRange < ranges.size() && ranges[nextRange].timeNs <= t)
            active.push_back(nextRange++);
        std::erase_if(active, [&](size_t r) { return *ranges[r].endNs <= t; });
        const uint32_t stack = i < attrs.stack.size() ? attrs.stack[i] : 0;
        const uint32_t tag = i < attrs.tag.size() ? attrs.tag[i] : 0;
        std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f", stack, tag, notes[k].userMetadata,
                                      notes[k].compileContext);
        std::string open;
        for (size_t r : active) {
            key += fmt::format("{},", r);
            open += ranges[r].message;
            open += '\n';
        }
        if (recorded && (stack != 0 || tag != 0 || !notes[k].userMetadata.empty() ||
                         !notes[k].compileContext.empty() || !open.empty()))
            *recorded = true;
        auto it = memo.find(key);
        if (it == memo.end()) {
            std::string text;
            if (const auto st = stacks.text.find(stack); st != stacks.text.end()) text = st->second;
            if (const auto tt = attrs.tagText.find(tag); tag != 0 && tt != attrs.tagText.end())
                text += tt->second + '\n';
            text += notes[k].userMetadata + '\n' + notes[k].compileContext + '\n' + open;
            it = memo.emplace(std::move(key), firstMatch(rules, lower(text))).first;
        }
        out[k] = it->second;
    }
    return out;
}

CategoryBreakdown Explorer::categories(uint32_t device, Level level, int64_t t,
                                       const std::vector<CategoryRule>& userRules) const
{
    const ExploreContext c = exploreContext(*engine_, data(), device, level, true);
    const TrackData& td = c.td;
    CategoryBreakdown out;
    out.device = device;
    out.level = level;
    out.time = t;
    const std::vector<uint32_t> live = c.d.liveAt(td, t, t);
    const std::vector<MemoryCategory> cats = categoriesOf(c, live, userRules, &out.stacksRecorded);
    std::array<CategoryRow, kMemoryCategoryCount> rows{};
    for (int k = 0; k < kMemoryCategoryCount; ++k)
        rows[static_cast<size_t>(k)].category = static_cast<MemoryCategory>(k);
    for (size_t k = 0; k < live.size(); ++k) {
        const uint64_t size = td.allocs[live[k]].size;
        CategoryRow& row = rows[static_cast<size_t>(cats[k])];
        row.bytes += size;
        ++row.blocks;
        out.totalBytes += size;
        ++out.blocks;
    }
    out.rows.assign(rows.begin(), rows.end());
    std::stable_sort(out.rows.begin(), out.rows.end(),
                     [](const CategoryRow& x, const CategoryRow& y) { return x.bytes > y.bytes; });
    return out;
}

int64_t allocatedPeakTime(const Engine& e, uint32_t device, Level level)
{
    const SummaryFigures f = e.trackSummary(device, level).figures;
    if (f.peakAllocatedAtNs != kNoTime && f.peakAllocatedBytes > 0) return f.peakAllocatedAtNs;
    if (f.peakAllocatedOutsideBytes > 0) return f.peakAllocatedOutsideAtNs;
    return kNoTime;
}

CategoryBreakdown categoriesAt(const Engine& e, uint32_t device, Level level, int64_t t,
                               const std::vector<CategoryRule>& userRules)
{
    // A non-owning handle: the explorer lives only for this call.
    const Explorer x(std::shared_ptr<const Engine>(std::shared_ptr<const Engine>(), &e));
    return x.categories(device, level, t, userRules);
}

std::string categoryLine(const CategoryBreakdown& b)
{
    if (b.totalBytes == 0) return "nothing allocated";
    std::string out;
    for (const CategoryRow& r : b.rows) {
        if (r.bytes == 0) continue;
        if (!out.empty()) out += ", ";
        out +=
            fmt::format("{} {} ({:.0f}%)", memoryCategoryName(r.category), humanBytes(r.bytes),
                        100.0 * static_cast<double>(r.bytes) / static_cast<double>(b.totalBytes));
    }
    return out;
}

} // namespace fs::analysis
