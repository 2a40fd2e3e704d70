// Reference points the benchmarks (bench/) measure the store against: plain SQLite doing the
// least the same work needs, measured in the same run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fs::store {

struct BareAllocation
{
    int64_t id = 0;
    int64_t region = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t allocNs = 0;
    int64_t freeNs = 0;
};

// The allocation rows through one prepared INSERT in one transaction into a new file at path,
// with the pragmas ingest uses and the same time index built at the end: what ingest's writer
// is compared with (bench_ingest).
void writeBareAllocations(const std::string& path, const std::vector<BareAllocation>& rows);

} // namespace fs::store
