// Typed readers of the regions and region_mappings tables (docs/session-format.md,
// docs/store.md).
#pragma once

#include "session.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fs::store {

// Every column of a regions row.
struct RegionRow
{
    int64_t id = 0;
    int64_t device = 0;
    int64_t level = 0;
    int64_t kind = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t createNs = 0;
    std::optional<int64_t> destroyNs; // none: never released
    std::optional<int64_t> stream;
    std::optional<int64_t> poolId;
    bool expandable = false;
};

class RegionRows
{
public:
    // Every region in (create_ns, id) order (the engine's open).
    static RegionRows byCreation(const Session& s);
    // Non-expandable regions with id > lastId in (create_ns, id) order (a live refresh).
    static RegionRows newerThan(const Session& s, int64_t lastId);
    // Every region, in the table's order (the OOM diagnosis).
    static RegionRows all(const Session& s);
    // The regions of one level, in id order (the what-if replay).
    static RegionRows ofLevel(const Session& s, int level);
    bool next(RegionRow& r);

private:
    explicit RegionRows(Stmt st) : st_(std::move(st)) {}
    Stmt st_;
};

// (id, destroy_ns) of the released non-expandable regions with id <= upToId (a live refresh
// finds the releases of regions it holds as alive).
std::vector<std::pair<int64_t, int64_t>> regionReleases(const Session& s, int64_t upToId);
// (id, pool id; 0 for the default pool) of a track's regions.
std::vector<std::pair<int64_t, uint64_t>> regionPools(const Session& s, int64_t device,
                                                      int64_t level);
// Whether the level has a region of kind vmmKind or an expandable one.
bool levelHasExpandableRegion(const Session& s, int level, int vmmKind);
// Counts and sums of the expandable regions and of the mappings: it changes whenever they do
// (a live engine re-indexes then).
std::string expandableRegionsStamp(const Session& s);

// A mapped piece of an expandable region, with its region's device.
struct RegionMappingRow
{
    int64_t regionId = 0;
    int64_t device = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t mapNs = 0;
    std::optional<int64_t> unmapNs; // none: still mapped
};
// The mappings of expandable regions (none when the file predates the table).
std::vector<RegionMappingRow> expandableMappings(const Session& s);
// The mappings of the regions of one level, in mapping id order.
std::vector<RegionMappingRow> mappingsOfLevel(const Session& s, int level);

} // namespace fs::store
