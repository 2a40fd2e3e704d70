// fs::analysis::Explorer: the engine's answers for exploring any instant of a run
// (docs/analysis.md "Exploring an instant"): the blocks and free fragments at a time cursor,
// stepping from allocator event to allocator event, the moments worth jumping to, call sites
// (the stack filter of stacks.h aggregated: bytes held, allocations, holes left behind), search,
// the heatmap coloured by call site, tag, stream, pool or memory category (or filtered to one
// pool), and the "fragmented" verdict. Views only draw what these return.
//
// An Explorer wraps one engine. Per-allocation attributes (requested size, stream, tag, stack)
// are read from the session once, on the first call that needs them (attributesReady() says
// whether that call will wait). Every const member may be called from several threads; on an
// engine a LiveEngine refreshes, callers hold Engine::readLock() around calls, and a refresh
// makes the explorer read its attributes again.
#pragma once

#include "categories.h"
#include "engine.h"
#include "metrics.h"
#include "stacks.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fs::analysis {

// ---- the honest headline ---------------------------------------------------------------------

// When an instant counts as fragmented (docs/analysis.md, docs/settings.md): F above minRatio
// and a meaningful free share, free >= minFreeShare of reserved. F alone calls a full allocator
// fragmented (F 0.54 with 4 MiB free of 11 GiB reserved).
struct FragmentedRule
{
    double minRatio = kReferenceFragmentationRatio;
    double minFreeShare = 0.05;
    bool operator==(const FragmentedRule&) const = default;
};

struct Headline
{
    double ratio = 0;     // F
    double freeShare = 0; // free / reserved, 0 when nothing is reserved
    bool fragmented = false;
    std::string text; // one sentence with both figures and the verdict
};
Headline headline(const State& s, const FragmentedRule& rule = {});

// ---- blocks at an instant --------------------------------------------------------------------

// A live block, a free fragment or a pending free at an instant (the block list).
struct BlockRow
{
    bool free = false;    // a free fragment (id -1)
    bool pending = false; // a pending free (docs/analysis.md "Pending frees"): freed by the
                          // program, still used by another stream; id -1, since: when the free
                          // was requested, until: when it completes (kAlive: still pending)
    int64_t id = -1;      // allocations.id
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t regionId = -1;   // -1: outside any region
    uint64_t pool = 0;       // the region's memory pool (0: default)
    int64_t since = kNoTime; // a block's allocation time; kNoTime for a fragment
    int64_t until = kAlive;  // a block's free time (kAlive: never freed)
    // Filled when the attributes are read (BlocksAt::attributes); zero or empty otherwise.
    uint64_t requested = 0; // 0: unknown
    uint32_t stream = 0;    // a pending free's is known without the attributes
    std::string tag;
    std::string site;         // the call site's label (stacks.h), empty without a stack
    std::string userMetadata; // PyTorch snapshots: the allocation's user_metadata
    bool ghost = false;       // allocated before a snapshot's trace began (history.h): no stack
};

// How many rows of each kind a block list holds.
struct BlockCounts
{
    int64_t blocks = 0;
    int64_t fragments = 0;
    int64_t pending = 0;
};
BlockCounts countRows(const std::vector<BlockRow>& rows);

// The state at an instant with every live block, free fragment and pending free (one replay):
// what the histogram, memory map, state readout and block list show at the time cursor.
struct BlocksAt
{
    uint32_t device = 0;
    Level level = Level::Framework;
    std::optional<uint64_t> pool; // set: that pool's regions, blocks and figures only
    int64_t time = 0;
    State state;                // equals Engine::stateAt (poolStatesAt's for a pool)
    std::vector<BlockRow> rows; // by address; blocks, fragments and pending frees interleaved
    bool attributes = false;    // requested, stream, tag and site filled
    Caveats caveats;
};

// ---- moments to jump to ----------------------------------------------------------------------

// Where a track's figures peak, from the engine's exact summary (summary.h, the figures and
// times `fragscope report` prints): the first instant of the largest F, of the largest reserved
// bytes, and of the smallest largest free block while something is reserved. kNoTime when the
// track has none.
struct JumpTargets
{
    int64_t maxRatioTime = kNoTime;
    double maxRatio = 0;
    int64_t peakReservedTime = kNoTime;
    uint64_t peakReserved = 0;
    int64_t minLargestTime = kNoTime;
    uint64_t minLargest = 0;
};

// ---- call sites ------------------------------------------------------------------------------

// Category: memory category (categories.h), under the rules a call passes.
enum class GroupBy : uint8_t { CallSite, Tag, Stream, Pool, Category };
const char* groupByName(GroupBy g);

struct CallSiteRow
{
    std::string label;      // call-site label, tag, "stream 7", pool label; see CallSiteTable
    std::string detail;     // the call site's frame as recorded (empty for the other groupings)
    int64_t liveBlocks = 0; // live at `to`
    uint64_t heldBytes = 0;
    int64_t allocations = 0; // made in (from, to]
    uint64_t allocatedBytes = 0;
    // Frees in (from, to] that left a hole: the freed block's space lay in a free fragment with
    // a live block on each side (the allocator cannot hand it back until they go). holeBytes:
    // the size of that fragment just after the free.
    int64_t holes = 0;
    uint64_t holeBytes = 0;
};

