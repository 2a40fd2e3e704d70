// The verdicts of `fragscope ab` (docs/ab.md "Verdicts"). Every threshold comes from the study
// itself: the noise floor from the repeat runs' distances to the baseline on frames no collapse
// touches, the "back to normal" spread from each run's own healthy frames (stats.h departure(),
// the scale floored as the video metrics' own z-scores are).
#include "ab_study.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

namespace fs::study {

using analysis::CollapseRule;

const char* roleName(Role r)
{
    switch (r) {
    case Role::Baseline:
        return "baseline";
    case Role::Repeat:
        return "repeat";
    default:
        return "changed";
    }
}

const char* verdictName(Verdict v)
{
    switch (v) {
    case Verdict::FollowsAllocator:
        return "follows_allocator";
    case Verdict::NotAllocator:
        return "not_allocator";
    case Verdict::NotReproducible:
        return "not_reproducible";
    default:
        return "undetermined";
    }
}

bool ArmAtCollapse::bad() const
{
    return !runs.empty() &&
           std::all_of(runs.begin(), runs.end(), [](const RunAtCollapse& r) { return r.bad; });
}

bool ArmAtCollapse::normal() const
{
    return !runs.empty() &&
           std::all_of(runs.begin(), runs.end(), [](const RunAtCollapse& r) { return r.normal(); });
}

const Arm* Study::arm(const std::string& name) const
{
    for (const Arm& a : arms)
        if (a.name == name) return &a;
    return nullptr;
}

const Run* Study::baseline() const
{
    for (const Arm& a : arms)
        if (a.role == Role::Baseline && !a.runs.empty() && a.runs.front().usable())
            return &a.runs.front();
    return nullptr;
}

std::map<int64_t, std::vector<std::string>> brokenFrames(const Run& r,
                                                         const std::vector<CollapseRule>& rules)
{
    std::map<int64_t, std::vector<std::string>> out;
    for (const auto& s : r.scores)
        for (const CollapseRule& rule : rules) {
            const auto it = s.values.find(rule.metric);
            if (it == s.values.end() || !rule.broken(it->second)) continue;
            out[s.frame].push_back(fmt::format("{} = {:.3g}", rule.describe(), it->second));
        }
    return out;
}

namespace {

struct Sample
{
    std::vector<double> mse;
    std::vector<double> dissimilarity; // 1 - SSIM
};

// Runs of the unchanged command other than the first baseline run.
std::vector<const Run*> repeatRuns(const Study& s)
{
    std::vector<const Run*> out;
    for (const Arm& a : s.arms) {
        if (a.role == Role::Changed) continue;
        for (const Run& r : a.runs)
            if (r.usable() && !(a.role == Role::Baseline && &r == &a.runs.front()))
                out.push_back(&r);
    }
    return out;
}

bool aligned(const Run& r, const Run& base)
{
    return r.frames == base.frames && static_cast<int64_t>(r.vsBaseline.size()) == base.frames;
}

// A run at one collapse: its rules, its metrics against its own healthy frames, its distance to
// the baseline's frames against the noise floor.
RunAtCollapse atCollapse(const Run& r, int64_t first, int64_t last,
                         const std::set<int64_t>& collapseFrames,
                         const std::vector<CollapseRule>& rules, const Sample& noise)
{
    RunAtCollapse out;
    out.folder = r.folder;
    const auto broken = brokenFrames(r, rules);
    for (int64_t f = first; f <= last && !out.bad; ++f)
        if (const auto it = broken.find(f); it != broken.end()) {
            out.bad = true;
            out.brokenRules = it->second;
        }
    out.inSpread = true;
    for (const auto& spec : analysis::videoMetrics()) {
        // Oriented so that larger is worse (departure() is one-sided).
        const double sign = spec.higherIsWorse ? 1.0 : -1.0;
        std::vector<double> healthy;
        std::optional<double> worst;
        for (const auto& sc : r.scores) {
            const auto it = sc.values.find(spec.name);
            if (it == sc.values.end()) continue;
            const double v = sign * it->second;
            if (sc.frame >= first && sc.frame <= last)
                worst = std::max(worst.value_or(v), v);
            else if (!collapseFrames.count(sc.frame) && !broken.count(sc.frame))
                healthy.push_back(v);
        }
        if (!worst) continue;
        SpreadCheck c;
        c.metric = spec.name;
        c.value = sign * *worst;
        const analysis::Departure d = analysis::departure(*worst, healthy);
        c.median = sign * d.median;
        c.limit = d.threshold;
        c.z = (*worst - d.median) / std::max(d.scale, spec.scaleFloor);
        // Too few healthy frames to know the spread: not within it.
        c.outside = static_cast<int64_t>(healthy.size()) < analysis::kMinHealthyFrames ||
                    (d.standsOut && c.z > d.threshold);
        out.inSpread = out.inSpread && !c.outside;
        out.spread.push_back(c);
    }
    double mse = 0, dis = 0;
    out.psnrDb = std::numeric_limits<double>::infinity();
    for (const FrameDistance& d : r.vsBaseline)
        if (d.frame >= first && d.frame <= last) {
            mse = std::max(mse, d.mse);
            dis = std::max(dis, 1 - d.ssim);
            out.psnrDb = std::min(out.psnrDb, d.psnrDb);
            out.ssim = std::min(out.ssim, d.ssim);
        }
    out.beyondNoise = analysis::departure(mse, noise.mse).standsOut ||
                      analysis::departure(dis, noise.dissimilarity).standsOut;
    return out;
}

std::string joinNames(const std::vector<std::string>& v)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
    return s;
}

std::string distanceText(const RunAtCollapse& r)
{
    return std::isinf(r.psnrDb) ? std::string("identical to the baseline's frame")
                                : fmt::format("PSNR {:.1f} dB, SSIM {:.3f} to the baseline's frame",
                                              r.psnrDb, r.ssim);
}

std::string noiseText(const NoiseFloor& n)
{
    if (n.identical()) return "the repeat's healthy frames are identical to the baseline's";
    return fmt::format("the repeat's healthy frames: PSNR >= {:.1f} dB, SSIM >= {:.3f}",
                       n.psnrMinDb, n.ssimMin);
}

// Why an arm is neither bad nor back to normal.
std::string notNormalText(const ArmAtCollapse& a)
{
    for (const RunAtCollapse& r : a.runs) {
        if (r.bad) return fmt::format("{} broken in {}", a.arm, r.folder);
        for (const SpreadCheck& c : r.spread)
            if (c.outside)
                return fmt::format("{}: {} {:.3g} outside the run's healthy spread (median {:.3g}, "
                                   "robust z {:.1f})",
                                   r.folder, c.metric, c.value, c.median, c.z);
        if (!r.beyondNoise)
            return fmt::format("{}: {} is within the noise floor", r.folder, distanceText(r));
    }
    return a.arm;
}

void decide(CollapseJudgement& c, const Study& s)
{
    std::vector<const RunAtCollapse*> repeats;
    std::vector<const ArmAtCollapse*> changed;
    for (const ArmAtCollapse& a : c.arms) {
        if (a.role == Role::Changed) {
            if (!a.runs.empty()) changed.push_back(&a);
            continue;
        }
        for (const RunAtCollapse& r : a.runs)
            repeats.push_back(&r);
    }
    if (repeats.empty()) {
        c.verdict = Verdict::Undetermined;
        c.reason = "no repeat run finished: whether the frame breaks again in an unchanged run is "
                   "unknown, so the study cannot judge the allocator";
        return;
    }
    for (const RunAtCollapse* r : repeats)
        if (!r->bad) {
            c.verdict = Verdict::NotReproducible;
            c.reason = fmt::format(
                "not bad in {} ({}): the frame changes between two runs of the same command, "
                "so this study cannot tell whether the allocator plays a part",
                r->folder, distanceText(*r));
            return;
        }
    if (changed.empty()) {
        c.verdict = Verdict::Undetermined;
        c.reason = "bad in baseline and repeat, but no allocator arm finished";
        return;
    }
    std::vector<std::string> normal, bad;
    const ArmAtCollapse* first = nullptr; // the first arm back to normal
    for (const ArmAtCollapse* a : changed) {
        if (a->normal()) normal.push_back(a->arm);
        if (a->normal() && !first) first = a;
        if (a->bad()) bad.push_back(a->arm);
    }
    if (first) {
        c.verdict = Verdict::FollowsAllocator;
        c.reason = fmt::format(
            "bad in baseline and repeat, back to normal under {}: no rule broken, every video "
            "metric within the run's healthy spread, {} ({})",
            joinNames(normal), distanceText(first->runs.front()), noiseText(s.noise));
        return;
    }
    if (bad.size() == changed.size()) {
        c.verdict = Verdict::NotAllocator;
        c.reason = fmt::format("bad under every allocator arm ({}), as in baseline and repeat",
                               joinNames(bad));
        return;
    }
    c.verdict = Verdict::Undetermined;
    std::vector<std::string> why;
    for (const ArmAtCollapse* a : changed)
        if (!a->bad()) why.push_back(notNormalText(*a));
    c.reason =
        "neither bad under every allocator arm nor back to normal under one: " + joinNames(why);
}

} // namespace

