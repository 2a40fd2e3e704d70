#include "ranks.h"

#include "core/format.h"
#include "core/store/session.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <regex>
#include <set>

namespace fs::analysis {

const char* rankAlignModeName(RankAlignMode m)
{
    switch (m) {
    case RankAlignMode::Auto:
        return "auto";
    case RankAlignMode::WallClock:
        return "wall_clock";
    case RankAlignMode::Frame:
        return "frame";
    case RankAlignMode::None:
        return "none";
    }
    return "?";
}

std::optional<RankAlignMode> parseRankAlignMode(std::string_view s)
{
    if (s == "auto") return RankAlignMode::Auto;
    if (s == "wall" || s == "wall_clock" || s == "wall-clock") return RankAlignMode::WallClock;
    if (s == "frame") return RankAlignMode::Frame;
    if (s == "none") return RankAlignMode::None;
    return std::nullopt;
}

namespace {

std::optional<int64_t> metaInt(const SessionSummary& s, const std::string& key)
{
    const auto it = s.meta.find(key);
    if (it == s.meta.end() || it->second.empty()) return std::nullopt;
    try {
        size_t used = 0;
        const long long v = std::stoll(it->second, &used);
        if (used != it->second.size()) return std::nullopt;
        return static_cast<int64_t>(v);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::string fileName(const std::string& path)
{
    return std::filesystem::path(path).filename().string();
}

// "2025-01-06 08:00:00.040 UTC" for a CLOCK_REALTIME instant.
std::string wallText(int64_t ns)
{
    const std::time_t secs = static_cast<std::time_t>(ns / 1'000'000'000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return fmt::format("{}.{:03d} UTC", buf, static_cast<int>((ns / 1'000'000) % 1000));
}

// The default track's peak reserved bytes and max F: the summary `report` prints (exact).
void trackFigures(const Engine& e, RankSummary& r)
{
    if (!r.track) return;
    const SummaryFigures f = e.trackSummary(r.track->device, r.track->level).figures;
    r.peakReservedBytes = f.peakReservedBytes;
    r.maxFragmentationRatio = f.maxFragmentationRatio;
}

// The frame of `frames` whose [start, end) holds t, -1 when none does.
int64_t frameAt(const std::vector<FrameInfo>& frames, int64_t t)
{
    for (const FrameInfo& f : frames)
        if (f.start != kNoTime && t >= f.start && t < f.end) return f.index;
    return -1;
}

const FrameInfo* frameByIndex(const std::vector<FrameInfo>& frames, int64_t index)
{
    for (const FrameInfo& f : frames)
        if (f.index == index) return &f;
    return nullptr;
}

// Rank numbers: meta rank when every file has one and no two agree, else rank<N> in every file
// name, else the order given.
std::vector<int> rankNumbers(const std::vector<RankIdentity>& ids, std::vector<std::string>& notes)
{
    std::vector<int> out;
    std::set<int> seen;
    for (const RankIdentity& id : ids)
        if (id.rank && seen.insert(*id.rank).second) out.push_back(*id.rank);
    if (out.size() == ids.size()) return out;
    out.clear();
    for (size_t i = 0; i < ids.size(); ++i)
        out.push_back(static_cast<int>(i));
    notes.push_back("ranks are numbered in the order the files were given (not every file names "
                    "its rank, or two name the same one)");
    return out;
}

// Earlier on the shared axis; a rank without times falls back to frame order, then rank.
bool earlier(const RankEvent& a, const RankEvent& b)
{
    if (a.time != kNoTime && b.time != kNoTime && a.time != b.time) return a.time < b.time;
    if (a.frame != b.frame) return a.frame < b.frame;
    return a.rank < b.rank;
}

void align(RankRun& run, RankAlignMode mode)
{
    std::vector<RankSummary>& rs = run.ranks;
    const RankSummary& ref = rs.front();
    run.referenceRank = ref.rank;
    // Job ids, when files carry them, must agree (every mode but None).
    if (mode != RankAlignMode::None)
        for (const RankSummary& r : rs)
            if (!r.identity.jobId.empty() && !ref.identity.jobId.empty() &&
                r.identity.jobId != ref.identity.jobId)
                throw RankAlignError(fmt::format(
                    "{} and {} are not ranks of one job: their job ids differ ({} vs {}). Give "
                    "--align none to show them side by side anyway.",
                    fileName(ref.path), fileName(r.path), ref.identity.jobId, r.identity.jobId));
    const bool allWall = std::all_of(rs.begin(), rs.end(), [](const RankSummary& r) {
        return r.identity.realtimeOffsetNs.has_value();
    });
    // Frame numbers every rank has, with a time.
    std::set<int64_t> common;
    for (size_t k = 0; k < rs.size(); ++k) {
        std::set<int64_t> mine;
        for (const FrameInfo& f : rs[k].engine->frames())
            if (f.start != kNoTime && (k == 0 || common.count(f.index))) mine.insert(f.index);
        common = std::move(mine);
    }
    const bool ordinal = std::any_of(rs.begin(), rs.end(), [](const RankSummary& r) {
        return r.engine->summary().timeAxis == TimeAxis::Ordinal;
    });
    if (mode == RankAlignMode::Auto) {
        if (allWall && !ordinal)
            mode = RankAlignMode::WallClock;
        else if (!common.empty() && !ordinal)
            mode = RankAlignMode::Frame;
        else {
            std::string why;
            for (const RankSummary& r : rs)
                why += fmt::format("{}{}: {}, {}", why.empty() ? "" : "; ", fileName(r.path),
                                   r.identity.realtimeOffsetNs ? "wall clock" : "no wall clock",
                                   r.frames ? fmt::format("{} frames", r.frames) : "no frames");
            throw RankAlignError(fmt::format(
                "these files share neither a wall clock nor a frame number{} ({}): they cannot "
                "be lined up as ranks of one job. Give --align none to show them side by side "
                "anyway.",
                ordinal ? " on a time axis (some have an ordinal axis)" : "", why));
        }
    }
    run.mode = mode;
    if (mode == RankAlignMode::None) {
        run.basis = "none: each file on its own clock";
        run.notes.push_back("not aligned (--align none): times are each file's own");
        return;
    }
    if (ordinal)
        throw RankAlignError("a file with an ordinal time axis (no timestamps) cannot be lined up "
                             "with others; give --align none");
    if (mode == RankAlignMode::WallClock) {
        for (const RankSummary& r : rs)
            if (!r.identity.realtimeOffsetNs)
                throw RankAlignError(fmt::format(
                    "{} carries no wall clock (no clock_offset_realtime_ns, no agent clock "
                    "calibration, not a PyTorch snapshot with time_us): use --align frame",
                    fileName(r.path)));
        for (RankSummary& r : rs)
            r.offsetNs = *r.identity.realtimeOffsetNs - *ref.identity.realtimeOffsetNs;
        std::set<std::string> sources;
        for (const RankSummary& r : rs)
            sources.insert(r.identity.clockSource);
        run.basis = "wall clock";
        for (const std::string& s : sources)
            run.basis += (s == *sources.begin() ? " (" : ", ") + s;
        run.basis += ")";
        // Ranks of one job run at the same time: recordings that do not overlap are other jobs.
        for (const RankSummary& r : rs) {
            const int64_t b = r.engine->timeBegin() + r.offsetNs;
            const int64_t e = r.engine->timeEnd() + r.offsetNs;
            const int64_t rb = ref.engine->timeBegin(), re = ref.engine->timeEnd();
            if (e < rb || b > re) {
                const int64_t w = *ref.identity.realtimeOffsetNs;
                throw RankAlignError(fmt::format(
                    "{} and {} do not overlap on the wall clock ({} .. {} vs {} .. {}): files of "
                    "different jobs? Give --align none to show them side by side anyway.",
                    fileName(ref.path), fileName(r.path), wallText(rb + w), wallText(re + w),
                    wallText(b + w), wallText(e + w)));
            }
        }
    } else {
        if (common.empty()) {
            std::string have;
            for (const RankSummary& r : rs) {
                const auto& fr = r.engine->frames();
                have += fmt::format(
                    "{}{}: {}", have.empty() ? "" : ", ", fileName(r.path),
                    fr.empty() ? std::string("no frames")
                               : fmt::format("frames {}..{}", fr.front().index, fr.back().index));
            }
            throw RankAlignError(fmt::format(
                "no frame number is common to every file ({}): not ranks of one job? Give "
                "--align none to show them side by side anyway.",
                have));
        }
        run.alignFrame = *common.begin();
        const int64_t refStart = frameByIndex(ref.engine->frames(), run.alignFrame)->start;
        for (RankSummary& r : rs)
            r.offsetNs = refStart - frameByIndex(r.engine->frames(), run.alignFrame)->start;
        run.basis = fmt::format("start of frame {} (the first frame number every file has)",
                                run.alignFrame);
    }
    // Both known: say how well the frame numbering agrees with the wall clock.
    if (allWall && !common.empty()) {
        const int64_t f0 = *common.begin();
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (const RankSummary& r : rs) {
            const int64_t w =
                frameByIndex(r.engine->frames(), f0)->start + *r.identity.realtimeOffsetNs;
            lo = std::min(lo, w);
            hi = std::max(hi, w);
        }
        run.frameSpreadOnWallClockNs = hi - lo;
        run.notes.push_back(fmt::format("on the wall clock, frame {} starts within {:.3f} ms "
                                        "across the ranks",
                                        f0, static_cast<double>(hi - lo) / 1e6));
    }
}

} // namespace

RankIdentity rankIdentity(const SessionSummary& s, const std::string& path)
{
    RankIdentity id;
    if (auto v = metaInt(s, "clock_offset_realtime_ns")) {
        id.realtimeOffsetNs = v;
        id.clockSource = "clock_offset_realtime_ns";
    } else if (auto a = metaInt(s, "agent.clock_offset_realtime_ns")) {
        id.realtimeOffsetNs = a;
        id.clockSource = "the agent's clock calibration";
    } else if (s.timeAxis == TimeAxis::Nanoseconds &&
               std::find(s.sources.begin(), s.sources.end(), "pytorch-snapshot") !=
                   s.sources.end()) {
        // PyTorch stamps trace entries with the wall clock (time_us since the epoch).
        id.realtimeOffsetNs = 0;
        id.clockSource = "PyTorch's time_us";
    }
    if (auto it = s.meta.find("job_id"); it != s.meta.end()) id.jobId = it->second;
    if (auto r = metaInt(s, "rank"); r && *r >= 0 && *r < (1 << 20)) {
        id.rank = static_cast<int>(*r);
    } else {
        static const std::regex re("rank[_-]?([0-9]{1,6})", std::regex::icase);
        const std::string name = fileName(path);
        std::smatch m;
        std::string rest = name;
        while (std::regex_search(rest, m, re)) { // the last one in the name
            id.rank = std::stoi(m[1].str());
            rest = m.suffix().str();
        }
    }
    return id;
}

const RankSummary* RankRun::byRank(int rank) const
{
    for (const RankSummary& r : ranks)
        if (r.rank == rank) return &r;
    return nullptr;
}

RankRun analyseRanks(const std::vector<RankInput>& files, RankAlignMode mode)
{
    RankRun run;
    if (files.empty()) return run;
    std::vector<RankIdentity> ids;
    for (const RankInput& f : files)
        ids.push_back(rankIdentity(f.engine->summary(), f.path));
    const std::vector<int> numbers = rankNumbers(ids, run.notes);
    std::map<const Engine*, std::shared_ptr<const std::vector<OomDiagnosis>>> given;
    for (size_t i = 0; i < files.size(); ++i) {
        RankSummary r;
        r.rank = numbers[i];
        r.path = files[i].path;
        r.identity = ids[i];
        r.engine = files[i].engine;
        r.frames = static_cast<int64_t>(r.engine->frames().size());
        if (files[i].ooms) given[r.engine.get()] = files[i].ooms;
        run.ranks.push_back(std::move(r));
    }
    std::sort(run.ranks.begin(), run.ranks.end(),
              [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
    align(run, mode);

    std::map<int64_t, RankFrame> frames;
    for (RankSummary& r : run.ranks) {
        const Engine& e = *r.engine;
        r.timeBegin = e.timeBegin() + r.offsetNs;
        r.timeEnd = e.timeEnd() + r.offsetNs;
        r.track = e.defaultTrack(0);
        trackFigures(e, r);
        const auto& fr = e.frames();
        for (const Collapse& c : e.collapses()) {
            RankEvent ev;
            ev.rank = r.rank;
            ev.frame = c.firstFrame;
            const FrameInfo* f = frameByIndex(fr, c.firstFrame);
            if (f && f->start != kNoTime) {
                ev.sessionTime = f->start;
                ev.time = f->start + r.offsetNs;
            }
            for (const std::string& b : c.brokenRules)
                ev.detail += (ev.detail.empty() ? "" : ", ") + b;
            r.collapses.push_back(std::move(ev));
        }
        const auto g = given.find(&e);
        const std::vector<OomDiagnosis> asked =
            g == given.end() ? e.ooms() : std::vector<OomDiagnosis>{};
        for (const OomDiagnosis& o : g == given.end() ? asked : *g->second) {
            RankEvent ev;
            ev.rank = r.rank;
            ev.sessionTime = o.time;
            ev.time = o.time + r.offsetNs;
            ev.frame = frameAt(fr, o.time);
            ev.detail = fmt::format("{}, {} requested", o.cause, humanBytes(o.requestedBytes));
            r.ooms.push_back(std::move(ev));
        }
        for (const RankEvent& c : r.collapses)
            if (!run.firstCollapse || earlier(c, *run.firstCollapse)) run.firstCollapse = c;
        for (const RankEvent& o : r.ooms)
            if (!run.firstOom || earlier(o, *run.firstOom)) run.firstOom = o;
        if (r.track && (run.peakReservedMinRank < 0 || r.peakReservedBytes < run.peakReservedMin)) {
            run.peakReservedMin = r.peakReservedBytes;
            run.peakReservedMinRank = r.rank;
        }
        if (r.track && (run.peakReservedMaxRank < 0 || r.peakReservedBytes > run.peakReservedMax)) {
            run.peakReservedMax = r.peakReservedBytes;
            run.peakReservedMaxRank = r.rank;
        }
    }
    // Per frame number: who collapsed, whose collapse began first; who hit an OOM, who first.
    std::map<int64_t, std::pair<RankEvent, int>> firstCollapseIn; // frame -> (onset, rank)
    std::map<int64_t, RankEvent> firstOomIn;
    for (const RankSummary& r : run.ranks) {
        const auto& fr = r.engine->frames();
        for (const FrameInfo& f : fr) {
            RankFrame& all = frames[f.index];
            all.frame = f.index;
            all.ranks.push_back(r.rank);
            if (f.collapse < 0 || static_cast<size_t>(f.collapse) >= r.collapses.size()) continue;
            RankFrame& row = frames[f.index];
            row.frame = f.index;
            row.collapsedRanks.push_back(r.rank);
            const RankEvent& onset = r.collapses[static_cast<size_t>(f.collapse)];
            auto it = firstCollapseIn.find(f.index);
            if (it == firstCollapseIn.end() || earlier(onset, it->second.first))
                firstCollapseIn[f.index] = {onset, r.rank};
        }
        for (const RankEvent& o : r.ooms) {
            if (o.frame < 0) continue;
            RankFrame& row = frames[o.frame];
            row.frame = o.frame;
            if (std::find(row.oomRanks.begin(), row.oomRanks.end(), r.rank) == row.oomRanks.end())
                row.oomRanks.push_back(r.rank);
            auto it = firstOomIn.find(o.frame);
            if (it == firstOomIn.end() || earlier(o, it->second)) firstOomIn[o.frame] = o;
        }
    }
    for (auto& [index, row] : frames) {
        if (auto it = firstCollapseIn.find(index); it != firstCollapseIn.end())
            row.firstCollapseRank = it->second.second;
        if (auto it = firstOomIn.find(index); it != firstOomIn.end())
            row.firstOomRank = it->second.rank;
        run.frames.push_back(row);
    }
    return run;
}

} // namespace fs::analysis