// Allocations grouped by call site (or tag, stream, pool) over (from, to]: what each group
// holds at `to`, made in the range and left behind as holes. Rows by heldBytes, then
// allocatedBytes, descending. Allocations without a stack (tag) form one row "(no stack
// recorded)" ("(no tag)").
struct CallSiteTable
{
    int64_t from = 0;
    int64_t to = 0;
    GroupBy by = GroupBy::CallSite;
    std::optional<uint64_t> pool;
    std::vector<CallSiteRow> rows;
    uint64_t heldBytes = 0;      // the rows' sum: every live block's size at `to`
    bool stacksRecorded = false; // some allocation of the track has a stack
};

// ---- search ----------------------------------------------------------------------------------

enum class SearchKind : uint8_t { Address, Size, Text, Tag, Meta };

// "0x7f00001000" (address), "1MiB-4MiB", ">=2MiB", "<4KiB", "512B" (size, a range or exact),
// "tag:NAME" (tag contains NAME), "meta:TEXT" (user_metadata contains TEXT), anything else: text in
// the stack (a function, file or "file.py:line"). Case-insensitive for text and tags.
struct SearchQuery
{
    SearchKind kind = SearchKind::Text;
    uint64_t address = 0;
    uint64_t minSize = 0, maxSize = ~uint64_t{0}; // inclusive
    std::string text;
    std::string describe() const;
};
// Throws std::invalid_argument naming what is wrong ("'4XB': unknown size unit").
SearchQuery parseSearch(const std::string& text);

struct SearchResult
{
    SearchQuery query;
    int64_t matches = 0;     // allocations of the track (or pool) over the whole run
    int64_t liveMatches = 0; // of them, live at the cursor
    uint64_t liveMatchBytes = 0;
    std::vector<BlockRow> rows; // the first matches by allocation time (at most a limit)
    // An address search: what held the address at the cursor (a live block or a free
    // fragment), else the region that ever held it and when.
    std::optional<BlockRow> holder;
    std::optional<RegionInfo> region;
    std::string message; // what was found, or "nothing found: ..." with the reason
};

// ---- heatmap colouring -----------------------------------------------------------------------

enum class Colouring : uint8_t { Occupancy, CallSite, Tag, Stream, Pool, Search, Category };
const char* colouringName(Colouring c);

struct HeatmapStyle
{
    Colouring colouring = Colouring::Occupancy;
    std::optional<uint64_t> pool; // only this pool's regions and blocks
    std::string query;            // Colouring::Search: the search whose matches are highlighted
    int top = 8;                  // legend entries before "other"
    std::vector<CategoryRule> categoryRules; // Colouring::Category: the user's rules
};

struct LegendEntry
{
    std::string label;
    double byteTime = 0; // bytes x ns held in the view (ranks the entries)
};

// The engine's heatmap raster of the request (occupancy, reserved fraction, cell states; a pool
// style leaves other pools' regions out), plus for a colouring the category whose blocks hold
// the most byte-time in each allocated cell: 0..legend.size()-1, kNoCategory elsewhere. The
// legend lists the `top` groups with the most byte-time in view, then "other" when more exist.
// Colouring::Search: category 0 = the matches, 1 = every other block.
struct StyledRaster
{
    static constexpr uint8_t kNoCategory = 255;
    HeatmapRaster raster;
    Colouring colouring = Colouring::Occupancy;
    std::vector<uint8_t> category; // per cell, as raster.occupancy
    std::vector<LegendEntry> legend;
};

class Explorer
{
public:
    explicit Explorer(std::shared_ptr<const Engine> engine);
    ~Explorer();
    Explorer(const Explorer&) = delete;
    Explorer& operator=(const Explorer&) = delete;
    const Engine& engine() const { return *engine_; }

    // A session that holds only an end state (a snapshot without a trace): every block and
    // region exists from the session's first instant and none ends.
    bool stateOnly() const;

    // The previous / next instant at which the track has an allocator event (allocation, free,
    // region created or released) strictly before / after t; kNoTime when none.
    int64_t previousEvent(uint32_t device, Level level, int64_t t) const;
    int64_t nextEvent(uint32_t device, Level level, int64_t t) const;

    // Every live block and free fragment at t with the state (one replay); withAttributes:
    // read the attributes first when they are not (attributesReady), else leave them out.
    BlocksAt blocksAt(uint32_t device, Level level, int64_t t, std::optional<uint64_t> pool = {},
                      bool withAttributes = true) const;
    bool attributesReady(uint32_t device, Level level) const;
    void loadAttributes(uint32_t device, Level level) const;

    JumpTargets jumpTargets(uint32_t device, Level level, std::optional<uint64_t> pool = {}) const;

    // GroupBy::Category: categoryRules are the user's, tried before the defaults.
    CallSiteTable callSites(uint32_t device, Level level, int64_t from, int64_t to,
                            GroupBy by = GroupBy::CallSite, std::optional<uint64_t> pool = {},
                            const std::vector<CategoryRule>& categoryRules = {}) const;

    // The live blocks at t by memory category (categories.h; computed in categories.cpp).
    CategoryBreakdown categories(uint32_t device, Level level, int64_t t,
                                 const std::vector<CategoryRule>& userRules = {}) const;

    // Throws std::invalid_argument for a query parseSearch refuses.
    SearchResult search(uint32_t device, Level level, const std::string& query, int64_t t,
                        std::optional<uint64_t> pool = {}, size_t limit = 500) const;

    StyledRaster heatmap(const HeatmapRequest& rq, const HeatmapStyle& style) const;

    struct Data; // per-track attributes, call sites, holes (explore.cpp)

private:
    std::shared_ptr<const Engine> engine_;
    mutable std::mutex mu_;
    mutable std::shared_ptr<Data> data_;
    std::shared_ptr<Data> data() const; // a new one when a live refresh changed the engine
};

} // namespace fs::analysis
