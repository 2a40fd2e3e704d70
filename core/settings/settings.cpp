#include "settings.h"

#include "core/format.h"
#include "core/import/json_reader.h"
#include "core/json.h"
#include "core/store/ingest.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <regex>
#include <unistd.h>

namespace fs::settings {

namespace {

std::string env(const char* name)
{
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

[[noreturn]] void bad(const std::string& path, const std::string& key, const std::string& what)
{
    throw SessionError(path, fmt::format("\"{}\": {}", key, what));
}

using import::JsonDoc;
using import::JType;

int64_t positiveInt(const JsonDoc& d, uint32_t n, const std::string& path, const char* key,
                    int64_t min)
{
    int64_t v = 0;
    if (!d.toInt(n, v) || v < min) bad(path, key, fmt::format("expected an integer >= {}", min));
    return v;
}

Rule readRule(const JsonDoc& d, uint32_t n, const std::string& path, size_t index)
{
    const std::string where = fmt::format("collapse_rules[{}]", index);
    if (d.node(n).type != JType::Object) bad(path, where, "expected an object");
    Rule r;
    const uint32_t m = d.member(n, "metric");
    if (m == JsonDoc::kNone || d.node(m).type != JType::String || d.str(m).empty())
        bad(path, where + ".metric", "expected a metric name");
    r.rule.metric = std::string(d.str(m));
    const uint32_t c = d.member(n, "compare");
    const std::string_view cmp = c == JsonDoc::kNone ? "" : d.str(c);
    if (cmp == "<" || cmp == "less")
        r.rule.compare = analysis::Compare::Less;
    else if (cmp == ">" || cmp == "greater")
        r.rule.compare = analysis::Compare::Greater;
    else
        bad(path, where + ".compare", "expected \"<\" or \">\"");
    if (!d.toDouble(d.member(n, "threshold"), r.rule.threshold) || !std::isfinite(r.rule.threshold))
        bad(path, where + ".threshold", "expected a number");
    const uint32_t e = d.member(n, "enabled");
    if (e != JsonDoc::kNone) {
        if (d.node(e).type != JType::Bool) bad(path, where + ".enabled", "expected true or false");
        r.enabled = d.node(e).boolean;
    }
    return r;
}

// A share in [0, 1] (the fragmented thresholds).
double fraction(const JsonDoc& d, uint32_t n, const std::string& path, const char* key)
{
    double v = 0;
    if (!d.toDouble(n, v) || !std::isfinite(v) || v < 0 || v > 1)
        bad(path, key, "expected a number from 0 to 1");
    return v;
}

std::vector<Rule> readRules(const JsonDoc& d, uint32_t n, const std::string& path)
{
    if (d.node(n).type != JType::Array) bad(path, "collapse_rules", "expected an array");
    std::vector<Rule> out;
    size_t i = 0;
    for (uint32_t c = d.node(n).first; c != JsonDoc::kNone; c = d.node(c).next)
        out.push_back(readRule(d, c, path, i++));
    return out;
}

// "categories": {"pattern": "category", ...}, in file order.
std::vector<analysis::CategoryRule> readCategories(const JsonDoc& d, uint32_t n,
                                                   const std::string& path)
{
    if (d.node(n).type != JType::Object)
        bad(path, "categories", "expected an object of \"pattern\": \"category\"");
    std::vector<analysis::CategoryRule> out;
    for (uint32_t c = d.node(n).first; c != JsonDoc::kNone; c = d.node(c).next) {
        const std::string& pattern = d.node(c).key;
        const std::string where = "categories." + pattern;
        if (pattern.find_first_not_of('*') == std::string::npos)
            bad(path, where, "a pattern needs some text besides '*'");
        analysis::CategoryRule r;
        r.pattern = pattern;
        if (d.node(c).type != JType::String || !analysis::parseMemoryCategory(d.str(c), r.category))
            bad(path, where,
                "expected one of parameters, gradients, optimizer_state, activations, kv_cache, "
                "workspace, other");
        out.push_back(std::move(r));
    }
    return out;
}

} // namespace

Settings::Settings() : framePattern(IngestOptions().framePattern)
{
    for (const auto& r : analysis::defaultCollapseRules())
        rules.push_back({r, true});
}

std::vector<analysis::CollapseRule> Settings::activeRules() const
{
    std::vector<analysis::CollapseRule> out;
    for (const Rule& r : rules)
        if (r.enabled) out.push_back(r.rule);
    return out;
}

analysis::LoadOptions Settings::loadOptions() const
{
    analysis::LoadOptions o;
    o.rules = activeRules();
    o.lookbackFrames = lookbackFrames;
    o.entropyWindowNs = entropyWindowNs;
    return o;
}

analysis::ReportOptions Settings::reportOptions() const
{
    analysis::ReportOptions o;
    o.burstGapNs = burstGapNs;
    o.entropyWindowNs = entropyWindowNs;
    o.categoryRules = categoryRules;
    return o;
}

std::string defaultPath()
{
    if (std::string p = env("FRAGSCOPE_SETTINGS"); !p.empty()) return p;
    if (std::string x = env("XDG_CONFIG_HOME"); !x.empty()) return x + "/fragscope/settings.json";
    std::string home = env("HOME");
    if (home.empty()) home = ".";
    return home + "/.config/fragscope/settings.json";
}

Settings read(const std::string& path, const Settings& base)
{
    import::ByteReader bytes(path, 1 << 16);
    import::JsonReader reader(bytes);
    JsonDoc d;
    reader.readValue(d);
    reader.expectEnd();
    Settings s = base;
    const uint32_t root = d.root();
    if (d.node(root).type == JType::Array) { // a bare rules file
        s.rules = readRules(d, root, path);
        return s;
    }
    if (d.node(root).type != JType::Object)
        throw SessionError(path, "expected a JSON object of settings or an array of rules");
    static const char* known[] = {
        "version",           "collapse_rules",       "precursor_lookback_frames",
        "entropy_window_ns", "timeline_step_ns",     "burst_gap_ns",
        "frame_pattern",     "fragmented_min_ratio", "fragmented_min_free_share",
        "categories"};
    for (uint32_t c = d.node(root).first; c != JsonDoc::kNone; c = d.node(c).next) {
        const std::string& k = d.node(c).key;
        if (std::find(std::begin(known), std::end(known), k) == std::end(known))
            bad(path, k, "unknown setting (docs/settings.md lists them)");
    }
    if (uint32_t n = d.member(root, "version"); n != JsonDoc::kNone) {
        int64_t v = 0;
        if (!d.toInt(n, v) || v != 1) bad(path, "version", "this fragscope reads version 1");
    }
    if (uint32_t n = d.member(root, "collapse_rules"); n != JsonDoc::kNone)
        s.rules = readRules(d, n, path);
    if (uint32_t n = d.member(root, "precursor_lookback_frames"); n != JsonDoc::kNone)
        s.lookbackFrames = positiveInt(d, n, path, "precursor_lookback_frames", 0);
    if (uint32_t n = d.member(root, "entropy_window_ns"); n != JsonDoc::kNone)
        s.entropyWindowNs = positiveInt(d, n, path, "entropy_window_ns", 1);
    if (uint32_t n = d.member(root, "timeline_step_ns"); n != JsonDoc::kNone)
        s.timelineStepNs = positiveInt(d, n, path, "timeline_step_ns", 0);
    if (uint32_t n = d.member(root, "burst_gap_ns"); n != JsonDoc::kNone)
        s.burstGapNs = positiveInt(d, n, path, "burst_gap_ns", 1);
    if (uint32_t n = d.member(root, "fragmented_min_ratio"); n != JsonDoc::kNone)
        s.fragmented.minRatio = fraction(d, n, path, "fragmented_min_ratio");
    if (uint32_t n = d.member(root, "fragmented_min_free_share"); n != JsonDoc::kNone)
        s.fragmented.minFreeShare = fraction(d, n, path, "fragmented_min_free_share");
    if (uint32_t n = d.member(root, "categories"); n != JsonDoc::kNone)
        s.categoryRules = readCategories(d, n, path);
    if (uint32_t n = d.member(root, "frame_pattern"); n != JsonDoc::kNone) {
        if (d.node(n).type != JType::String) bad(path, "frame_pattern", "expected a string");
        std::string p(d.str(n));
        try {
            const std::regex re(p, std::regex::ECMAScript | std::regex::icase);
            if (re.mark_count() < 1) bad(path, "frame_pattern", "needs a group for the number");
        } catch (const std::regex_error& e) {
            bad(path, "frame_pattern", std::string("invalid regular expression: ") + e.what());
        }
        s.framePattern = std::move(p);
    }
    return s;
}

Settings loadUser(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return Settings();
    return read(path);
}

std::string toJson(const Settings& s)
{
    JsonWriter j;
    j.beginObject();
    j.field("version", 1);
    j.key("collapse_rules").beginArray();
    for (const Rule& r : s.rules)
        j.beginObject()
            .field("metric", r.rule.metric)
            .field("compare", r.rule.compare == analysis::Compare::Less ? "<" : ">")
            .field("threshold", r.rule.threshold)
            .field("enabled", r.enabled)
            .endObject();
    j.endArray();
    j.field("precursor_lookback_frames", s.lookbackFrames);
    j.field("entropy_window_ns", s.entropyWindowNs);
    j.field("timeline_step_ns", s.timelineStepNs);
    j.field("burst_gap_ns", s.burstGapNs);
    j.field("frame_pattern", s.framePattern);
    j.field("fragmented_min_ratio", s.fragmented.minRatio);
    j.field("fragmented_min_free_share", s.fragmented.minFreeShare);
    j.key("categories").beginObject();
    for (const analysis::CategoryRule& r : s.categoryRules)
        j.field(r.pattern, analysis::memoryCategoryName(r.category));
    j.endObject();
    j.endObject();
    return j.str() + "\n";
}

void write(const Settings& s, const std::string& path)
{
    namespace fsys = std::filesystem;
    std::error_code ec;
    const fsys::path p(path);
    if (p.has_parent_path()) fsys::create_directories(p.parent_path(), ec);
    const std::string tmp = path + fmt::format(".tmp{}", ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << toJson(s);
        out.close();
        if (!out) {
            fsys::remove(tmp, ec);
            throw std::runtime_error("cannot write settings file " + path);
        }
    }
    fsys::rename(tmp, p, ec);
    if (ec) {
        fsys::remove(tmp, ec);
        throw std::runtime_error("cannot write settings file " + path + ": " + ec.message());
    }
}

int64_t parseDuration(const std::string& text)
{
    double v = 0;
    const char* b = text.data();
    const char* e = b + text.size();
    auto [p, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || p == b)
        throw std::invalid_argument("'" + text + "' is not a duration (e.g. 300s, 5ms, 1000000)");
    const std::string unit(p, e);
    const double scale = unit.empty() ? 1 : nsPerTimeUnit(unit);
    if (scale == 0)
        throw std::invalid_argument("unknown unit '" + unit + "' in '" + text +
                                    "' (ns, us, ms, s, min, h)");
    const double ns = v * scale;
    if (!(ns >= 1) || ns > 9.2e18)
        throw std::invalid_argument("'" + text + "' must be a positive duration");
    return static_cast<int64_t>(std::llround(ns));
}

} // namespace fs::settings
