// Internal to the engine: the pieces of the precursor ranking (docs/analysis.md "Precursors").
#pragma once

#include "engine_impl.h"

#include <vector>

namespace fs::analysis {

// Kernel-variant shifts of frame f against the healthy baseline frames: one row per (usual
// variant -> new variant) pair, summed over the families where it happened. The rows carry
// evidence.novelty and evidence.kernelEffect; the caller adds closeness and the score.
std::vector<Precursor> kernelShifts(const Engine::Impl& d, const FrameInfo& f,
                                    const std::vector<const FrameInfo*>& baseline);

} // namespace fs::analysis
