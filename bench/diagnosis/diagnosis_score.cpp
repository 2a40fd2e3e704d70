#include "diagnosis_score.h"

#include "core/analysis/engine.h"
#include "core/json.h"
#include "core/store/catalog.h"
#include "core/store/ingest.h"
#include "core/store/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>

namespace fs::bench {

using analysis::FrameInfo;
using analysis::Precursor;
using analysis::PrecursorKind;

const std::vector<std::string>& allocatorMechanisms()
{
    static const std::vector<std::string> m = {
        "workspace_fallback", "oom_retry", "graph_inputs_moved", "pending_free", "external_growth"};
    return m;
}

std::string engineMechanism(const std::string& truth)
{
    if (truth == "workspace_fallback") return "kernel_fallback";
    if (truth == "oom_retry") return "out_of_memory";
    if (truth == "graph_inputs_moved") return "graph_replay";
    if (truth == "pending_free") return "pending_free";
    if (truth == "external_growth") return "external_memory";
    return {};
}

Truth readTruth(const std::string& path, int64_t frame)
{
    Truth t;
    const Session s = Session::open(path);
    for (const store::SimTruthCauseRow& c : store::simTruthCauses(s, frame)) {
        if (c.qualityFactor >= 1) { // occurred without lowering the score
            t.benign.push_back(c.mechanism);
        } else if (t.mechanism.empty()) {
            t.mechanism = c.mechanism;
            t.causeFrame = c.causeFrame;
        } else {
            t.otherCauses.push_back(c.mechanism);
        }
    }
    for (std::string& k : store::simCausalKernels(s, frame))
        t.causalKernels.insert(std::move(k));
    if (const auto f = store::simTruthFrame(s, frame)) t.ooms = f->ooms;
    // Sessions from before the causes table: a fallback or an OOM is the one mechanism.
    if (t.mechanism.empty() && (!t.causalKernels.empty() || t.ooms > 0)) {
        t.mechanism = "workspace_fallback";
        t.causeFrame = frame;
    }
    return t;
}

bool namesCause(const Precursor& p, const Truth& t, const FrameInfo& f)
{
    const bool inFrame = p.time >= f.start && p.time < f.end;
    if (t.mechanism == "workspace_fallback") {
        if (p.kind == PrecursorKind::KernelVariantShift && p.shift)
            return t.causalKernels.count(p.shift->variant) > 0;
        // The math fallback's request fails outright: its OOM is the same failed workspace.
        return p.kind == PrecursorKind::Oom && t.ooms > 0 && inFrame;
    }
    if (t.mechanism == "oom_retry") return p.kind == PrecursorKind::Oom && inFrame;
    if (t.mechanism == "graph_inputs_moved") return p.kind == PrecursorKind::GraphChange;
    if (t.mechanism == "pending_free") return p.kind == PrecursorKind::PendingFree;
    if (t.mechanism == "external_growth") return p.kind == PrecursorKind::ExternalMemory;
    return false;
}

int rankOf(const std::vector<Precursor>& rows, const Truth& t, const FrameInfo& f)
{
    for (size_t i = 0; i < rows.size(); ++i)
        if (namesCause(rows[i], t, f)) return static_cast<int>(i) + 1;
    return 0;
}

namespace {

template <typename Key> std::vector<Precursor> sortedBy(std::vector<Precursor> rows, Key key)
{
    // Time order first, so that ties keep time order, not the engine's ranking.
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Precursor& a, const Precursor& b) { return a.time < b.time; });
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const Precursor& a, const Precursor& b) { return key(a) > key(b); });
    return rows;
}

std::vector<Precursor> byBytes(std::vector<Precursor> rows)
{
    return sortedBy(std::move(rows),
                    [](const Precursor& p) { return static_cast<double>(p.size); });
}

bool allocatorEvent(PrecursorKind k)
{
    switch (k) {
    case PrecursorKind::Oom:
    case PrecursorKind::RegionCreated:
    case PrecursorKind::RegionReleased:
    case PrecursorKind::SplitLargest:
    case PrecursorKind::AddressJump:
    case PrecursorKind::PendingFree:
    case PrecursorKind::ExternalMemory:
        return true;
    default:
        return false;
    }
}

