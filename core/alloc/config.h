// Settings of the allocator model: the knobs of PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF
// (docs/whatif.md "Settings"). Parsing follows today's PyTorch: the device-generic keys of
// c10/core/AllocatorConfig.cpp (AcceleratorAllocatorConfig::parseArgs) and the CUDA keys of
// c10/cuda/CUDAAllocatorConfig.cpp (CUDAAllocatorConfig::parseArgs): same keys, same units, same
// checks. Every key is parsed; the ones the model cannot replay are kept and named by
// unmodelled(), never dropped silently.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fs::alloc {

// roundup_power2_divisions has one value per power-of-two interval from 1 MiB to 64 GiB
// (CUDAAllocatorConfig.h kRoundUpPowerOfTwoIntervals = 16); 0 or 1 means "no power-2 rounding".
constexpr size_t kRoundUpIntervals = 16;
constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();
// kLargeBuffer (20 MiB): the default of max_non_split_rounding_mb, and the least
// max_split_size_mb / max_non_split_rounding_mb accept.
constexpr uint64_t kLargeBufferBytes = 20ull << 20;

// expandable_segments_reserve value (CUDAAllocatorConfig::parseReserveSpec): a fraction of the
// device's memory ("0.5"), or GiB with a 'G' suffix ("40G").
struct ReserveSpec
{
    bool isFraction = true;
    double value = 0;
    // ExpandableSegmentReserveSpec::resolveBytes.
    uint64_t bytes(uint64_t totalMemory) const;
    bool operator==(const ReserveSpec&) const = default;
};

// A setting parsed but not replayed by the model, and why (the what-if output names each one).
struct UnmodelledSetting
{
    std::string setting; // "key:value" as canonical text
    std::string reason;
};

// The two environment variables PyTorch reads its allocator settings from, and which one it
// takes (docs/whatif.md "Settings").
struct EnvConf
{
    std::string name; // "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", or "" when neither set
    std::string text;
    std::string ignored; // the other name when both are set (its text is not read at all)
};
// AcceleratorAllocatorConfig::instance / CUDAAllocatorConfig::instance: the first of
// PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF that is set wins, whole (the texts are not merged).
// `get` returns the variable's value or nullptr (getenv, or a test's map).
EnvConf effectiveEnvConf(const char* (*get)(const char*));

struct Config
{
    uint64_t maxSplitSize = kNoLimit; // max_split_size_mb, in bytes; kNoLimit when unset
    // max_non_split_rounding_mb, in bytes: a request at or above max_split_size takes a cached
    // block only when the block is less than this much larger.
    uint64_t maxNonSplitRounding = kLargeBufferBytes;
    std::array<uint32_t, kRoundUpIntervals> roundupDivisions{};
    double gcThreshold = 0;          // garbage_collection_threshold, 0 when unset
    bool expandableSegments = false; // expandable_segments:True
    // per_process_memory_fraction (also torch.cuda.set_per_process_memory_fraction): the process
    // may hold at most this fraction of the device's memory (allowed_memory_maximum); 1 = none.
    double memoryFraction = 1.0;
    // expandable_segments_reserve: address space each expandable segment reserves instead of
    // 9/8 of the device's memory (capped at that); unset when !reserveSet.
    bool reserveSet = false;
    ReserveSpec reserve;
    // Parsed, not modelled (unmodelled() says why).
    std::string backend = "native"; // backend: native | cudaMallocAsync
    bool graphCaptureRecordStreamReuse = false;
    bool throwOnCudaMallocOom = false;
    std::map<std::string, ReserveSpec> reserveByClass; // expandable_segments_reserve_by_class
    // Keys that do not change where device blocks go: the host (pinned-memory) allocator's
    // pinned_* and release_lock_on_cudamalloc. key -> value text.
    std::map<std::string, std::string> noDeviceEffect;
    // Values PyTorch warns about and ignores (a malformed expandable_segments_reserve), as text.
    std::vector<std::string> ignoredValues;
    // Not a PyTorch knob: large-pool segments rounded up to this granularity instead of PyTorch's
    // 2 MiB / 20 MiB rule (0 = PyTorch's rule). The experimental tiered policy sets it per tier.
    uint64_t largeSegmentGranularity = 0;

    // Parses PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF text ("expandable_segments:True,
    // max_split_size_mb:128", "roundup_power2_divisions:[256:1,512:2,>:8]"). Every key of today's
    // PyTorch is accepted with its checks; host-only keys (pinned_*, release_lock_on_cudamalloc)
    // land in noDeviceEffect. Throws std::invalid_argument naming the offending key.
    static Config parse(std::string_view conf);
    // From a snapshot's allocator_settings object (JSON text of the dict torch writes:
    // max_split_size in bytes or -1, garbage_collection_threshold, expandable_segments,
    // roundup_power2_divisions {"1": n, "2": n, ... "32768": n} keyed by MiB). Throws
    // std::invalid_argument on text it cannot read.
    static Config fromSnapshotSettings(std::string_view json);
    // Canonical allocator-settings text of the non-default settings ("" for defaults), the
    // unmodelled and host-only ones included.
    std::string describe() const;
    // The settings the model does not replay, each with the reason (host-only keys too: they
    // change nothing on the device). Empty when everything is modelled.
    std::vector<UnmodelledSetting> unmodelled() const;
    // The per-process limit (allowed_memory_maximum) on a device of `totalMemory` bytes:
    // fraction x total when per_process_memory_fraction < 1, else 0 (none).
    uint64_t processLimit(uint64_t totalMemory) const;
    // Divisions for a rounded request size (CUDAAllocatorConfig::roundup_power2_divisions).
    uint32_t divisionsFor(uint64_t size) const;
    bool operator==(const Config&) const = default;
};

} // namespace fs::alloc
