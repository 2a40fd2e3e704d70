#include "config.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

namespace fs::alloc {

namespace {

[[noreturn]] void bad(const std::string& what)
{
    throw std::invalid_argument(what);
}

uint64_t toU64(std::string_view s, std::string_view key)
{
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
        bad(fmt::format("{}: '{}' is not a whole number", key, s));
    return v;
}

double toDouble(std::string_view s, std::string_view key)
{
    try {
        size_t used = 0;
        const double v = std::stod(std::string(s), &used);
        if (used != s.size()) throw std::invalid_argument("");
        return v;
    } catch (const std::exception&) {
        bad(fmt::format("{}: '{}' is not a number", key, s));
    }
}

bool toBool(std::string_view s, std::string_view key)
{
    if (s == "True" || s == "true" || s == "1") return true;
    if (s == "False" || s == "false" || s == "0") return false;
    bad(fmt::format("{}: expected True or False, got '{}'", key, s));
}

// The config lexer of CUDAAllocatorConfig::lexArgs: ',' ':' '[' ']' are tokens, spaces dropped.
std::vector<std::string> lex(std::string_view env)
{
    std::vector<std::string> out;
    std::string buf;
    for (char c : env) {
        if (c == ',' || c == ':' || c == '[' || c == ']') {
            if (!buf.empty()) out.push_back(std::move(buf));
            buf.clear();
            out.emplace_back(1, c);
        } else if (c != ' ') {
            buf += c;
        }
    }
    if (!buf.empty()) out.push_back(std::move(buf));
    return out;
}

// log2 of a power of two in MiB -> interval index, clamped as PyTorch does.
size_t intervalOfMiB(uint64_t mib)
{
    if (mib == 0 || !std::has_single_bit(mib))
        bad(fmt::format("roundup_power2_divisions: interval {} is not a power of 2", mib));
    const size_t idx = static_cast<size_t>(std::countr_zero(mib));
    return std::min(idx, kRoundUpIntervals - 1);
}

uint32_t checkedDivisions(uint64_t v)
{
    if (v != 0 && !std::has_single_bit(v))
        bad(fmt::format("roundup_power2_divisions: {} is not a power of 2", v));
    return static_cast<uint32_t>(v);
}

// CUDAAllocatorConfig::parseReserveSpec: "<fraction>" or "<n>G" (GiB), finite and > 0; nullopt
// for anything else (PyTorch warns and keeps its default).
std::optional<ReserveSpec> reserveSpec(const std::string& token)
{
    const bool gib = !token.empty() && (token.back() == 'G' || token.back() == 'g');
    const std::string num = gib ? token.substr(0, token.size() - 1) : token;
    double v = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (num.empty() || ec != std::errc() || p != num.data() + num.size() || !std::isfinite(v) ||
        v <= 0)
        return std::nullopt;
    return ReserveSpec{!gib, v};
}

std::string reserveText(const ReserveSpec& r)
{
    return r.isFraction ? fmt::format("{}", r.value) : fmt::format("{}G", r.value);
}

} // namespace

uint64_t ReserveSpec::bytes(uint64_t totalMemory) const
{
    const double b = isFraction ? value * static_cast<double>(totalMemory)
                                : value * static_cast<double>(uint64_t(1) << 30);
    if (b >= 1.8e19) return std::numeric_limits<uint64_t>::max();
    return static_cast<uint64_t>(b);
}

EnvConf effectiveEnvConf(const char* (*get)(const char*))
{
    EnvConf e;
    const char* cuda = get("PYTORCH_CUDA_ALLOC_CONF");
    const char* generic = get("PYTORCH_ALLOC_CONF");
    if (cuda) {
        e.name = "PYTORCH_CUDA_ALLOC_CONF";
        e.text = cuda;
        if (generic) e.ignored = "PYTORCH_ALLOC_CONF";
    } else if (generic) {
        e.name = "PYTORCH_ALLOC_CONF";
        e.text = generic;
    }
    return e;
}

uint64_t Config::processLimit(uint64_t totalMemory) const
{
    if (!(memoryFraction < 1.0)) return 0;
    // setMemoryFraction: allowed_memory_maximum = fraction x totalGlobalMem. A fraction of 0
    // allows nothing; 1 byte (0 means "no limit" to the model) fails every segment the same way.
    const auto limit = static_cast<uint64_t>(memoryFraction * static_cast<double>(totalMemory));
    return std::max<uint64_t>(limit, 1);
}

std::vector<UnmodelledSetting> Config::unmodelled() const
{
    std::vector<UnmodelledSetting> out;
    if (backend != "native")
        out.push_back({"backend:" + backend,
                       "CUDA's stream-ordered pool (cudaMallocAsync) places the blocks, not "
                       "PyTorch's caching allocator; the model replays the native allocator only "
                       "(and cudaMallocAsync ignores max_split_size_mb, roundup_power2_divisions "
                       "and garbage_collection_threshold)"});
    if (graphCaptureRecordStreamReuse)
        out.push_back({"graph_capture_record_stream_reuse:True",
                       "reuse of blocks freed during graph capture follows the captured graph's "
                       "topology, which a recording does not carry"});
    if (throwOnCudaMallocOom)
        out.push_back({"throw_on_cudamalloc_oom:True",
                       "the preemptive rejection before cudaMalloc is not modelled: a request "
                       "past the per-process limit fails as a plain OOM after free-and-retry"});
    for (const auto& [name, spec] : reserveByClass)
        out.push_back(
            {fmt::format("expandable_segments_reserve_by_class:[{}:{}]", name, reserveText(spec)),
             "a recording does not say which stream class each stream belongs to"});
    for (const auto& [key, value] : noDeviceEffect)
        out.push_back({key + ":" + value,
                       key.starts_with("pinned_")
                           ? "host (pinned-memory) allocator only: no effect on device memory"
                           : "lock handling only: where device blocks go does not change"});
    for (const std::string& v : ignoredValues)
        out.push_back({v, "not a positive fraction or <n>G: PyTorch warns and keeps its default"});
    return out;
}

uint32_t Config::divisionsFor(uint64_t size) const
{
    // CUDAAllocatorConfig::roundup_power2_divisions: interval index = log2(size) - log2(1 MiB),
    // clamped to [0, 15].
    const int log = 63 - std::countl_zero(size | 1);
    const int idx = std::clamp(log - 20, 0, static_cast<int>(kRoundUpIntervals) - 1);
    return roundupDivisions[static_cast<size_t>(idx)];
}

Config Config::parse(std::string_view conf)
{
    Config c;
    const auto t = lex(conf);
    size_t i = 0;
    auto need = [&](std::string_view what) -> const std::string& {
        if (i >= t.size()) bad(fmt::format("expected {} at the end of '{}'", what, conf));
        return t[i++];
    };
    while (i < t.size()) {
        const std::string key = need("a key");
        if (key == ",") continue;
        if (need("':'") != ":") bad(fmt::format("{}: expected ':' after the key", key));
        if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
            const uint64_t mb = toU64(need("a value"), key);
            // AcceleratorAllocatorConfig::parseMaxSplitSize / parseMaxNonSplitRoundingSize: at
            // least kLargeBuffer (20 MiB); PyTorch 2.4 wanted more than 20 for max_split_size_mb.
            if (mb < (kLargeBufferBytes >> 20))
                bad(fmt::format("{} too small, must be >= {}", key, kLargeBufferBytes >> 20));
            const uint64_t bytes =
                std::min<uint64_t>(mb, std::numeric_limits<uint64_t>::max() >> 20) << 20;
            (key == "max_split_size_mb" ? c.maxSplitSize : c.maxNonSplitRounding) = bytes;
        } else if (key == "garbage_collection_threshold") {
            const double v = toDouble(need("a value"), key);
            if (v <= 0 || v >= 1)
                bad("garbage_collection_threshold must be in the open interval (0.0, 1.0)");
            c.gcThreshold = v;
        } else if (key == "expandable_segments") {
            c.expandableSegments = toBool(need("a value"), key);
        } else if (key == "roundup_power2_divisions") {
            if (i < t.size() && t[i] == "[") {
                ++i;
                bool first = true;
                size_t last = 0;
                while (true) {
                    const std::string k = need("an interval");
                    if (k == "]") break;
                    if (k == ",") continue;
                    if (need("':'") != ":") bad("roundup_power2_divisions: expected ':'");
                    const uint32_t v = checkedDivisions(toU64(need("divisions"), key));
                    if (k == ">") {
                        // PyTorch >= 2.5 (c10/core/AllocatorConfig.cpp) fills the intervals
                        // after the last one named; 2.4 also overwrote that last one.
                        for (size_t j = last + 1; j < kRoundUpIntervals; ++j)
                            c.roundupDivisions[j] = v;
                    } else {
                        const size_t idx = intervalOfMiB(toU64(k, key));
                        if (first)
                            for (size_t j = 0; j < idx; ++j)
                                c.roundupDivisions[j] = v;
                        first = false;
                        c.roundupDivisions[idx] = v;
                        last = idx;
                    }
                }
            } else {
                const uint32_t v = checkedDivisions(toU64(need("divisions"), key));
                c.roundupDivisions.fill(v);
            }
        } else if (key == "per_process_memory_fraction") {
            // CUDAAllocatorConfig::parsePerProcessMemoryFraction: [0, 1].
            const double v = toDouble(need("a value"), key);
            if (!(v >= 0 && v <= 1))
                bad("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
            c.memoryFraction = v;
        } else if (key == "backend") {
            // CUDAAllocatorConfig::parseAllocatorConfig: native or cudaMallocAsync.
            const std::string v = need("a value");
            if (v != "native" && v != "cudaMallocAsync")
                bad(fmt::format("backend: unknown allocator backend '{}', options are native and "
                                "cudaMallocAsync",
                                v));
            c.backend = v;
        } else if (key == "graph_capture_record_stream_reuse") {
            c.graphCaptureRecordStreamReuse = toBool(need("a value"), key);
        } else if (key == "throw_on_cudamalloc_oom") {
            c.throwOnCudaMallocOom = toBool(need("a value"), key);
        } else if (key == "expandable_segments_reserve") {
            // CUDAAllocatorConfig::parseExpandableSegmentsReserve: a bad value is warned about
            // and the default kept.
            const std::string v = need("a value");
            if (auto spec = reserveSpec(v)) {
                c.reserve = *spec;
                c.reserveSet = true;
            } else {
                c.ignoredValues.push_back(key + ":" + v);
            }
        } else if (key == "expandable_segments_reserve_by_class") {
            // parseExpandableSegmentsReserveByClass: [name:value,...]; a bad entry is skipped.
            if (need("'['") != "[") bad(fmt::format("{}: expected '['", key));
            std::map<std::string, ReserveSpec> parsed;
            while (true) {
                const std::string name = need("a class name or ']'");
                if (name == "]") break;
                if (name == ",") continue;
                if (need("':'") != ":") bad(fmt::format("{}: expected ':' after '{}'", key, name));
                const std::string v = need("a reserve value");
                if (auto spec = reserveSpec(v))
                    parsed[name] = *spec;
                else
                    c.ignoredValues.push_back(fmt::format("{}:[{}:{}]", key, name, v));
            }
            c.reserveByClass = std::move(parsed);
        } else if (key == "pinned_num_register_threads") {
            // parsePinnedNumRegisterThreads: a power of 2, at most 128.
            const uint64_t v = toU64(need("a value"), key);
            if (!std::has_single_bit(v))
                bad(fmt::format("pinned_num_register_threads has to be a power of 2, got {}", v));
            if (v > 128)
                bad(fmt::format("pinned_num_register_threads should be at most 128, got {}", v));
            c.noDeviceEffect[key] = std::to_string(v);
        } else if (key == "pinned_reserve_segment_size_mb") {
            // parsePinnedReserveSegmentSize: greater than 0.
            const uint64_t v = toU64(need("a value"), key);
            if (v == 0) bad("pinned_reserve_segment_size_mb has to be greater than 0");
            c.noDeviceEffect[key] = std::to_string(v);
        } else if (key == "pinned_use_cuda_host_register" ||
                   key == "pinned_use_hip_host_register" ||
                   key == "pinned_use_background_threads" || key == "pinned_free_catch_all" ||
                   key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") {
            c.noDeviceEffect[key] = toBool(need("a value"), key) ? "True" : "False";
        } else {
            bad(fmt::format("unknown allocator setting '{}'", key));
        }
    }
    return c;
}

namespace {

// Just enough JSON for the flat allocator_settings dict: objects, strings, numbers, literals.
struct MiniJson
{
    std::string_view s;
    size_t p = 0;
    void ws()
    {
        while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p])))
            ++p;
    }
    [[noreturn]] void fail(const char* what)
    {
        bad(fmt::format("allocator_settings: {} at offset {}", what, p));
    }
    std::string str()
    {
        ws();
        if (p >= s.size() || s[p] != '"') fail("expected a string");
        std::string out;
        for (++p; p < s.size() && s[p] != '"'; ++p) {
            if (s[p] == '\\' && p + 1 < s.size()) ++p;
            out += s[p];
        }
        if (p >= s.size()) fail("unterminated string");
        ++p;
        return out;
    }
    // Scalar text, or "{" for an object whose members go to `obj`.
    std::string value(std::map<std::string, std::string>* obj)
    {
        ws();
        if (p >= s.size()) fail("expected a value");
        if (s[p] == '"') return str();
        if (s[p] == '{') {
            ++p;
            ws();
            if (p < s.size() && s[p] == '}') {
                ++p;
                return "{";
            }
            while (true) {
                std::string k = str();
                ws();
                if (p >= s.size() || s[p] != ':') fail("expected ':'");
                ++p;
                std::string v = value(nullptr);
                if (obj) (*obj)[k] = v;
                ws();
                if (p < s.size() && s[p] == ',') {
                    ++p;
                    continue;
                }
                if (p < s.size() && s[p] == '}') {
                    ++p;
                    return "{";
                }
                fail("expected ',' or '}'");
            }
        }
        const size_t b = p;
        while (p < s.size() && s[p] != ',' && s[p] != '}' &&
               !std::isspace(static_cast<unsigned char>(s[p])))
            ++p;
        if (p == b) fail("expected a value");
        return std::string(s.substr(b, p - b));
    }
};

} // namespace