std::vector<Precursor> newestAllocatorEvent(std::vector<Precursor> rows)
{
    // "What happened in the allocator just before": allocator events, the latest first.
    return sortedBy(std::move(rows), [](const Precursor& p) {
        return allocatorEvent(p.kind) ? 1e19 + static_cast<double>(p.time) : 0.0;
    });
}

std::vector<Precursor> rarestKind(std::vector<Precursor> rows)
{
    // Rows whose figure the run's healthy frames reached least often first (the engine's base
    // rate, without its departure test, roles or closeness); unmeasured rows last.
    return sortedBy(std::move(rows), [](const Precursor& p) {
        return p.evidence.runHealthyFrames > 0 ? 2.0 - p.evidence.baseRate : 0.0;
    });
}

std::vector<Precursor> newestKernel(std::vector<Precursor> rows)
{
    // Kernel-variant shifts first, the variant that first ran latest first: "rank a brand-new
    // kernel name first".
    return sortedBy(std::move(rows), [](const Precursor& p) {
        return p.kind == PrecursorKind::KernelVariantShift && p.shift
                   ? 1e12 + static_cast<double>(p.shift->firstFrame)
                   : 0.0;
    });
}

std::vector<Precursor> largestFJump(std::vector<Precursor> rows)
{
    return sortedBy(std::move(rows),
                    [](const Precursor& p) { return p.evidence.fragmentationJump; });
}

std::vector<Precursor> largestFreeDrop(std::vector<Precursor> rows)
{
    return sortedBy(std::move(rows), [](const Precursor& p) {
        return static_cast<double>(p.evidence.largestDropBytes);
    });
}

double ratio(int64_t a, int64_t b)
{
    return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

} // namespace

const std::vector<Baseline>& baselines()
{
    static const std::vector<Baseline> b = {
        {"newest_allocator_event", "allocator events, the latest first", newestAllocatorEvent},
        {"largest_bytes", "rows by bytes, largest first", byBytes},
        {"rarest_kind", "rows by their base rate in the run's healthy frames, rarest first",
         rarestKind},
        {"newest_kernel", "kernel shifts first, newest kernel name first", newestKernel},
        {"largest_f_jump", "rows by the rise of F across the event", largestFJump},
        {"largest_free_drop", "rows by the drop of the largest free block", largestFreeDrop},
    };
    return b;
}

double DiagnosisResult::precision() const
{
    return ratio(calledRight, calledAllocator);
}
double DiagnosisResult::recall() const
{
    return ratio(recalled, all.collapses);
}
double DiagnosisResult::falseBlame() const
{
    return ratio(contentBlamed, content);
}
double DiagnosisResult::falseBlameConfounded() const
{
    return ratio(confoundedBlamed, confounded);
}

std::pair<std::string, double> DiagnosisResult::bestBaseline() const
{
    std::pair<std::string, double> best{"-", 0.0};
    for (const Baseline& b : baselines()) {
        auto it = all.baselineTop1.find(b.name);
        const double s = all.share(it == all.baselineTop1.end() ? 0 : it->second);
        if (s >= best.second) best = {b.name, s};
    }
    return best;
}

