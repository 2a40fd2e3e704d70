// Precursors of a collapse, ranked by evidence (docs/analysis.md "Precursors", "Ranking" and
// "Verdict"): every event in the window becomes a row, events of the same signature folded into
// one; verdict.cpp measures each row against the healthy frames before the window and ranks them.
#include "precursors.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "core/format.h"
#include "core/store/allocations.h"
#include "core/store/kernels.h"
#include "core/store/ooms.h"

namespace fs::analysis {

namespace {

// Healthy frames the novelty is measured against: the newest ones before the window. Enough to
// tell "every frame" from "this frame" while keeping a collapse query cheap on long runs.
constexpr size_t kBaselineFrames = 16;
// Healthy frames the base rates are measured on: the whole run's, evenly spaced when there are
// more (a rate of 5 % is measured to about 1 % on 512 frames; `report` on a long run asks for
// every collapse).
constexpr size_t kRunFrames = 512;

struct Raw
{
    Precursor p;
    std::string signature; // the same thing in another frame has the same signature
};

// log2 size class: the smallest k with size < 2^(k+1) (63 at most).
int sizeClass(uint64_t size)
{
    int k = 0;
    while (k < 63 && (uint64_t{2} << k) <= size)
        ++k;
    return k;
}

// The role of an allocation for signatures: its tag, else its log2 size class (sizes breathe
// from frame to frame; the class does not).
std::string roleOf(const std::string& tag, uint64_t size)
{
    if (!tag.empty()) return "tag:" + tag;
    return fmt::format("size:2^{}", sizeClass(size));
}

// An allocator event that makes a row: a region created or released, or an allocation that cut
// the largest free fragment (and was smaller than it).
struct Step
{
    size_t track;
    ReplayEvent kind;
    uint32_t index; // into the track's allocs (Alloc) or regions
    int64_t time;
    uint64_t largestBefore, largestAfter;
    double ratioBefore, ratioAfter;
};

// Each track's part of a signature: "device|level".
std::vector<std::string> trackKeys(const Engine::Impl& d)
{
    std::vector<std::string> out;
    for (const TrackData& td : d.tracks)
        out.push_back(fmt::format("{}|{}", td.device, static_cast<int>(td.level)));
    return out;
}

// The events of [begin, end] that make rows (onStep) and the moved blocks of frame jumpFrame
// (onJumps(track, pairs)), track by track. Calls go forward in time, so one replayer per track
// (`replayers`, kept by the caller) continues from where the previous call left it instead of
// rebuilding from a checkpoint. marks: instants in [begin - 1, end], ascending; atMark(track,
// mark, state) sees each track's state after every event <= the mark, taken on the way (what a
// seek to it would give).
template <typename OnStep, typename OnJumps>
void walk(const Engine::Impl& d, int64_t begin, int64_t end, int64_t jumpFrame,
          std::vector<std::unique_ptr<Replayer>>& replayers, const std::vector<int64_t>& marks,
          const std::function<void(size_t, size_t, const FragState&)>& atMark, OnStep&& onStep,
          OnJumps&& onJumps)
{
    replayers.resize(d.tracks.size());
    for (size_t ti = 0; ti < d.tracks.size(); ++ti) {
        const TrackData& td = d.tracks[ti];
        if (!replayers[ti]) replayers[ti] = std::make_unique<Replayer>(td);
        Replayer& r = *replayers[ti];
        r.seek(begin - 1);
        uint64_t largest = r.state().largest();
        double ratio = r.state().ratio();
        auto hook = [&](ReplayEvent kind, uint32_t i, int64_t t) {
            const uint64_t now = r.state().largest();
            const double ratioBefore = ratio;
            ratio = r.state().ratio();
            const bool region =
                kind == ReplayEvent::RegionCreate || kind == ReplayEvent::RegionDestroy;
            // A split leaves part of the fragment free: a block that fills the largest fragment
            // exactly uses it rather than splitting it.
            if (region ||
                (kind == ReplayEvent::Alloc && now < largest && td.allocs[i].size < largest))
                onStep(Step{ti, kind, i, t, largest, now, ratioBefore, ratio});
            largest = now; // most events make no row (a row is a whole Precursor)
        };
        for (size_t m = 0; m < marks.size(); ++m) {
            r.advanceTo(marks[m], hook);
            atMark(ti, m, r.state());
        }
        r.advanceTo(end, hook);
        // Same-role allocations that moved further than their own size.
        if (jumpFrame != kNoTime) onJumps(ti, d.rolePairs(td, jumpFrame, true));
    }
}

std::string splitSignature(const std::string& track, const std::string& tag, uint64_t size)
{
    return fmt::format("split|{}|{}", track, roleOf(tag, size));
}
std::string jumpSignature(const Engine::Impl& d, const std::string& track,
                          const Engine::Impl::RoleRow& r)
{
    return fmt::format("jump|{}|{}", track, d.roleText(r, false));
}
std::string regionSignature(const std::string& track, uint64_t address)
{
    return fmt::format("region|{}|{:#x}", track, address);
}
std::string oomSignature(uint32_t device)
{
    return fmt::format("oom|{}", device);
}

// Allocator events of [begin, end] (and the address jumps of frame jumpFrame): the rows, with
// evidence.largestEffect / kernelEffect filled (walk() for the arguments).
std::vector<Raw> detect(const Engine::Impl& d, int64_t begin, int64_t end, int64_t jumpFrame,
                        std::vector<std::unique_ptr<Replayer>>& replayers,
                        const std::vector<int64_t>& marks,
                        const std::function<void(size_t, size_t, const FragState&)>& atMark)
{
    std::vector<Raw> out;
    std::vector<std::tuple<size_t, size_t, uint32_t>> splits; // (row, track, block)
    const std::vector<std::string> tracks = trackKeys(d);
    auto onStep = [&](const Step& e) {
        const TrackData& td = d.tracks[e.track];
        const uint64_t largest = e.largestBefore, now = e.largestAfter;
        Raw x;
        x.p.time = e.time;
        x.p.device = td.device;
        x.p.level = td.level;
        x.p.evidence.largestEffect =
            largest > now ? static_cast<double>(largest - now) / static_cast<double>(largest) : 0.0;
        x.p.evidence.largestDropBytes = largest > now ? largest - now : 0;
        x.p.evidence.fragmentationJump = e.ratioAfter - e.ratioBefore;
        if (e.kind == ReplayEvent::RegionCreate || e.kind == ReplayEvent::RegionDestroy) {
            const RegionRec& g = td.regions[e.index];
            const bool created = e.kind == ReplayEvent::RegionCreate;
            x.p.kind = created ? PrecursorKind::RegionCreated : PrecursorKind::RegionReleased;
            x.p.address = g.address;
            x.p.size = g.size;
            x.p.description =
                created ? fmt::format("new {} region of {} at {:#x}", regionKindName(g.kind),
                                      humanBytes(g.size), g.address)
                        : fmt::format("{} {} region of {} at {:#x}",
                                      td.level == Level::Pool ? "pool trim: released" : "released",
                                      regionKindName(g.kind), humanBytes(g.size), g.address);
            x.signature = regionSignature(tracks[e.track], g.address);
        } else {
            const Alloc& a = td.allocs[e.index];
            x.p.kind = PrecursorKind::SplitLargest;
            x.p.address = a.address;
            x.p.size = a.size;
            x.p.allocationId = a.id;
            x.p.description =
                fmt::format("allocation of {} at {:#x} cut the largest free fragment from {} to {}",
                            humanBytes(a.size), a.address, humanBytes(largest), humanBytes(now));
            splits.emplace_back(out.size(), e.track, e.index);
        }
        out.push_back(std::move(x));
    };
    auto onJumps = [&](size_t ti, const Engine::Impl::RolePairs& moved) {
        const TrackData& td = d.tracks[ti];
        for (const auto& [bi, ni] : moved.pairs) {
            const Engine::Impl::RoleRow &was = moved.before->rows[bi], &is = moved.now->rows[ni];
            Raw x;
            x.p.kind = PrecursorKind::AddressJump;
            x.p.time = begin;
            x.p.device = td.device;
            x.p.level = td.level;
            x.p.address = is.address;
            x.p.size = is.size;
            x.p.allocationId = is.id;
            x.p.description =
                fmt::format("{} moved {} ({:#x} -> {:#x})", d.roleText(is),
                            humanBytes(is.address > was.address ? is.address - was.address
                                                                : was.address - is.address),
                            was.address, is.address);
            x.signature = jumpSignature(d, tracks[ti], is);
            out.push_back(std::move(x));
        }
    };
    walk(d, begin, end, jumpFrame, replayers, marks, atMark, onStep, onJumps);
    for (const auto& [k, ti, i] : splits)
        out[k].signature =
            splitSignature(tracks[ti], d.tagOf(d.tracks[ti].allocs[i]), out[k].p.size);
    // The OOMs in [begin, end] (in time order; fold() orders the rows of a signature by score and
    // time, and an OOM's score depends on its time only).
    std::lock_guard lock(d.dbMutex);
    for (const store::OomRow& o : d.oomsBetween(begin, end)) {
        const uint64_t req = o.requestedBytes.value_or(0);
        Raw x;
        x.p.kind = PrecursorKind::Oom;
        x.p.time = o.timeNs;
        x.p.device = static_cast<uint32_t>(o.device);
        x.p.level = static_cast<Level>(o.level.value_or(0));
        x.p.size = req;
        // A request that could not be served at all: no block was large enough, and the work
        // that needed it could not run as written.
        x.p.evidence.largestEffect = 1;
        x.p.evidence.kernelEffect = 1;
        x.p.description = fmt::format("out of memory: {} requested, {} free on the device",
                                      humanBytes(req), humanBytes(o.deviceFreeBytes.value_or(0)));
        x.signature = oomSignature(x.p.device);
        out.push_back(std::move(x));
    }
    return out;
}

// One row for the rows of the same signature: the best scored, with the count and a summary.
Precursor fold(std::vector<Precursor>& rows)
{
    std::stable_sort(rows.begin(), rows.end(), [](const Precursor& a, const Precursor& b) {
        return a.score != b.score ? a.score > b.score : a.time < b.time;
    });
    Precursor best = rows.front();
    best.count = static_cast<int64_t>(rows.size());
    if (rows.size() == 1) return best;
    if (best.kind == PrecursorKind::RegionCreated || best.kind == PrecursorKind::RegionReleased) {
        int64_t created = 0, released = 0;
        uint64_t lo = best.size, hi = best.size;
        for (const Precursor& p : rows) {
            (p.kind == PrecursorKind::RegionCreated ? created : released) += 1;
            lo = std::min(lo, p.size);
            hi = std::max(hi, p.size);
        }
        const std::string sizes =
            lo == hi ? humanBytes(lo) : fmt::format("{} to {}", humanBytes(lo), humanBytes(hi));
        if (created && released)
            best.description = fmt::format("segment {:#x} ({}) released and re-created {}x",
                                           best.address, sizes, std::min(created, released));
        else
            best.description = fmt::format("segment {:#x} ({}) {} {}x", best.address, sizes,
                                           created ? "created" : "released", rows.size());
        return best;
    }
    best.description += fmt::format(" (and {} more like it in the window)", rows.size() - 1);
    return best;
}

// The distinct signatures of a healthy frame's events: detect()'s, from numbers (a frame has
// hundreds of rows and a few dozen signatures; `report` asks for thousands of frames).
std::vector<std::string> signaturesOf(const Engine::Impl& d, const FrameInfo& h,
                                      std::vector<std::unique_ptr<Replayer>>& replayers)
{
    std::vector<std::tuple<size_t, uint64_t>> regions;               // (track, address)
    std::vector<std::tuple<size_t, uint32_t, int, uint64_t>> splits; // (track, tag, class, size)
    std::vector<std::tuple<size_t, uint32_t, uint64_t>> jumps;       // (track, tag class, size)
    std::vector<std::string> out;
    const std::vector<std::string> tracks = trackKeys(d);
    auto onStep = [&](const Step& e) {
        const TrackData& td = d.tracks[e.track];
        if (e.kind == ReplayEvent::RegionCreate || e.kind == ReplayEvent::RegionDestroy) {
            regions.emplace_back(e.track, td.regions[e.index].address);
            return;
        }
        const Alloc& a = td.allocs[e.index];
        if (a.tag == kTagById) // its text is read by the block's id
            out.push_back(splitSignature(tracks[e.track], d.tagOf(a), a.size));
        else // with the size class: an empty tag text falls back on it
            splits.emplace_back(e.track, a.tag, sizeClass(a.size), a.size);
    };
    auto onJumps = [&](size_t ti, const Engine::Impl::RolePairs& moved) {
        for (const auto& [bi, ni] : moved.pairs) {
            const Engine::Impl::RoleRow& is = moved.now->rows[ni];
            jumps.emplace_back(ti, is.tagClass, is.tagClass ? 0 : is.size);
        }
    };
    walk(d, h.start, h.end, h.index, replayers, {}, nullptr, onStep, onJumps);
    auto distinct = [](auto& v) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
    };
    distinct(regions);
    distinct(jumps);
    std::sort(splits.begin(), splits.end());
    for (size_t k = 0; k < splits.size(); ++k) { // one per (track, tag, class)
        const auto& [ti, tag, cls, size] = splits[k];
        if (k > 0 && std::get<0>(splits[k - 1]) == ti && std::get<1>(splits[k - 1]) == tag &&
            std::get<2>(splits[k - 1]) == cls)
            continue;
        out.push_back(
            splitSignature(tracks[ti], tag == kNoTag ? std::string() : d.text(tag), size));
    }
    for (const auto& [ti, address] : regions)
        out.push_back(regionSignature(tracks[ti], address));
    for (const auto& [ti, tagClass, size] : jumps)
        out.push_back(jumpSignature(d, tracks[ti], Engine::Impl::RoleRow{0, 0, size, tagClass, 0}));
    {
        std::lock_guard lock(d.dbMutex);
        for (const store::OomRow& o : d.oomsBetween(h.start, h.end))
            out.push_back(oomSignature(static_cast<uint32_t>(o.device)));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

} // namespace

Engine::Impl::Replayers Engine::Impl::borrowReplayers() const
{
    std::lock_guard lock(replayersMutex);
    if (idleReplayers.empty()) return {};
    Replayers r = std::move(idleReplayers.back());
    idleReplayers.pop_back();
    return r;
}

void Engine::Impl::returnReplayers(Replayers r) const
{
    std::lock_guard lock(replayersMutex);
    if (idleReplayers.size() < 4) idleReplayers.push_back(std::move(r)); // one per thread
}

CollapseReport Engine::frameReport(int64_t frame) const
{
    return frameReport(frame, d_->options.rules);
}

CollapseReport Engine::frameReport(int64_t frame, const std::vector<CollapseRule>& rules) const
{
    d_->ensureRows(); // the ranking walks every track's allocations
    CollapseReport rep;
    rep.frame = frame;
    rep.collapse = {frame, frame, {}};
    rep.caveats = d_->resultCaveats();
    const auto& fr = d_->frames;
    auto it =
        std::find_if(fr.begin(), fr.end(), [&](const FrameInfo& f) { return f.index == frame; });
    if (it == fr.end() || it->start == kNoTime) {
        rep.caveats.notes.push_back(
            fmt::format("frame {} has no time range in this session", frame));
        return rep;
    }
    // Frames in time order; the window starts lookback frames earlier (session begin when the
    // frame has fewer predecessors).
    std::vector<const FrameInfo*> timed;
    for (const FrameInfo& f : fr)
        if (f.start != kNoTime) timed.push_back(&f);
    std::stable_sort(timed.begin(), timed.end(),
                     [](const FrameInfo* a, const FrameInfo* b) { return a->start < b->start; });
    const auto pos =
        static_cast<int64_t>(std::find(timed.begin(), timed.end(), &*it) - timed.begin());
    const int64_t lookback = std::max<int64_t>(d_->options.lookbackFrames, 0);
    rep.windowBegin =
        pos - lookback >= 0 ? timed[static_cast<size_t>(pos - lookback)]->start : d_->timeBegin;
    rep.windowEnd = it->end;
    const FrameInfo* prev = pos > 0 ? timed[static_cast<size_t>(pos - 1)] : nullptr;

    // The healthy baseline: frames before the window that break none of the given rules (a
    // frame breaks a rule exactly when it belongs to one of their collapses). Not the open()
    // rules' FrameInfo::breaksRule: the ranking must follow a rule change.
    // A rule that fires on most frames makes no frame unhealthy (CommonRule).
    const std::vector<CollapseRule> active = splitRules(rules).active;
    std::vector<const FrameInfo*> baseline;
    for (int64_t q = pos - 1; q >= 0 && baseline.size() < kBaselineFrames; --q) {
        const FrameInfo* f = timed[static_cast<size_t>(q)];
        if (f->start < rep.windowBegin && !breaksAnyRule(f->metrics, active)) baseline.push_back(f);
    }
    std::reverse(baseline.begin(), baseline.end());
    for (const FrameInfo* f : baseline)
        rep.baselineFrames.push_back(f->index);
    if (baseline.empty())
        rep.caveats.notes.push_back("no healthy frame before the precursor window: every event "
                                    "counts as new (novelty 1)");

    // How often each signature happened in the healthy frames.
    std::unordered_map<std::string, int64_t> seen;
    struct Borrowed
    {
        const Engine::Impl& d;
        Engine::Impl::Replayers set = d.borrowReplayers();
        ~Borrowed() { d.returnReplayers(std::move(set)); }
    } borrowed{*d_};
    Engine::Impl::Replayers& replayers = borrowed.set;
    for (const FrameInfo* h : baseline)
        for (const std::string& sig : signaturesOf(*d_, *h, replayers))
            ++seen[sig];
    const auto healthy = static_cast<int64_t>(baseline.size());
    // Closeness counts frames, not nanoseconds: what happens inside the collapsed frame shapes
    // its computation; an earlier event acts only through the state it leaves behind, and each
    // frame boundary in between weakens the link (1/2 in f-1, 1/3 in f-2, ...).
    auto closeness = [&](int64_t t) {
        if (t >= it->start) return 1.0;
        const auto after =
            std::upper_bound(timed.begin(), timed.end(), t,
                             [](int64_t v, const FrameInfo* f) { return v < f->start; });
        const int64_t in = after - timed.begin() - 1; // the frame holding t (-1: before all)
        return 1.0 / (1.0 + static_cast<double>(pos - in));
    };

    // Allocator events of the window, folded by signature; novelty counts the healthy frames
    // that had the same signature (shown with each row; the ranking uses the departures).
    // The state diff end(f-1) -> end(f), taken on the way through the window when both ends lie
    // in it (a seek to each would replay from a checkpoint per track).
    const int64_t beforeT = prev ? prev->end : it->start - 1, afterT = it->end;
    std::vector<int64_t> marks;
    for (const int64_t t : {beforeT, afterT})
        if (t >= rep.windowBegin - 1 && t <= rep.windowEnd) marks.push_back(t);
    std::sort(marks.begin(), marks.end());
    marks.erase(std::unique(marks.begin(), marks.end()), marks.end());
    rep.diff.resize(d_->tracks.size());
    auto atMark = [&](size_t ti, size_t m, const FragState& st) {
        const State s = d_->stateOf(*this, d_->tracks[ti], st, marks[m]);
        if (marks[m] == beforeT) rep.diff[ti].before = s;
        if (marks[m] == afterT) rep.diff[ti].after = s;
    };
    std::map<std::string, std::vector<Precursor>> bySignature;
    for (Raw& x : detect(*d_, rep.windowBegin, rep.windowEnd, frame, replayers, marks, atMark)) {
        auto s = seen.find(x.signature);
        x.p.evidence.seenInHealthy = s == seen.end() ? 0 : s->second;
        x.p.evidence.healthyFrames = healthy;
        x.p.evidence.novelty = healthy ? 1.0 - static_cast<double>(x.p.evidence.seenInHealthy) /
                                                   static_cast<double>(healthy)
                                       : 1.0;
        x.p.background = healthy > 0 && x.p.evidence.seenInHealthy == healthy;
        // Folding keeps the row closest to the onset that moved the largest block most.
        x.p.score = closeness(x.p.time) * (1 + x.p.evidence.largestEffect);
        bySignature[x.signature].push_back(std::move(x.p));
    }
    std::vector<Precursor> p;
    for (auto& [sig, rows] : bySignature)
        p.push_back(fold(rows));
    for (size_t ti = 0; ti < d_->tracks.size(); ++ti) {
        StateDiff& diff = rep.diff[ti];
        diff.device = d_->tracks[ti].device;
        diff.level = d_->tracks[ti].level;
        if (!std::binary_search(marks.begin(), marks.end(), beforeT))
            diff.before = stateAt(diff.device, diff.level, beforeT);
        if (!std::binary_search(marks.begin(), marks.end(), afterT))
            diff.after = stateAt(diff.device, diff.level, afterT);
    }

    // Kernel variants new in the collapsed frame or in the lookback frames before it (listed for
    // reference; the ranking uses the shifts below).
    std::vector<const FrameInfo*> window;
    for (int64_t q = std::max<int64_t>(0, pos - lookback); q <= pos; ++q) {
        window.push_back(timed[static_cast<size_t>(q)]);
        for (const KernelSummary& k : kernelsInFrame(timed[static_cast<size_t>(q)]->index))
            if (k.newInFrame) rep.newKernels.push_back(k);
    }
    for (Precursor& s : kernelShifts(*d_, *it, baseline)) {
        s.background = healthy > 0 && s.evidence.seenInHealthy == healthy;
        p.push_back(std::move(s));
    }
    // Every row measured against the healthy frames (verdict.cpp), and its base rate against
    // the healthy frames of the whole run (at most kRunFrames, evenly spaced over it).
    std::vector<const FrameInfo*> runHealthy;
    for (const FrameInfo* f : timed)
        if (!breaksAnyRule(f->metrics, rules)) runHealthy.push_back(f);
    if (runHealthy.size() > kRunFrames) {
        std::vector<const FrameInfo*> spaced;
        for (size_t i = 0; i < kRunFrames; ++i)
            spaced.push_back(runHealthy[i * runHealthy.size() / kRunFrames]);
        runHealthy = std::move(spaced);
    }
    measureRows(*this, *d_, p, baseline, window, runHealthy, closeness);

    // Graph launches that overlapped the allocator events above, one row per graph: half the
    // score of the best event they carried, so they rank just below it. Context only: they
    // never stand out by themselves.
    {
        std::map<int64_t, Precursor> graphs;
        std::lock_guard lock(d_->dbMutex);
        std::map<int64_t, int64_t> carried;
        for (const store::GraphLaunchRow& gl :
             store::graphLaunchesIn(*d_->session, rep.windowBegin, rep.windowEnd)) {
            const int64_t s = gl.startNs, e = gl.endNs;
            const int64_t g = gl.graphId ? static_cast<int64_t>(*gl.graphId) : -1;
            const Precursor* best = nullptr;
            int n = 0;
            for (const Precursor& q : p)
                if (q.time >= s && q.time <= e && q.kind != PrecursorKind::KernelVariantShift &&
                    q.kind != PrecursorKind::AddressJump && q.kind != PrecursorKind::GraphLaunch &&
                    q.kind != PrecursorKind::GraphChange) {
                    if (!best || q.score > best->score) best = &q;
                    ++n;
                }
            if (!best) continue;
            carried[g] += n;
            auto [gi, added] = graphs.try_emplace(g);
            Precursor& row = gi->second;
            if (added || best->score / 2 > row.score) {
                row.kind = PrecursorKind::GraphLaunch;
                row.role = PrecursorRole::Context;
                row.time = s;
                row.device = static_cast<uint32_t>(gl.device);
                row.level = Level::Driver;
                row.evidence = best->evidence;
                row.evidence.standsOut = false;
                row.score = best->score / 2;
                row.background = best->background;
            }
            if (!added) ++row.count;
        }
        for (auto& [g, row] : graphs) {
            row.description = fmt::format("graph {} {} overlapped {} of these events", g,
                                          row.count == 1 ? std::string("launch")
                                                         : fmt::format("launches ({}x)", row.count),
                                          carried[g]);
            p.push_back(std::move(row));
        }
    }

    std::vector<int64_t> healthyWindow;
    for (const FrameInfo* w : window)
        if (w->index != frame && !breaksAnyRule(w->metrics, rules))
            healthyWindow.push_back(w->index);
    rankAndJudge(p, rep, healthy, healthyWindow);
    constexpr size_t kMaxPrecursors = 200;
    if (p.size() > kMaxPrecursors) p.resize(kMaxPrecursors);
    rep.precursors = std::move(p);
    return rep;
}

} // namespace fs::analysis