Config Config::fromSnapshotSettings(std::string_view json)
{
    Config c;
    MiniJson m{json};
    m.ws();
    if (m.p >= json.size() || json[m.p] != '{') m.fail("expected an object");
    ++m.p;
    m.ws();
    if (m.p < json.size() && json[m.p] == '}') return c;
    while (true) {
        const std::string key = m.str();
        m.ws();
        if (m.p >= json.size() || json[m.p] != ':') m.fail("expected ':'");
        ++m.p;
        std::map<std::string, std::string> sub;
        const std::string v = m.value(&sub);
        if (key == "PYTORCH_CUDA_ALLOC_CONF" || key == "PYTORCH_ALLOC_CONF") {
            // The settings text torch kept (last_allocator_settings): the keys the dict does
            // not carry come from it. Text the parser rejects leaves them at their defaults.
            try {
                const Config e = parse(v);
                c.maxNonSplitRounding = e.maxNonSplitRounding;
                c.memoryFraction = e.memoryFraction;
                c.reserveSet = e.reserveSet;
                c.reserve = e.reserve;
                c.backend = e.backend;
                c.graphCaptureRecordStreamReuse = e.graphCaptureRecordStreamReuse;
                c.throwOnCudaMallocOom = e.throwOnCudaMallocOom;
                c.reserveByClass = e.reserveByClass;
                c.noDeviceEffect = e.noDeviceEffect;
                c.ignoredValues = e.ignoredValues;
            } catch (const std::invalid_argument&) {
            }
        } else if (key == "max_split_size") {
            if (!v.empty() && v[0] != '-') c.maxSplitSize = toU64(v, key);
        } else if (key == "garbage_collection_threshold") {
            c.gcThreshold = toDouble(v, key);
        } else if (key == "expandable_segments") {
            c.expandableSegments = toBool(v, key);
        } else if (key == "roundup_power2_divisions") {
            for (const auto& [k, d] : sub)
                c.roundupDivisions[intervalOfMiB(toU64(k, key))] = checkedDivisions(toU64(d, key));
        }
        m.ws();
        if (m.p < json.size() && json[m.p] == ',') {
            ++m.p;
            continue;
        }
        if (m.p < json.size() && json[m.p] == '}') break;
        m.fail("expected ',' or '}'");
    }
    return c;
}

