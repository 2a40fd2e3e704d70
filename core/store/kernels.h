// Typed readers of the kernels and graph_launches tables (docs/session-format.md,
// docs/store.md). Window queries go through the (device, start_ns) and start_ns indexes.
#pragma once

#include "session.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fs::store {

// Every column of a kernels row.
struct KernelRow
{
    int64_t id = 0;
    int64_t device = 0;
    std::optional<int64_t> stream;
    int64_t startNs = 0;
    int64_t endNs = 0;
    int64_t name = 0; // strings.id
    std::optional<uint64_t> correlationId;
    int64_t grid[3] = {0, 0, 0};
    int64_t block[3] = {0, 0, 0};
    std::optional<uint64_t> graphId;
    std::optional<uint64_t> graphNodeId;
};

// KernelRows handed to a visitor within one SQLite step per read (Stmt::visitRows); each read
// returns the rows visited. The visitor returns false to stop.
using KernelVisitor = std::function<bool(const KernelRow&)>;
struct KernelRows
{
    // Every kernel in id order, every column (a what-if keeps them).
    static int64_t all(const Session& s, const KernelVisitor& visit);
    // device, name, startNs of every kernel, in id order (one pass for the kernel index).
    static int64_t names(const Session& s, const KernelVisitor& visit);
    // startNs, name, device of the kernels starting in [from, to), in id order.
    static int64_t startingIn(const Session& s, int64_t from, int64_t to,
                              const KernelVisitor& visit);
};

// Launches of one device starting in [from, to), in (start_ns, id) order: the columns a
// frame's kernel analyses read (names by strings.id: stringText gives their text).
struct LaunchRow
{
    int64_t startNs = 0;
    int64_t endNs = 0;
    int64_t name = 0; // strings.id
    std::optional<int64_t> stream;
    std::optional<uint64_t> graphId;
    std::optional<uint64_t> graphNodeId;
};
std::vector<LaunchRow> launchesIn(const Session& s, int64_t device, int64_t from, int64_t to);

// A kernel of the kernel lane: [start, end], name text, stream (0 when none), graph (0 when none).
struct KernelSpanRow
{
    int64_t startNs = 0;
    int64_t endNs = 0;
    std::string name;
    int64_t stream = 0;
    int64_t graphId = 0;
};
// At most limit kernels of each device starting in [from, to], in start order.
class KernelSpans
{
public:
    explicit KernelSpans(const Session& s);
    void append(int64_t device, int64_t from, int64_t to, int64_t limit,
                std::vector<KernelSpanRow>& out);

private:
    Stmt st_;
};

// The devices that ran kernels.
std::vector<int64_t> kernelDevices(const Session& s);
// Start of the newest launch on (device, stream; 0 for none) before t, of kernel name when
// name >= 0; none when there is none.
std::optional<int64_t> previousKernelStart(const Session& s, int64_t device, int64_t stream,
                                           int64_t t, int64_t name = -1);

// Every column of a graph_launches row.
struct GraphLaunchRow
{
    int64_t id = 0;
    int64_t device = 0;
    std::optional<int64_t> stream;
    std::optional<uint64_t> graphId;
    std::optional<uint64_t> execId;
    int64_t startNs = 0;
    int64_t endNs = 0;
};
// Every graph launch in id order.
std::vector<GraphLaunchRow> graphLaunches(const Session& s);
// The graph launches starting in [from, to], in start order.
std::vector<GraphLaunchRow> graphLaunchesIn(const Session& s, int64_t from, int64_t to);

} // namespace fs::store
