#include "compare.h"

#include "categories.h"
#include "core/store/ooms.h"
#include "core/store/session.h"
#include "engine.h"
#include "explore.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace fs::analysis {

namespace {

struct Side
{
    std::shared_ptr<const Engine> eng;
    SideSummary sum;
    std::vector<int64_t> oomTimes; // of the compared device, sorted
};

Side load(const std::string& path, std::shared_ptr<const Engine> eng)
{
    Side s;
    s.eng = eng ? std::move(eng) : Engine::open(path);
    SideSummary& m = s.sum;
    m.path = path;
    const auto it = s.eng->summary().meta.find("label");
    if (it != s.eng->summary().meta.end()) m.label = it->second;
    m.synthetic = s.eng->summary().synthetic;
    m.whatIf = s.eng->summary().meta.count("whatif.source") > 0;
    if (auto tr = s.eng->defaultTrack(0)) {
        m.device = tr->device;
        m.level = tr->level;
    }
    m.frames = static_cast<int64_t>(s.eng->frames().size());
    m.frameMetrics = s.eng->summary().frameMetrics;
    m.collapses = static_cast<int64_t>(s.eng->collapses().size());
    s.oomTimes = store::oomTimes(Session::open(path, false), m.device);
    m.ooms = static_cast<int64_t>(s.oomTimes.size());
    m.figures = s.eng->trackSummary(m.device, m.level).figures;
    return s;
}

int64_t oomsIn(const Side& s, int64_t from, int64_t to)
{
    return std::upper_bound(s.oomTimes.begin(), s.oomTimes.end(), to) -
           std::lower_bound(s.oomTimes.begin(), s.oomTimes.end(), from);
}

std::map<int64_t, PointFigures> perFrame(const Side& s)
{
    std::map<int64_t, PointFigures> out;
    for (const FrameInfo& f : s.eng->frames()) {
        PointFigures p;
        p.collapsed = !s.sum.whatIf && f.collapse >= 0; // a replay's are not its own
        p.ooms = oomsIn(s, f.start, f.end);
        for (const FrameAllocator& fa : f.allocator)
            if (fa.device == s.sum.device && fa.level == s.sum.level) {
                p.reserved = fa.atEnd.reservedBytes;
                p.fragmentation = fa.atEnd.fragmentationRatio;
                p.largestFree = fa.atEnd.largestFreeFragmentBytes;
            }
        out[f.index] = p;
    }
    return out;
}

PointFigures at(const Side& s, int64_t t, int64_t prev)
{
    const State st = s.eng->stateAt(s.sum.device, s.sum.level, t);
    PointFigures p;
    p.reserved = st.reservedBytes;
    p.fragmentation = st.fragmentationRatio;
    p.largestFree = st.largestFreeFragmentBytes;
    p.ooms = oomsIn(s, prev + 1, t);
    return p;
}

PointFigures absent()
{
    PointFigures p;
    p.present = false;
    return p;
}

} // namespace

