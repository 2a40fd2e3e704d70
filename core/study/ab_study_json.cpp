// study.json (docs/json.md "study.json"): written once the runs are over, read by
// `fragscope ab --report` and the GUI. The reader takes the inputs (arms, runs, their scores and
// distances, the rules) and judges again, so a study always shows the verdicts this fragscope
// computes from its numbers; only the recorded session's verdict is kept as written.
#include "ab_study.h"

#include "core/import/json_reader.h"
#include "core/json.h"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>

namespace fs::study {

using import::JsonDoc;
using import::JType;

namespace {

void writeStrings(JsonWriter& j, std::string_view key, const std::vector<std::string>& v)
{
    j.key(key).beginArray();
    for (const auto& s : v)
        j.value(s);
    j.endArray();
}

void writeOptional(JsonWriter& j, std::string_view key, const std::string& v)
{
    if (v.empty())
        j.key(key).null();
    else
        j.field(key, v);
}

void writeRun(JsonWriter& j, const Run& r)
{
    j.beginObject();
    j.field("folder", r.folder).field("index", r.index).field("ran", r.ran);
    j.field("exit_status", r.exitStatus).field("seconds", r.seconds).field("frames", r.frames);
    writeOptional(j, "video", r.video);
    writeOptional(j, "error", r.error);
    writeStrings(j, "stderr_tail", r.stderrTail);
    writeOptional(j, "session", r.session);
    writeOptional(j, "thumbnails", r.thumbnails);
    j.key("metrics").beginArray();
    for (const auto& s : r.scores) {
        j.beginObject().field("frame", s.frame).field("reference", s.reference);
        for (const auto& [name, v] : s.values)
            j.field(name, v);
        j.endObject();
    }
    j.endArray();
    j.key("vs_baseline").beginArray();
    for (const FrameDistance& d : r.vsBaseline) {
        j.beginObject().field("frame", d.frame).field("mse", d.mse).field("psnr_db", d.psnrDb);
        j.field("ssim", d.ssim).endObject();
    }
    j.endArray();
    j.endObject();
}

void writeRunAtCollapse(JsonWriter& j, const RunAtCollapse& r)
{
    j.beginObject().field("folder", r.folder).field("bad", r.bad).field("in_spread", r.inSpread);
    j.field("beyond_noise", r.beyondNoise).field("normal", r.normal());
    j.field("psnr_db", r.psnrDb).field("ssim", r.ssim);
    writeStrings(j, "broken_rules", r.brokenRules);
    j.key("spread").beginArray();
    for (const SpreadCheck& c : r.spread) {
        j.beginObject().field("metric", c.metric).field("value", c.value);
        j.field("median", c.median).field("z", c.z).field("limit", c.limit);
        j.field("outside", c.outside).endObject();
    }
    j.endArray().endObject();
}

void writeCollapse(JsonWriter& j, const CollapseJudgement& c)
{
    j.beginObject().field("frame", c.firstFrame).field("last_frame", c.lastFrame);
    j.field("verdict", verdictName(c.verdict)).field("reason", c.reason);
    writeStrings(j, "broken_rules", c.brokenRules);
    j.key("arms").beginObject();
    for (const ArmAtCollapse& a : c.arms) {
        j.key(a.arm).beginObject().field("role", roleName(a.role));
        j.field("bad", a.bad()).field("normal", a.normal());
        // The first run's figures (the others are in "runs").
        if (a.runs.empty()) {
            j.key("psnr_db").null().key("ssim").null();
        } else {
            j.field("psnr_db", a.runs.front().psnrDb).field("ssim", a.runs.front().ssim);
        }
        j.key("runs").beginArray();
        for (const RunAtCollapse& r : a.runs)
            writeRunAtCollapse(j, r);
        j.endArray().endObject();
    }
    j.endObject();
    writeOptional(j, "session_verdict", c.sessionVerdict);
    writeStrings(j, "session_evidence", c.sessionEvidence);
    j.endObject();
}

// ---- reading --------------------------------------------------------------------------------

struct Reader
{
    const JsonDoc& d;
    const std::string& path;

