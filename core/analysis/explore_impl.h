// Internal to fragscope_analysis: what an Explorer reads once and keeps (explore.h).
#pragma once

#include "engine_impl.h"
#include "explore.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace fs::analysis {

// Per allocation of a track (index as TrackData::allocs): what the block list, call sites,
// search and colouring need beyond the replay's hot record. 14 bytes a block, read on demand.
struct TrackAttrs
{
    std::vector<uint32_t> stack;                     // stacks.id, 0: none
    std::vector<uint32_t> tag;                       // string id, 0: none
    std::vector<uint16_t> stream;                    // index into streams
    std::vector<uint32_t> slack;                     // size - requested; kUnknown: not recorded
    std::unordered_map<uint32_t, uint64_t> bigSlack; // slack that does not fit 32 bits
    std::vector<uint32_t> streams;
    std::unordered_map<uint32_t, std::string> tagText;
    std::vector<uint32_t> meta; // user_metadata string id, 0: none (PyTorch snapshots)
    std::unordered_map<uint32_t, std::string> metaText;
    std::unordered_set<uint32_t> ghost; // indices of ghost blocks (history.h)
    static constexpr uint32_t kUnknown = 0xffffffffu;
    static constexpr uint32_t kBig = 0xfffffffeu;
    uint64_t requested(size_t i, uint64_t size) const;
};

// The session's call stacks through the stack filter (stacks.h): each stack's call site.
struct StackTable
{
    struct Site
    {
        std::string label;  // StackFrame::label of the call-site frame
        std::string detail; // its text as recorded
    };
    std::vector<Site> sites;                        // 0: "(no stack recorded)"
    std::unordered_map<uint32_t, uint32_t> siteOf;  // stack id -> site
    std::unordered_map<uint32_t, std::string> text; // stack id -> its frames, lower case, '\n'
    uint32_t site(uint32_t stack) const
    {
        const auto it = siteOf.find(stack);
        return it == siteOf.end() ? 0 : it->second;
    }
};

// The memory pool of each region of a track.
struct PoolMap
{
    std::vector<uint64_t> byIndex;              // as TrackData::regions
    std::unordered_map<int64_t, uint64_t> byId; // regions.id -> pool
    uint64_t ofId(int64_t id) const
    {
        const auto it = byId.find(id);
        return it == byId.end() ? 0 : it->second;
    }
    // An allocation's pool: its region's, pool 0 outside any region (as poolStatesAt counts).
    uint64_t ofAlloc(const Alloc& a) const { return a.region == kNoRegion ? 0 : byIndex[a.region]; }
};

// The frees of a track that left a hole (CallSiteRow::holes), in time order.
struct Hole
{
    int64_t time;
    uint32_t alloc; // index into TrackData::allocs
    uint64_t bytes;
};

struct Explorer::Data
{
    int64_t fingerprint = -1; // the engine's event count when read (a live refresh changes it)
    std::mutex mu;            // the members below
    std::mutex loadMu;        // one load at a time (outside mu: readers do not wait on it)
    std::vector<std::shared_ptr<const TrackAttrs>> attrs;        // per track
    std::vector<std::shared_ptr<const std::vector<Hole>>> holes; // per track
    std::vector<std::shared_ptr<const PoolMap>> pools;           // per track
    std::shared_ptr<const StackTable> stacks;
    int stateOnly = -1; // -1: not computed
};

// The explorer's reads of the session file, through the store's typed readers
// (explore_rows.cpp). Callers hold dbMutex.
struct AttributeRow
{
    int64_t id = 0;
    bool requestedKnown = false;
    uint64_t requested = 0;
    uint32_t stream = 0;
    uint32_t tag = 0;
    uint32_t stack = 0;
    uint32_t meta = 0; // user_metadata string id
};
// At most `limit` rows with id > afterId, by id; returns how many were read.
int64_t readAttributeRows(Session& s, uint32_t device, Level level, int64_t afterId, int64_t limit,
                          const std::function<void(const AttributeRow&)>& row);
// Every stack's frames, innermost first.
std::vector<std::pair<uint32_t, std::vector<std::string>>> readStacks(Session& s);

// Shared by the explorer's files (explore.cpp).
const TrackData& exploreTrack(const Engine& e, uint32_t device, Level level);
const Engine::Impl& engineImpl(const Engine& e);
std::shared_ptr<const TrackAttrs> attributesOf(const Engine& e, Explorer::Data& d,
                                               const TrackData& td);
std::shared_ptr<const StackTable> stacksOf(const Engine& e, Explorer::Data& d);
std::shared_ptr<const PoolMap> poolsOf(const Engine& e, Explorer::Data& d, const TrackData& td);
std::shared_ptr<const std::vector<Hole>> holesOf(const Engine& e, Explorer::Data& d,
                                                 const TrackData& td);
// The group key of allocation i for a grouping (call site, tag, stream index, pool).
uint64_t groupKey(GroupBy by, const TrackData& td, size_t i, const TrackAttrs& a,
                  const StackTable& st, const PoolMap& pools);
std::string groupLabel(GroupBy by, uint64_t key, const TrackData& td, const TrackAttrs& a,
                       const StackTable& st);
// Whether allocation i of a track matches a query (an address: the block ever covered it);
// each distinct stack or tag is tested once.
class SearchMatcher
{
public:
    SearchMatcher(const SearchQuery& q, const TrackData& td, const TrackAttrs& a,
                  const StackTable& st);
    bool operator()(size_t i);

private:
    const SearchQuery& q_;
    const TrackData& td_;
    const TrackAttrs& a_;
    const StackTable& st_;
    std::string needle_;
    std::unordered_map<uint32_t, bool> memo_;
};

// What most explorer queries start from: the track and what has been read about it.
struct ExploreContext
{
    const Engine::Impl& d;
    const TrackData& td;
    std::shared_ptr<Explorer::Data> data;
    std::shared_ptr<const PoolMap> pools;
    std::shared_ptr<const TrackAttrs> attrs;  // null unless asked for
    std::shared_ptr<const StackTable> stacks; // null unless asked for
};
ExploreContext exploreContext(const Engine& e, std::shared_ptr<Explorer::Data> data,
                              uint32_t device, Level level, bool attributes);

// The memory category (categories.h) of each allocation of `indices` (TrackData::allocs
// indices), under userRules then the defaults (categories.cpp). recorded: set when some of them
// has a stack, tag, note or enclosing range to go by.
std::vector<MemoryCategory> categoriesOf(const ExploreContext& c,
                                         const std::vector<uint32_t>& indices,
                                         const std::vector<CategoryRule>& userRules,
                                         bool* recorded = nullptr);

// A live block's row (attributes when a and st are given).
BlockRow blockRow(const TrackData& td, size_t i, const PoolMap& pools, const TrackAttrs* a,
                  const StackTable* st);

} // namespace fs::analysis