Comparison compareSessions(const std::string& a, const std::string& b, int samples,
                           std::shared_ptr<const Engine> engineA,
                           std::shared_ptr<const Engine> engineB)
{
    const Side A = load(a, std::move(engineA)), B = load(b, std::move(engineB));
    Comparison c;
    c.a = A.sum;
    c.b = B.sum;
    SummaryDifference& diff = c.difference;
    diff.figures = summaryDelta(A.sum.figures, B.sum.figures);
    diff.collapses = B.sum.collapses - A.sum.collapses;
    diff.ooms = B.sum.ooms - A.sum.ooms;
    for (const SideSummary* s : {&c.a, &c.b})
        if (s->whatIf && s->frames > 0)
            c.notes.push_back(s->path + " is a what-if replay: its frames' quality metrics, if "
                                        "any, are the recorded run's, so its collapses are "
                                        "unknown, not the recorded run's");
        else if (s->frames > 0 && s->frameMetrics == 0)
            c.notes.push_back(s->path + " has frames but no per-frame quality metrics (a what-if "
                                        "replay has none): its collapses are unknown, not zero");
    if (A.sum.level != B.sum.level)
        c.notes.emplace_back("the two sessions' default tracks are at different levels");
    if (A.sum.frames > 0 && B.sum.frames > 0) {
        c.byFrame = true;
        const auto fa = perFrame(A), fb = perFrame(B);
        std::map<int64_t, CompareRow> rows; // every frame of either; the other side absent
        PointFigures none;
        none.present = false;
        for (const auto& [idx, pa] : fa)
            rows[idx] = {idx, pa, none};
        bool differ = fa.size() != fb.size();
        for (const auto& [idx, pb] : fb) {
            auto [it, inserted] = rows.try_emplace(idx, CompareRow{idx, none, pb});
            if (!inserted) it->second.b = pb;
            differ |= inserted;
        }
        for (auto& [idx, r] : rows)
            c.rows.push_back(r);
        if (differ)
            c.notes.emplace_back("the sessions have different frames: a frame only one has shows "
                                 "that one's figures alone");
    } else {
        c.notes.emplace_back("aligned by time from each session's start (not both have frames)");
        const int64_t spanA = A.eng->timeEnd() - A.eng->timeBegin();
        const int64_t spanB = B.eng->timeEnd() - B.eng->timeBegin();
        const int64_t span = std::max<int64_t>({spanA, spanB, 1});
        const int n = std::max(samples, 1);
        int64_t prev = -1;
        for (int k = 1; k <= n; ++k) {
            const int64_t off = span * k / n;
            CompareRow r;
            r.key = off;
            // Past a session's end it has no data: no row repeats its last state.
            r.a = off <= spanA ? at(A, A.eng->timeBegin() + off, A.eng->timeBegin() + prev)
                               : absent();
            r.b = off <= spanB ? at(B, B.eng->timeBegin() + off, B.eng->timeBegin() + prev)
                               : absent();
            prev = off;
            c.rows.push_back(r);
        }
    }
    return c;
}

CallSiteComparison compareCallSites(std::shared_ptr<const Engine> a,
                                    std::shared_ptr<const Engine> b, bool atEnd)
{
    CallSiteComparison out;
    out.atEnd = atEnd;
    std::map<std::string, CallSiteDelta> bySite;
    // One side: its default track's call sites at its peak (or end), through the explorer's
    // grouping (callsites.cpp), sites of one label merged.
    auto side = [&](std::shared_ptr<const Engine> e, int64_t& time, uint64_t& held, bool isA) {
        const std::optional<Track> tr = e->defaultTrack(0);
        time = e->timeEnd();
        if (!tr) return;
        if (!atEnd)
            if (const int64_t p = allocatedPeakTime(*e, tr->device, tr->level); p != kNoTime)
                time = p;
        const Explorer x(std::move(e));
        const CallSiteTable t =
            x.callSites(tr->device, tr->level, time, time, GroupBy::CallSite, std::nullopt);
        out.stacksRecorded = out.stacksRecorded || t.stacksRecorded;
        held = t.heldBytes;
        for (const CallSiteRow& r : t.rows) {
            if (r.heldBytes == 0) continue;
            CallSiteDelta& d = bySite[r.label];
            d.site = r.label;
            (isA ? d.aBytes : d.bBytes) += r.heldBytes;
        }
    };
    side(std::move(a), out.aTime, out.aBytes, true);
    side(std::move(b), out.bTime, out.bBytes, false);
    for (auto& [site, d] : bySite) {
        d.deltaBytes = static_cast<int64_t>(d.bBytes) - static_cast<int64_t>(d.aBytes);
        out.rows.push_back(std::move(d));
    }
    std::sort(out.rows.begin(), out.rows.end(), [](const CallSiteDelta& x, const CallSiteDelta& y) {
        return std::tie(y.deltaBytes, x.site) < std::tie(x.deltaBytes, y.site);
    });
    return out;
}

} // namespace fs::analysis