    [[noreturn]] void fail(const std::string& what) const
    {
        throw SessionError(path, what + " (docs/json.md \"study.json\")");
    }
    uint32_t need(uint32_t obj, std::string_view key, JType type, const std::string& where) const
    {
        const uint32_t n = d.member(obj, key);
        if (n == JsonDoc::kNone || d.node(n).type != type)
            fail(fmt::format("{}: \"{}\" missing or of the wrong type", where, key));
        return n;
    }
    std::string str(uint32_t obj, std::string_view key, const std::string& where) const
    {
        const uint32_t n = d.member(obj, key);
        if (n == JsonDoc::kNone || d.node(n).type == JType::Null) return {};
        if (d.node(n).type != JType::String)
            fail(fmt::format("{}: \"{}\" is not a string", where, key));
        return std::string(d.str(n));
    }
    // A number; null reads as +inf (how study.json writes an infinite PSNR).
    double num(uint32_t obj, std::string_view key, const std::string& where) const
    {
        const uint32_t n = d.member(obj, key);
        if (n != JsonDoc::kNone && d.node(n).type == JType::Null)
            return std::numeric_limits<double>::infinity();
        double v = 0;
        if (!d.toDouble(n, v)) fail(fmt::format("{}: \"{}\" is not a number", where, key));
        return v;
    }
    int64_t integer(uint32_t obj, std::string_view key, const std::string& where) const
    {
        int64_t v = 0;
        if (!d.toInt(d.member(obj, key), v))
            fail(fmt::format("{}: \"{}\" is not an integer", where, key));
        return v;
    }
    bool boolean(uint32_t obj, std::string_view key) const
    {
        const uint32_t n = d.member(obj, key);
        return n != JsonDoc::kNone && d.node(n).type == JType::Bool && d.node(n).boolean;
    }
    template <typename F> void each(uint32_t arr, F f) const
    {
        size_t i = 0;
        for (uint32_t c = d.node(arr).first; c != JsonDoc::kNone; c = d.node(c).next)
            f(c, i++);
    }
    std::vector<std::string> strings(uint32_t obj, std::string_view key,
                                     const std::string& where) const
    {
        std::vector<std::string> out;
        const uint32_t n = d.member(obj, key);
        if (n == JsonDoc::kNone) return out;
        if (d.node(n).type != JType::Array)
            fail(fmt::format("{}: \"{}\" is not a list", where, key));
        each(n, [&](uint32_t c, size_t) {
            if (d.node(c).type != JType::String)
                fail(fmt::format("{}: \"{}\" holds a non-string", where, key));
            out.emplace_back(d.str(c));
        });
        return out;
    }

    Run run(uint32_t o, const std::string& where) const
    {
        Run r;
        r.folder = str(o, "folder", where);
        r.index = static_cast<int>(integer(o, "index", where));
        r.ran = boolean(o, "ran");
        r.exitStatus = static_cast<int>(integer(o, "exit_status", where));
        r.seconds = num(o, "seconds", where);
        r.frames = integer(o, "frames", where);
        r.video = str(o, "video", where);
        r.error = str(o, "error", where);
        r.stderrTail = strings(o, "stderr_tail", where);
        r.session = str(o, "session", where);
        r.thumbnails = str(o, "thumbnails", where);
        each(need(o, "metrics", JType::Array, where), [&](uint32_t m, size_t i) {
            const std::string w = fmt::format("{}.metrics[{}]", where, i);
            analysis::VideoFrameScore s;
            for (uint32_t c = d.node(m).first; c != JsonDoc::kNone; c = d.node(c).next) {
                const std::string& k = d.node(c).key;
                if (k == "frame")
                    s.frame = integer(m, "frame", w);
                else if (k == "reference")
                    s.reference = integer(m, "reference", w);
                else
                    s.values[k] = num(m, k, w);
            }
            r.scores.push_back(std::move(s));
        });
        each(need(o, "vs_baseline", JType::Array, where), [&](uint32_t m, size_t i) {
            const std::string w = fmt::format("{}.vs_baseline[{}]", where, i);
            r.vsBaseline.push_back({integer(m, "frame", w), num(m, "mse", w), num(m, "psnr_db", w),
                                    num(m, "ssim", w)});
        });
        return r;
    }
};

} // namespace

std::string studyJson(const Study& s)
{
    JsonWriter j;
    j.beginObject();
    j.field("format", kStudyFormat).field("schema_version", kStudySchemaVersion);
    j.field("fragscope_version", s.fragscopeVersion).field("created", s.created);
    writeStrings(j, "command", s.command);
    writeOptional(j, "video", s.video);
    j.field("repeat", s.repeat).field("recorded", s.recorded).field("interrupted", s.interrupted);
    j.key("rules").beginArray();
    for (const auto& r : s.rules) {
        j.beginObject().field("metric", r.metric);
        j.field("compare", r.compare == analysis::Compare::Less ? "<" : ">");
        j.field("threshold", r.threshold).endObject();
    }
    j.endArray();
    j.key("common_rules").beginArray();
    for (const auto& c : s.commonRules)
        j.value(c.describe());
    j.endArray();
    writeOptional(j, "problem", s.problem);
    j.key("noise_floor").beginObject().field("samples", s.noise.samples);
    j.field("identical", s.noise.identical()).field("mse_max", s.noise.mseMax);
    j.field("psnr_min_db", s.noise.psnrMinDb).field("ssim_min", s.noise.ssimMin).endObject();
    j.key("arms").beginArray();
    for (const Arm& a : s.arms) {
        j.beginObject().field("name", a.name).field("role", roleName(a.role));
        j.key("env").beginObject();
        for (const auto& [k, v] : a.env)
            j.field(k, v);
        j.endObject();
        j.key("runs").beginArray();
        for (const Run& r : a.runs)
            writeRun(j, r);
        j.endArray().endObject();
    }
    j.endArray();
    j.key("collapses").beginArray();
    for (const CollapseJudgement& c : s.collapses)
        writeCollapse(j, c);
    j.endArray();
    j.endObject();
    return j.str() + "\n";
}

void writeStudy(const Study& s, const std::string& folder)
{
    const std::filesystem::path final = std::filesystem::path(folder) / kStudyFile;
    const std::filesystem::path tmp = final.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << studyJson(s);
        out.close();
        if (!out) throw std::runtime_error(tmp.string() + ": cannot write the study");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, final, ec);
    if (ec) throw std::runtime_error(final.string() + ": cannot write the study: " + ec.message());
}

