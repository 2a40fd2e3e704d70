// Settings of the allocator model: the knobs of PYTORCH_CUDA_ALLOC_CONF that change where blocks
// go (docs/whatif.md "Settings"). Parsing follows c10/cuda/CUDAAllocatorConfig.cpp of PyTorch 2.4
// (pytorch/pytorch commit 001074d2): same keys, same units, same checks.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace fs::alloc {

// roundup_power2_divisions has one value per power-of-two interval from 1 MiB to 64 GiB
// (CUDAAllocatorConfig.h kRoundUpPowerOfTwoIntervals = 16); 0 or 1 means "no power-2 rounding".
constexpr size_t kRoundUpIntervals = 16;
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

struct Config
{
    uint64_t maxSplitSize = kNoLimit; // max_split_size_mb, in bytes; kNoLimit when unset
    std::array<uint32_t, kRoundUpIntervals> roundupDivisions{};
    double gcThreshold = 0;          // garbage_collection_threshold, 0 when unset
    bool expandableSegments = false; // expandable_segments:True
    // Not a PyTorch knob: large-pool segments rounded up to this granularity instead of PyTorch's
    // 2 MiB / 20 MiB rule (0 = PyTorch's rule). The experimental tiered policy sets it per tier.
    uint64_t largeSegmentGranularity = 0;

    // Parses PYTORCH_CUDA_ALLOC_CONF text ("expandable_segments:True,max_split_size_mb:128",
    // "roundup_power2_divisions:[256:1,512:2,>:8]"). Keys that do not change placement
    // (pinned_*, release_lock_on_cudamalloc, backend:native) are accepted and ignored. Throws
    // std::invalid_argument naming the offending key.
    static Config parse(std::string_view conf);
    // From a snapshot's allocator_settings object (JSON text of the dict torch writes:
    // max_split_size in bytes or -1, garbage_collection_threshold, expandable_segments,
    // roundup_power2_divisions {"1": n, "2": n, ... "32768": n} keyed by MiB). Throws
    // std::invalid_argument on text it cannot read.
    static Config fromSnapshotSettings(std::string_view json);
    // Canonical PYTORCH_CUDA_ALLOC_CONF text of the non-default settings ("" for defaults).
    std::string describe() const;
    // Divisions for a rounded request size (CUDAAllocatorConfig::roundup_power2_divisions).
    uint32_t divisionsFor(uint64_t size) const;
    bool operator==(const Config&) const = default;
};

} // namespace fs::alloc
