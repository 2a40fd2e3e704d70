// Typed readers of a session's CUDA-graph rows (graph_launches, graph-launched kernels,
// graph_captures, graph_execs; docs/session-format.md, docs/store.md), in the shapes the graphs
// analysis (core/analysis/graphs.cpp) and `info`'s capture health use: compact launch records
// (a long run has millions) and kernels streamed, never kept.
#pragma once

#include "core/events.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fs {
class Session;
}

namespace fs::store {

struct GraphLaunchRecord
{
    int64_t start = 0;
    int64_t end = 0;
    int64_t graphId = 0; // 0: the source did not say
    uint64_t execId = 0; // 0: the source did not say
    uint32_t device = 0;
    uint32_t stream = 0;
};
static_assert(sizeof(GraphLaunchRecord) <= 40, "a million replays must read quickly");

// A kernel that a graph launched (kernels.graph_id not NULL).
struct GraphKernelRow
{
    int64_t start = 0;
    int64_t end = 0;
    int64_t graphId = 0;
    uint32_t device = 0;
};

struct GraphCaptureRow
{
    int64_t begin = 0;
    int64_t end = 0;
    int64_t graphId = 0;
    uint64_t pool = 0; // 0: the source did not say
    std::string name;  // empty: none given
    uint32_t device = 0;
    uint32_t stream = 0;
};

struct GraphExecRow
{
    int64_t instantiated = 0;
    int64_t destroyed = kNoTime; // kNoTime: alive at the end
    int64_t graphId = 0;
    uint64_t execId = 0;
    uint32_t device = 0;
};

struct GraphRows
{
    std::vector<GraphLaunchRecord> launches; // by (start, row id)
    std::vector<GraphCaptureRow> captures;
    std::vector<GraphExecRow> execs;
    bool capturesRecorded = false; // the session has the graph_captures/graph_execs tables
};

// Reads the session's graph launches, captures and execs. Throws fs::SessionError on a bad file.
GraphRows readGraphRows(const Session& s);
// Calls fn for every kernel a graph launched, in the table's order (not necessarily by start):
// a long run has tens of millions, so they are handed over one by one, never kept.
void forEachGraphKernel(const Session& s, const std::function<void(const GraphKernelRow&)>& fn);

} // namespace fs::store