Study readStudy(const std::string& folder)
{
    const std::string path = (std::filesystem::path(folder) / kStudyFile).string();
    if (!std::filesystem::exists(path))
        throw SessionError(folder, "not a study folder: it holds no study.json (fragscope ab -o)");
    import::ByteReader bytes(path);
    import::JsonReader reader(bytes);
    JsonDoc d;
    reader.readValue(d);
    reader.expectEnd();
    const Reader r{d, path};
    const uint32_t root = d.root();
    if (root == JsonDoc::kNone || d.node(root).type != JType::Object) r.fail("not a JSON object");
    if (r.str(root, "format", "study") != kStudyFormat)
        r.fail(fmt::format("not a study: \"format\" is not \"{}\"", kStudyFormat));
    const int64_t version = r.integer(root, "schema_version", "study");
    if (version != kStudySchemaVersion)
        r.fail(fmt::format("schema_version {} (this fragscope reads {})", version,
                           kStudySchemaVersion));
    Study s;
    s.fragscopeVersion = r.str(root, "fragscope_version", "study");
    s.created = r.str(root, "created", "study");
    s.command = r.strings(root, "command", "study");
    s.video = r.str(root, "video", "study");
    s.repeat = static_cast<int>(r.integer(root, "repeat", "study"));
    s.recorded = r.boolean(root, "recorded");
    s.interrupted = r.boolean(root, "interrupted");
    r.each(r.need(root, "rules", JType::Array, "study"), [&](uint32_t o, size_t i) {
        const std::string w = fmt::format("rules[{}]", i);
        analysis::CollapseRule rule;
        rule.metric = r.str(o, "metric", w);
        const std::string cmp = r.str(o, "compare", w);
        if (cmp != "<" && cmp != ">") r.fail(w + ": \"compare\" is neither \"<\" nor \">\"");
        rule.compare = cmp == "<" ? analysis::Compare::Less : analysis::Compare::Greater;
        rule.threshold = r.num(o, "threshold", w);
        s.rules.push_back(rule);
    });
    r.each(r.need(root, "arms", JType::Array, "study"), [&](uint32_t o, size_t i) {
        const std::string w = fmt::format("arms[{}]", i);
        Arm a;
        a.name = r.str(o, "name", w);
        const std::string role = r.str(o, "role", w);
        a.role = role == "baseline" ? Role::Baseline
                 : role == "repeat" ? Role::Repeat
                                    : Role::Changed;
        const uint32_t env = r.need(o, "env", JType::Object, w);
        for (uint32_t c = d.node(env).first; c != JsonDoc::kNone; c = d.node(c).next)
            a.env.emplace_back(d.node(c).key, r.str(env, d.node(c).key, w + ".env"));
        r.each(r.need(o, "runs", JType::Array, w), [&](uint32_t ro, size_t k) {
            a.runs.push_back(r.run(ro, fmt::format("{}.runs[{}]", w, k)));
        });
        s.arms.push_back(std::move(a));
    });
    judge(s);
    // The recorded session's verdicts are not recomputed: they come from the session.
    const uint32_t collapses = d.member(root, "collapses");
    if (collapses != JsonDoc::kNone && d.node(collapses).type == JType::Array)
        r.each(collapses, [&](uint32_t o, size_t i) {
            const std::string w = fmt::format("collapses[{}]", i);
            const int64_t frame = r.integer(o, "frame", w);
            for (CollapseJudgement& c : s.collapses)
                if (c.firstFrame == frame) {
                    c.sessionVerdict = r.str(o, "session_verdict", w);
                    c.sessionEvidence = r.strings(o, "session_evidence", w);
                }
        });
    return s;
}

bool isStudyFolder(const std::string& folder)
{
    try {
        readStudy(folder);
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

} // namespace fs::study
