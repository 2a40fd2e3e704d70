// Reference points the benchmarks (bench/) measure the store against: plain SQLite doing the
// least the same work needs, measured in the same run.
#pragma once

#include "session.h"

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
// with the pragmas ingest uses and the same time index (built once, at the end): what ingest
// is compared with (bench_ingest).
void writeBareAllocations(const std::string& path, const std::vector<BareAllocation>& rows);

// The SELECT of the columns the engine's open reads, over every allocation row, reading only
// address and size: what the engine's cold open is compared with (bench_analysis). Returns the
// rows read; checksum: a sum of the values read, so that the reads are not optimised away.
int64_t scanAllocations(const Session& s, uint64_t& checksum);

} // namespace fs::store