DiagnosisResult runDiagnosis(const DiagnosisOptions& o)
{
    namespace fsys = std::filesystem;
    using analysis::Collapse;
    using analysis::Engine;
    fsys::create_directories(o.dir);
    DiagnosisResult r;
    for (const std::string& m : allocatorMechanisms())
        r.byMechanism[m];
    auto say = [&](const std::string& line) {
        if (o.verbose) o.verbose(line);
    };
    for (uint64_t seed : o.seeds) {
        sim::Config cfg;
        cfg.frames = o.frames;
        cfg.steps = o.steps;
        cfg.seed = seed;
        cfg.mechanisms = o.mechanisms;
        const std::string path =
            (fsys::path(o.dir) / fmt::format("seed{}.fragscope", seed)).string();
        {
            IngestOptions io;
            io.path = path;
            io.sourceKind = "simulator";
            io.sourcePath = fmt::format("bench_diagnosis seed {}", seed);
            io.synthetic = true;
            io.reorderWindowNs = 0;
            Ingest in(io);
            in.begin();
            sim::Simulator(cfg).run(in);
            in.end();
        }
        analysis::LoadOptions lo;
        lo.lookbackFrames = o.lookback;
        lo.useCache = false;
        const auto engine = Engine::open(path, lo);
        for (const Collapse& c : engine->collapses()) {
            const FrameInfo* f = nullptr;
            for (const FrameInfo& x : engine->frames())
                if (x.index == c.firstFrame) f = &x;
            const Truth truth = readTruth(path, c.firstFrame);
            const std::string where = fmt::format("seed {:>4} collapse {:>3}", seed, c.firstFrame);
            if (truth.mechanism.empty() || truth.mechanism == "late_frame") {
                ++r.ambiguous;
                ++r.noCause;
                say(where + ": no recorded cause (ambiguous)");
                continue;
            }
            const bool allocatorBeside =
                std::any_of(truth.otherCauses.begin(), truth.otherCauses.end(),
                            [](const std::string& m) { return !engineMechanism(m).empty(); });
            if (truth.mechanism == "content" && allocatorBeside) {
                // The content and an allocator mechanism both lowered the frame: neither a
                // content-caused collapse nor one the allocator alone caused.
                ++r.ambiguous;
                ++r.contentAndAllocator;
                say(where + ": content and " + truth.otherCauses.front() + " (ambiguous)");
                continue;
            }
            const auto q0 = std::chrono::steady_clock::now();
            const auto rep = engine->collapseReport(c.firstFrame);
            r.queryMs +=
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - q0)
                    .count();
            ++r.queries;
            const bool related = rep && rep->verdict.allocatorRelated;
            bool standsOut = false; // a change or explanation row stands out, common or not
            if (rep)
                for (const Precursor& p : rep->precursors)
                    standsOut = standsOut || (p.evidence.standsOut &&
                                              (p.role == analysis::PrecursorRole::Effect ||
                                               p.role == analysis::PrecursorRole::Explanation));
            auto& ignoring = r.ignoringBaseRates;
            ignoring.called += standsOut;
            const std::string headline = rep ? rep->verdict.headline : std::string("no report");
            if (truth.mechanism == "content") {
                ++r.content;
                r.contentBlamed += related;
                r.calledAllocator += related;
                ignoring.contentBlamed += standsOut;
                if (!truth.benign.empty()) {
                    ++r.confounded;
                    r.confoundedBlamed += related;
                    ignoring.confoundedBlamed += standsOut;
                }
                std::string benign;
                for (const std::string& b : truth.benign)
                    benign += (benign.empty() ? " (benign: " : ", ") + b;
                say(fmt::format("{}: content{}{} -> {}", where, benign, benign.empty() ? "" : ")",
                                headline));
                continue;
            }
            Tally& t = r.byMechanism[truth.mechanism];
            ++t.collapses;
            ++r.all.collapses;
            r.calledAllocator += related;
            r.calledRight += related;
            r.recalled += related;
            ignoring.right += standsOut;
            if (!rep || !f) { // cannot be scored: a miss
                ++r.noReport;
                continue;
            }
            const int rank = rankOf(rep->precursors, truth, *f);
            const bool hit1 = related && rank == 1, hit3 = related && rank >= 1 && rank <= 3;
            t.top1 += hit1;
            t.top3 += hit3;
            t.rankedFirst += rank == 1;
            r.all.rankedFirst += rank == 1;
            r.all.top1 += hit1;
            r.all.top3 += hit3;
            const bool verdictRight = rep->verdict.mechanism == engineMechanism(truth.mechanism);
            t.verdictRight += verdictRight;
            r.all.verdictRight += verdictRight;
            std::string baselineRanks;
            for (const Baseline& b : baselines()) {
                const int br = rankOf(b.order(rep->precursors), truth, *f);
                t.baselineTop1[b.name] += br == 1;
                r.all.baselineTop1[b.name] += br == 1;
                baselineRanks += fmt::format(" {}={}", b.name, br);
            }
            say(fmt::format("{}: {:<19} rank {:>2} ({}){}; verdict: {}", where, truth.mechanism,
                            rank, related ? "allocator" : "not", baselineRanks, headline));
        }
        if (!o.keep) fsys::remove(path);
    }
    return r;
}

