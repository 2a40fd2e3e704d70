// The text summary of a study (`fragscope ab`, `fragscope ab --report`).
#include "ab_study.h"

#include <cmath>
#include <fmt/format.h>

namespace fs::study {

namespace {

std::string envText(const Arm& a)
{
    if (a.env.empty())
        return a.role == Role::Baseline ? "the command as given" : "the same command again";
    std::string s;
    for (const auto& [k, v] : a.env)
        s += (s.empty() ? "" : " ") + k + "=" + v;
    return s;
}

std::string runLine(const Run& r)
{
    std::string state;
    if (!r.ran)
        state = r.error.empty() ? "did not finish" : r.error;
    else if (!r.error.empty())
        state = r.error;
    else
        state = fmt::format("{} frames", r.frames);
    return fmt::format("  {:<18} exit {:<4} {:>8.2f} s  {}\n", r.folder,
                       r.ran ? std::to_string(r.exitStatus) : std::string("-"), r.seconds, state);
}

} // namespace

std::string noiseFloorText(const NoiseFloor& n)
{
    if (n.samples == 0) return "noise floor: none (no repeat run to measure it)";
    if (n.identical())
        return fmt::format("noise floor: {} healthy frames of the repeat identical to the "
                           "baseline's",
                           n.samples);
    return fmt::format("noise floor: {} healthy frames of the repeat, PSNR >= {:.1f} dB, SSIM >= "
                       "{:.4f} to the baseline's",
                       n.samples, n.psnrMinDb, n.ssimMin);
}

std::string psnrText(double db)
{
    return std::isinf(db) ? std::string("identical") : fmt::format("{:.1f}", db);
}

const RunAtCollapse* runAt(const CollapseJudgement& c, const std::string& folder)
{
    for (const ArmAtCollapse& a : c.arms)
        for (const RunAtCollapse& r : a.runs)
            if (r.folder == folder) return &r;
    return nullptr;
}

std::string runStateText(const RunAtCollapse& r)
{
    if (r.bad) return r.brokenRules.empty() ? "broken" : r.brokenRules.front();
    std::string outside;
    for (const SpreadCheck& c : r.spread)
        if (c.outside) outside += (outside.empty() ? "" : ", ") + c.metric;
    if (!outside.empty()) return "not broken; outside the healthy spread: " + outside;
    if (!r.beyondNoise) return "not broken; within the noise floor of the baseline's frame";
    return "normal";
}

std::string studyText(const Study& s)
{
    std::string out;
    std::string cmd;
    for (const auto& a : s.command)
        cmd += (cmd.empty() ? "" : " ") + a;
    out += fmt::format("study of `{}`{} ({}, fragscope {})\n", cmd, s.recorded ? ", recorded" : "",
                       s.created, s.fragscopeVersion);
    if (s.interrupted) out += "INTERRUPTED: the study holds the runs that finished\n";
    out += "arms:\n";
    for (const Arm& a : s.arms)
        out += fmt::format("  {:<12} {}\n", a.name, envText(a));
    out += "runs:\n";
    for (const Arm& a : s.arms)
        for (const Run& r : a.runs) {
            out += runLine(r);
            for (const auto& line : r.stderrTail)
                if (!r.error.empty()) out += fmt::format("      stderr: {}\n", line);
        }
    if (!s.problem.empty()) {
        out += fmt::format("no verdict: {}\n", s.problem);
        return out;
    }
    std::string rules;
    for (const auto& r : s.rules)
        rules += (rules.empty() ? "" : ", ") + r.describe();
    out += fmt::format("collapse rules: {}\n", rules);
    for (const auto& c : s.commonRules)
        out += fmt::format("  {}\n", c.describe());
    out += noiseFloorText(s.noise) + "\n";
    if (s.collapses.empty()) {
        out += "the baseline has no collapse: nothing to judge\n";
        return out;
    }
    out += fmt::format("collapses of the baseline: {}\n", s.collapses.size());
    for (const CollapseJudgement& c : s.collapses) {
        out += "\n";
        const std::string frames = c.lastFrame == c.firstFrame
                                       ? fmt::format("frame {}", c.firstFrame)
                                       : fmt::format("frames {}-{}", c.firstFrame, c.lastFrame);
        out += fmt::format("{}: {}\n", frames, verdictName(c.verdict));
        out += fmt::format("  baseline: {}\n", c.brokenRules.empty() ? "" : c.brokenRules.front());
        out +=
            fmt::format("  {:<18} {:>9} {:>7}  {}\n", "run", "PSNR dB", "SSIM", "at the collapse");
        for (const ArmAtCollapse& a : c.arms)
            for (const RunAtCollapse& r : a.runs)
                out += fmt::format("  {:<18} {:>9} {:>7.3f}  {}\n", r.folder, psnrText(r.psnrDb),
                                   r.ssim, runStateText(r));
        out += fmt::format("  {}\n", c.reason);
        if (!c.sessionVerdict.empty()) {
            out += fmt::format("  recorded session's verdict: {}\n", c.sessionVerdict);
            for (const auto& e : c.sessionEvidence)
                out += fmt::format("    {}\n", e);
        }
    }
    return out;
}

} // namespace fs::study