std::string Config::describe() const
{
    std::vector<std::string> parts;
    if (expandableSegments) parts.emplace_back("expandable_segments:True");
    if (maxSplitSize != kNoLimit)
        parts.push_back(fmt::format("max_split_size_mb:{}", maxSplitSize >> 20));
    if (gcThreshold > 0)
        parts.push_back(fmt::format("garbage_collection_threshold:{}", gcThreshold));
    bool any = false, uniform = true;
    for (uint32_t d : roundupDivisions) {
        any |= d > 1;
        uniform &= d == roundupDivisions[0];
    }
    if (any) {
        if (uniform) {
            parts.push_back(fmt::format("roundup_power2_divisions:{}", roundupDivisions[0]));
        } else {
            std::string s = "roundup_power2_divisions:[";
            for (size_t i = 0; i < kRoundUpIntervals; ++i)
                s += fmt::format("{}{}:{}", i ? "," : "", uint64_t(1) << i, roundupDivisions[i]);
            parts.push_back(s + "]");
        }
    }
    if (maxNonSplitRounding != kLargeBufferBytes)
        parts.push_back(fmt::format("max_non_split_rounding_mb:{}", maxNonSplitRounding >> 20));
    if (memoryFraction < 1.0)
        parts.push_back(fmt::format("per_process_memory_fraction:{}", memoryFraction));
    if (reserveSet) parts.push_back("expandable_segments_reserve:" + reserveText(reserve));
    if (!reserveByClass.empty()) {
        std::string s = "expandable_segments_reserve_by_class:[";
        bool first = true;
        for (const auto& [name, spec] : reserveByClass) {
            s += fmt::format("{}{}:{}", first ? "" : ",", name, reserveText(spec));
            first = false;
        }
        parts.push_back(s + "]");
    }
    if (backend != "native") parts.push_back("backend:" + backend);
    if (graphCaptureRecordStreamReuse) parts.emplace_back("graph_capture_record_stream_reuse:True");
    if (throwOnCudaMallocOom) parts.emplace_back("throw_on_cudamalloc_oom:True");
    for (const auto& [key, value] : noDeviceEffect)
        parts.push_back(key + ":" + value);
    if (largeSegmentGranularity)
        parts.push_back(
            fmt::format("large_segment_granularity_mb:{}", largeSegmentGranularity >> 20));
    std::string out;
    for (const auto& p : parts)
        out += (out.empty() ? "" : ",") + p;
    return out;
}

} // namespace fs::alloc