std::vector<std::string> missedGoals(const DiagnosisResult& r)
{
    std::vector<std::string> missed;
    auto pct = [](double s) { return fmt::format("{:.1f} %", 100 * s); };
    if (r.all.collapses == 0) missed.push_back("no allocator-caused collapse was scored");
    for (const auto& [m, t] : r.byMechanism) {
        if (t.collapses == 0) continue;
        if (t.share(t.top1) < kTop1Goal)
            missed.push_back(
                fmt::format("{}: top-1 {} < {}", m, pct(t.share(t.top1)), pct(kTop1Goal)));
        if (t.share(t.top3) < kTop3Goal)
            missed.push_back(
                fmt::format("{}: top-3 {} < {}", m, pct(t.share(t.top3)), pct(kTop3Goal)));
    }
    if (r.calledAllocator > 0 && r.precision() < kPrecisionGoal)
        missed.push_back(
            fmt::format("verdict precision {} < {}", pct(r.precision()), pct(kPrecisionGoal)));
    if (r.falseBlameConfounded() > kConfoundedBlameGoal)
        missed.push_back(fmt::format("false blame on confounded content collapses {} > {}",
                                     pct(r.falseBlameConfounded()), pct(kConfoundedBlameGoal)));
    const auto [best, bestShare] = r.bestBaseline();
    if (r.all.share(r.all.top1) < bestShare + kBaselineMargin)
        missed.push_back(fmt::format("top-1 {} is not 20 points above the best baseline ({} {})",
                                     pct(r.all.share(r.all.top1)), best, pct(bestShare)));
    return missed;
}

std::string diagnosisJson(const DiagnosisResult& r)
{
    JsonWriter j;
    j.beginObject();
    j.key("mechanisms").beginObject();
    for (const auto& [m, t] : r.byMechanism) {
        j.key(m).beginObject();
        j.field("collapses", t.collapses);
        j.field("top1", t.share(t.top1));
        j.field("top3", t.share(t.top3));
        j.field("verdict_names_mechanism", t.share(t.verdictRight));
        j.field("ranked_first", t.share(t.rankedFirst));
        j.endObject();
    }
    j.endObject();
    j.key("all").beginObject();
    j.field("collapses", r.all.collapses);
    j.field("top1", r.all.share(r.all.top1));
    j.field("top3", r.all.share(r.all.top3));
    j.field("ranked_first", r.all.share(r.all.rankedFirst));
    j.endObject();
    j.field("verdict_precision", r.precision());
    j.field("verdict_recall", r.recall());
    j.field("called_allocator_related", r.calledAllocator);
    j.field("content_collapses", r.content);
    j.field("false_blame", r.falseBlame());
    j.field("confounded_content_collapses", r.confounded);
    j.field("false_blame_confounded", r.falseBlameConfounded());
    j.key("ambiguous").beginObject();
    j.field("total", r.ambiguous);
    j.field("no_recorded_cause", r.noCause);
    j.field("content_and_allocator", r.contentAndAllocator);
    j.endObject();
    j.field("no_report", r.noReport);
    const auto& ig = r.ignoringBaseRates;
    j.key("ignoring_base_rates").beginObject();
    j.field("verdict_precision", ratio(ig.right, ig.called));
    j.field("verdict_recall", ratio(ig.right, r.all.collapses));
    j.field("false_blame", ratio(ig.contentBlamed, r.content));
    j.field("false_blame_confounded", ratio(ig.confoundedBlamed, r.confounded));
    j.endObject();
    j.key("baselines").beginObject();
    for (const Baseline& b : baselines()) {
        auto it = r.all.baselineTop1.find(b.name);
        j.key(b.name)
            .beginObject()
            .field("top1", r.all.share(it == r.all.baselineTop1.end() ? 0 : it->second))
            .endObject();
    }
    j.endObject();
    const std::vector<std::string> missed = missedGoals(r);
    j.key("goals_missed").beginArray();
    for (const std::string& m : missed)
        j.value(m);
    j.endArray();
    j.field("goals_met", missed.empty());
    j.endObject();
    return j.str();
}

} // namespace fs::bench
