// Typed readers of the allocations table (docs/session-format.md, docs/store.md).
#pragma once

#include "session.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fs::store {

// The columns the replay index reads (engine open, live refresh): id, device, level, region_id,
// address, size, alloc_ns, free_ns. Read millions of times at an open: kept lean.
struct AllocationRecord
{
    int64_t id = 0;
    int64_t device = 0;
    int64_t level = 0;
    std::optional<int64_t> regionId;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t allocNs = 0;
    std::optional<int64_t> freeNs; // none: never freed
    std::optional<int64_t> tag;    // strings.id of the tag; none: untagged
};

// AllocationRecords handed to a visitor (the engine's open decodes every row), decoded from the
// table's pages where they tell the whole truth, else inside one SQLite step per read
// (docs/store.md "Long reads"). The visitor returns false to stop; each read returns the rows
// visited.
using AllocationVisitor = std::function<bool(const AllocationRecord&)>;
struct AllocationRecords
{
    // Rows with lo <= id <= hi, in id order. The engine reads two ranges of a long table at
    // once, each on a connection of its own (Session::openUnchecked).
    static int64_t idRange(const Session& s, int64_t lo, int64_t hi,
                           const AllocationVisitor& visit);
    // Rows with id > lastId, in id order (a live refresh: ids grow with time).
    static int64_t after(const Session& s, int64_t lastId, const AllocationVisitor& visit);
    // idRange's rows read by SQLite alone (Stmt::visitRows), as idRange did before it read pages
    // itself: bench_scale's baseline.
    static int64_t idRangeBySqlite(const Session& s, int64_t lo, int64_t hi,
                                   const AllocationVisitor& visit);
    // idRange's rows read as every reader did before visitRows, one sqlite3_step and nine column
    // calls per row: bench_scale's baseline and the tests' cross-check.
    static int64_t idRangeStepped(const Session& s, int64_t lo, int64_t hi,
                                  const AllocationVisitor& visit);
};

// Smallest and largest allocation id (0 and 0 for an empty table).
std::pair<int64_t, int64_t> allocationIdBounds(const Session& s);

// Where one allocation lives: its track and its time.
struct AllocationPlace
{
    int64_t device = 0;
    int64_t level = 0;
    int64_t allocNs = 0;
};
std::optional<AllocationPlace> allocationPlace(const Session& s, int64_t id);

// What the source said about one allocation beyond the replay record. Texts are empty when the
// row has none (or names a string the file lacks).
struct AllocationDetails
{
    std::optional<uint64_t> requestedSize;
    int64_t stream = 0;
    std::optional<std::string> tag;
    std::vector<std::string> stack; // outermost last
    std::optional<std::string> userMetadata;
    std::optional<std::string> compileContext;
};
std::optional<AllocationDetails> allocationDetails(const Session& s, int64_t id);
// The user_metadata and compile_context texts of allocations by id, in the order asked ("" where
// a row has none, names a string the file lacks, or the file predates the columns): one prepared
// statement for all (memory by category reads those of the live blocks).
struct AllocationNotes
{
    std::string userMetadata;
    std::string compileContext;
};
std::vector<AllocationNotes> allocationNotes(const Session& s, const std::vector<int64_t>& ids);
// The tag text of one allocation ("" when it has no row, no tag, or a tag the file lacks).
std::string allocationTag(const Session& s, int64_t id);

// The free time of allocations a live refresh still holds as alive: one point lookup each, on
// one prepared statement.
class AllocationFrees
{
public:
    explicit AllocationFrees(const Session& s);
    // None when the row is absent or still not freed.
    std::optional<int64_t> freeNs(int64_t id);

private:
    Stmt st_;
};

// What the explorer (core/analysis/explore.h) reads of a track's allocations beyond the replay
// record: tags, streams and call sites for the block list, call sites and colourings. At most
// `limit` rows with id > afterId, in id order (read in chunks: the connection is shared with the
// GUI's lookups).
struct AllocationAttributes
{
    int64_t id = 0;
    std::optional<uint64_t> requestedSize;
    int64_t stream = 0;
    std::optional<int64_t> tag;          // strings.id
    std::optional<int64_t> stack;        // stacks.id
    std::optional<int64_t> userMetadata; // strings.id
};
std::vector<AllocationAttributes> allocationAttributes(const Session& s, int64_t device,
                                                       int64_t level, int64_t afterId,
                                                       int64_t limit);

// Every column of a row (the what-if replay reads the request stream whole).
struct AllocationRow
{
    int64_t device = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    std::optional<uint64_t> requestedSize;
    std::optional<int64_t> stream;
    int64_t allocNs = 0;
    std::optional<int64_t> freeNs;
    std::optional<int64_t> tag;
    std::optional<int64_t> regionId;
    std::optional<int64_t> stack;
    std::optional<int64_t> userMetadata;
    std::optional<int64_t> compileContext;
};

// AllocationRows handed to a visitor within one SQLite step (Stmt::visitRows).
struct AllocationRows
{
    // The rows of one level (Level numbering of events.h), in id order; returns the rows
    // visited. The visitor returns false to stop.
    static int64_t ofLevel(const Session& s, int level,
                           const std::function<bool(const AllocationRow&)>& visit);
};

} // namespace fs::store