void judge(Study& s)
{
    s.noise = {};
    s.commonRules.clear();
    s.collapses.clear();
    s.problem.clear();
    const Run* base = s.baseline();
    if (!base) {
        const Arm* b = s.arm("baseline");
        const Run* r = b && !b->runs.empty() ? &b->runs.front() : nullptr;
        s.problem = r ? fmt::format("the baseline run {} cannot be compared: {}", r->folder,
                                    !r->error.empty() ? r->error
                                    : r->ran          ? std::string("no frames")
                                                      : std::string("it did not finish"))
                      : std::string("the baseline did not run");
        return;
    }
    // Rules that fire on most of the baseline's frames describe the video, not a break
    // (docs/analysis.md): they judge no run.
    std::vector<analysis::FrameInfo> frames;
    for (const auto& sc : base->scores) {
        analysis::FrameInfo f;
        f.index = sc.frame;
        f.metrics = sc.values;
        frames.push_back(std::move(f));
    }
    const analysis::RuleSplit split = analysis::splitCommonRules(s.rules, frames);
    s.commonRules = split.common;
    const auto broken = brokenFrames(*base, split.active);
    std::set<int64_t> collapseFrames;
    for (const auto& [f, rules] : broken) {
        collapseFrames.insert(f);
        if (!s.collapses.empty() && s.collapses.back().lastFrame + 1 == f) {
            s.collapses.back().lastFrame = f;
            continue;
        }
        CollapseJudgement c;
        c.firstFrame = c.lastFrame = f;
        c.brokenRules = rules;
        s.collapses.push_back(std::move(c));
    }

    Sample noise;
    for (const Run* r : repeatRuns(s)) {
        if (!aligned(*r, *base)) continue;
        const auto own = brokenFrames(*r, split.active);
        for (const FrameDistance& d : r->vsBaseline) {
            if (collapseFrames.count(d.frame) || own.count(d.frame)) continue;
            noise.mse.push_back(d.mse);
            noise.dissimilarity.push_back(1 - d.ssim);
            if (s.noise.samples == 0) {
                s.noise.psnrMinDb = d.psnrDb;
                s.noise.ssimMin = d.ssim;
            }
            ++s.noise.samples;
            s.noise.mseMax = std::max(s.noise.mseMax, d.mse);
            s.noise.psnrMinDb = std::min(s.noise.psnrMinDb, d.psnrDb);
            s.noise.ssimMin = std::min(s.noise.ssimMin, d.ssim);
        }
    }

    for (CollapseJudgement& c : s.collapses) {
        for (const Arm& a : s.arms) {
            ArmAtCollapse ac;
            ac.arm = a.name;
            ac.role = a.role;
            for (const Run& r : a.runs) {
                if (&r == base || !r.usable() || !aligned(r, *base)) continue;
                ac.runs.push_back(
                    atCollapse(r, c.firstFrame, c.lastFrame, collapseFrames, split.active, noise));
            }
            if (a.role != Role::Baseline || !ac.runs.empty()) c.arms.push_back(std::move(ac));
        }
        decide(c, s);
    }
}

} // namespace fs::study
