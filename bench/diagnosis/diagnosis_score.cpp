#include "diagnosis_score.h"

#include "core/store/catalog.h"
#include "core/store/session.h"

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
    const Session s = Session::open(path);
    for (const store::SimTruthCauseRow& c : store::simTruthCauses(s, frame)) {
        if (t.mechanism.empty()) {
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
