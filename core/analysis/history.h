// The allocator history a PyTorch snapshot kept (docs/importers.md "History"): per device,
// whether its trace ring buffer overflowed (trace_alloc_overflowed, trace_alloc_max_entries),
// and the "ghost blocks" (memory_viz's word): blocks allocated before the trace's first entry,
// which the importer reconstructs without a stack. Read from the session's meta
// `pytorch.history`, which the importer writes.
#pragma once

#include "core/json.h"
#include "core/store/session.h" // RecordedWindow

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fs::analysis {

struct TraceHistory
{
    uint32_t device = 0;
    bool truncated = false;       // older entries were overwritten: the trace starts mid-run
    int64_t maxEntries = -1;      // the ring buffer's size, -1 when the snapshot does not say
    int64_t entries = 0;          // trace entries kept
    int64_t ghostBlocks = 0;      // blocks alive before the trace's first entry
    int64_t ghostNs = 0;          // when they appear in the session (the first entry's time)
    std::vector<uint64_t> ghosts; // their addresses, ascending
};

// Empty when the session has no such meta (not a PyTorch snapshot, or an older import).
// Lines it cannot read are skipped.
std::vector<TraceHistory> traceHistory(const std::map<std::string, std::string>& meta);

// Is the allocation of `device` at `address` made at `allocNs` a ghost block?
bool isGhostBlock(const std::vector<TraceHistory>& h, uint32_t device, uint64_t address,
                  int64_t allocNs);

// One sentence per truncated history, for the caveats of every result ("" when complete).
std::string historyNote(const TraceHistory& h);

// A few words for a status line ("device 0: history TRUNCATED, 1 ghost block"; "" when
// complete); historyNote() is the sentence behind it.
std::string historyBadge(const TraceHistory& h);

// A flight recording (SessionSummary::windows, record/attach --keep): one sentence for the
// caveats of every result, and a few words for a status line ("" for a whole recording).
std::string windowsNote(const std::vector<RecordedWindow>& windows);
std::string windowsBadge(const std::vector<RecordedWindow>& windows);
// "12.345-15.678 s  (N events)  TRIGGER": one window, its times from origin (the session's
// start for `info`, the recording's first event for `record`/`attach`).
std::string windowLine(const RecordedWindow& w, int64_t origin);
// "windows": [{begin_ns, end_ns, trigger, events}] (docs/json.md; [] for a whole recording).
void writeWindows(JsonWriter& j, const std::vector<RecordedWindow>& windows);
// The spans of [begin, end] that no window covers (a flight recording's gaps, which views shade
// as not recorded), in time order; none for a whole recording.
std::vector<std::pair<int64_t, int64_t>> unrecordedSpans(const std::vector<RecordedWindow>& windows,
                                                         int64_t begin, int64_t end);

// "history": [{device, truncated, max_entries, ghost_blocks}] (docs/json.md).
void writeHistory(JsonWriter& j, const std::vector<TraceHistory>& h);

} // namespace fs::analysis
