// The sharing what-if of CUDA-graph pools (docs/analysis.md "Sharing what-if"): the engine names
// the pools whose graphs never replay concurrently (Engine::graphs()); the run's recorded request
// stream is replayed through the allocator model with each candidate group's pools merged into
// one, as PyTorch's `pool=` argument would have them, and the peak reserved bytes are compared
// with the model's replay of the pools as recorded. Figures are the model's (computed), never
// measured.
#pragma once

#include "trace.h"

#include "core/analysis/graphs.h"
#include "core/analysis/report.h"

#include <atomic>

namespace fs::analysis {
class Engine;
}

namespace fs::alloc {

// Fills r.sharing[*] and r.sharingAll from the trace of the session r was computed over (taken
// by value: the replays reuse its devices' requests in place). Throws Cancelled when cancel is
// raised.
void computeSharing(analysis::GraphsReport& r, Trace trace,
                    const std::atomic<bool>* cancel = nullptr);

// Engine::graphs() with its sharing what-if computed: what `fragscope graphs`, `report` and the
// GUI's Graphs panel show. Reads the session's request stream only when some pools may share.
analysis::GraphsReport graphsReport(const analysis::Engine& e,
                                    const std::atomic<bool>* cancel = nullptr,
                                    bool replayDetail = true);

// Fills r.graphs (the report's short graphs section: counts, no per-replay detail) from e.
void addGraphsSummary(analysis::Report& r, const analysis::Engine& e,
                      const std::atomic<bool>* cancel = nullptr);

} // namespace fs::alloc
