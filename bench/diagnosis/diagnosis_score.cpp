#include "diagnosis_score.h"

#include "core/session.h"

#include <algorithm>

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
    Session s = Session::open(path);
    Db& db = s.db();
    if (db.hasTable("sim_truth_causes")) {
        Stmt c = db.prepare("SELECT mechanism, cause_frame FROM sim_truth_causes WHERE frame=?1"
                            " ORDER BY quality_factor, mechanism");
        c.bind(1, frame);
        while (c.step()) {
            if (t.mechanism.empty()) {
                t.mechanism = c.text(0);
                t.causeFrame = c.i64(1);
            } else {
                t.otherCauses.push_back(c.text(0));
            }
        }
    }
    Stmt k = db.prepare(
        "SELECT kernel FROM sim_truth_kernels WHERE frame=?1 AND calls > 0 AND lowers_coherence");
    k.bind(1, frame);
    while (k.step())
        t.causalKernels.insert(k.text(0));
    Stmt o = db.prepare("SELECT ooms FROM sim_truth_frames WHERE frame=?1");
    o.bind(1, frame);
    if (o.step()) t.ooms = o.i64(0);
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

} // namespace

const std::vector<Baseline>& baselines()
{
    static const std::vector<Baseline> b = {
        {"by_bytes", "rows by bytes, largest first", byBytes},
        {"newest_kernel", "kernel shifts first, newest kernel name first", newestKernel},
        {"largest_f_jump", "rows by the rise of F across the event", largestFJump},
        {"largest_free_drop", "rows by the drop of the largest free block", largestFreeDrop},
    };
    return b;
}

} // namespace fs::bench
