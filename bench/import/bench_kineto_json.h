// Shared by bench_kineto_json's translation units: what each side extracts, and the importer's
// rules (KinetoImporter::onEvent) that fold it into checksums the sides must agree on.
#pragma once

#include "core/import/json_reader.h"

#include <cmath>
#include <cstdint>
#include <string_view>

namespace kbench {

// What one side extracted, and how long it took (measured inside the child).
struct Result
{
    uint64_t bytes = 0; // decompressed bytes
    uint64_t events = 0, memory = 0, cudaMemory = 0, kernels = 0;
    uint64_t sumBytes = 0, sumAddr = 0, sumTotal = 0, sumDevice = 0, sumTs = 0, sumDur = 0;
    uint64_t sumKernelArgs = 0;
    double seconds = 0;       // end to end
    double loadSeconds = 0;   // simdjson: decompressing the whole document into memory
    uint64_t bufferBytes = 0; // simdjson: the document buffer's capacity (with padding)
    int ok = 0;
    bool sameAs(const Result& o) const
    {
        return bytes == o.bytes && events == o.events && memory == o.memory &&
               cudaMemory == o.cudaMemory && kernels == o.kernels && sumBytes == o.sumBytes &&
               sumAddr == o.sumAddr && sumTotal == o.sumTotal && sumDevice == o.sumDevice &&
               sumTs == o.sumTs && sumDur == o.sumDur && sumKernelArgs == o.sumKernelArgs;
    }
};

// The importer's rule (fs::import::nanosFromMicros) on a raw number token from simdjson, which
// keeps the whitespace after the number.
inline bool nanosFromMicros(std::string_view t, int64_t& out)
{
    while (!t.empty() &&
           (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t'))
        t.remove_suffix(1);
    return fs::import::nanosFromMicros(t, out);
}

// The fields one event contributes, whichever side read them.
struct Fields
{
    std::string_view name, cat;
    bool hasTs = false;
    int64_t ts = 0, dur = 0;
    int64_t type = -1, device = -1, bytes = 0, addr = 0, total = 0;
    bool hasAddr = false, hasTotal = false;
    int64_t kdevice = -1, stream = -1, correlation = -1;
    int64_t grid[3] = {-1, -1, -1}, block[3] = {-1, -1, -1};
};

// The importer's decisions (KinetoImporter::onEvent), folded into checksums.
inline void account(const Fields& f, Result& r)
{
    ++r.events;
    if (!f.hasTs) return;
    r.sumTs += static_cast<uint64_t>(f.ts);
    if (f.name == "[memory]") {
        ++r.memory;
        if (f.type != 1) return;
        ++r.cudaMemory;
        r.sumBytes += static_cast<uint64_t>(f.bytes);
        r.sumDevice += static_cast<uint64_t>(f.device);
        if (f.hasAddr) r.sumAddr += static_cast<uint64_t>(f.addr);
        if (f.hasTotal) r.sumTotal += static_cast<uint64_t>(f.total);
        return;
    }
    if (f.cat == "kernel" || f.cat == "Kernel") {
        ++r.kernels;
        r.sumDur += static_cast<uint64_t>(f.dur);
        uint64_t s = static_cast<uint64_t>(f.kdevice) * 31 + static_cast<uint64_t>(f.stream) * 17 +
                     static_cast<uint64_t>(f.correlation);
        for (int i = 0; i < 3; ++i)
            s = s * 7 + static_cast<uint64_t>(f.grid[i]) * 3 + static_cast<uint64_t>(f.block[i]);
        r.sumKernelArgs += s;
    }
}

// simdjson ondemand over a whole document in memory (capacity >= size + SIMDJSON_PADDING):
// compiled twice, for the build's baseline target (what a product build gets: ondemand has no
// runtime dispatch, so x86-64 without -mavx2 runs its scalar "fallback" kernel) and with
// -march=haswell (AVX2).
void walkOndemandBaseline(const char* data, size_t size, size_t capacity, Result& r);
void walkOndemandHaswell(const char* data, size_t size, size_t capacity, Result& r);
const char* ondemandBaselineName();
const char* ondemandHaswellName();

} // namespace kbench
