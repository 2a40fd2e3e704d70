// Typed readers of the small descriptive tables: devices, processes, strings, stacks and the
// simulator's truth tables (docs/session-format.md, docs/store.md).
#pragma once

#include "session.h"

#include <optional>
#include <string>
#include <vector>

namespace fs::store {

struct DeviceRow
{
    int64_t id = 0;
    std::string name;
    std::optional<uint64_t> capacityBytes;
};
// Every device in id order.
std::vector<DeviceRow> devices(const Session& s);

struct ProcessRow
{
    int64_t pid = 0;
    std::optional<std::string> commandLine;
    std::optional<int64_t> startNs;
};
// Every process, in the table's order.
std::vector<ProcessRow> processes(const Session& s);

// Every interned string by id (ids above maxId are left out); a missing id is empty.
std::vector<std::string> strings(const Session& s, size_t maxId);
// One interned string ("" when the file lacks it).
std::string stringText(const Session& s, int64_t id);

struct StackFrameRow
{
    int64_t stack = 0;
    int64_t frame = 0; // strings.id
};
// Every stack frame in (stack id, depth) order: outermost last within a stack.
std::vector<StackFrameRow> stackFrames(const Session& s);
// Every stack's frame texts, outermost last, in stack id order (the explorer's call sites).
std::vector<std::pair<int64_t, std::vector<std::string>>> allStackTexts(const Session& s);
// The frame texts of one stack, outermost last.
std::vector<std::string> stackTexts(const Session& s, int64_t stack);

// Synthetic sessions only: what the simulator knows about a frame.
struct SimTruthRow
{
    int64_t attentionCalls = 0;
    int64_t workspaceFailures = 0;
    int64_t ooms = 0;
};
std::optional<SimTruthRow> simTruthFrame(const Session& s, int64_t frame);
// The kernels that ran in a frame and lower its coherence.
std::vector<std::string> simCausalKernels(const Session& s, int64_t frame);
// What lowered a frame's quality (sim_truth_causes), the strongest first (smallest quality
// factor, then mechanism name); none when nothing did or the file predates the table.
struct SimTruthCauseRow
{
    std::string mechanism;
    int64_t causeFrame = 0;
    double qualityFactor = 1;
};
std::vector<SimTruthCauseRow> simTruthCauses(const Session& s, int64_t frame);

} // namespace fs::store
