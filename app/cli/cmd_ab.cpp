// fragscope ab -o STUDY_DIR [--repeat N] [--arm NAME:VAR=VALUE[,…]]… [--arms NAME,…]
// [--video PATH] [--record] -- CMD…: the causal check (docs/ab.md). Reruns the generation with
// only the allocator changed, scores every run's video with the `metrics compute` code
// (core/video, loaded as the video module), compares every frame with the baseline's and judges
// every collapse of the baseline (core/study). `fragscope ab --report STUDY_DIR` prints a study
// again.
#include "command.h"
#include "fragscope_version.h"

#include "ab_runner.h"
#include "capture/recorder/launcher.h"
#include "cli_settings.h"
#include "core/alloc/config.h"
#include "core/analysis/engine.h"
#include "core/format.h"
#include "core/progress.h"
#include "core/study/ab_study.h"
#include "core/versions.h"

#if FRAGSCOPE_VIDEO
#include "core/video/module.h"
#endif

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace fs;
using namespace fs::cli;
namespace fsys = std::filesystem;

namespace {

#if FRAGSCOPE_VIDEO // the runs need the video module; --report does not

using Env = std::vector<std::pair<std::string, std::string>>;

struct ArmSpec
{
    std::string name;
    study::Role role = study::Role::Changed;
    Env env;
};

// "NAME:VAR=VALUE[,VAR=VALUE…]". A comma starts a new variable only when VAR= follows it, so
// that PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,expandable_segments:True is one value.
ArmSpec parseArm(const std::string& text)
{
    static const std::regex name("[A-Za-z0-9_.-]+");
    static const std::regex var("[A-Za-z_][A-Za-z0-9_]*");
    const size_t colon = text.find(':');
    ArmSpec a;
    a.name = text.substr(0, colon);
    if (colon == std::string::npos || !std::regex_match(a.name, name))
        throw UsageError(fmt::format("--arm '{}': expected NAME:VAR=VALUE[,VAR=VALUE…] (NAME: "
                                     "letters, digits, '_', '-', '.')",
                                     text));
    std::string rest = text.substr(colon + 1);
    static const std::regex piece(",([A-Za-z_][A-Za-z0-9_]*)=");
    std::vector<size_t> starts{0};
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), piece);
         it != std::sregex_iterator(); ++it)
        starts.push_back(static_cast<size_t>(it->position()) + 1);
    for (size_t i = 0; i < starts.size(); ++i) {
        const size_t end = i + 1 < starts.size() ? starts[i + 1] - 1 : rest.size();
        const std::string kv = rest.substr(starts[i], end - starts[i]);
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || !std::regex_match(kv.substr(0, eq), var))
            throw UsageError(fmt::format("--arm '{}': '{}' is not VAR=VALUE", text, kv));
        a.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return a;
}

// expandable_segments:True added to the allocator settings PyTorch would read from the
// environment (fs::alloc::effectiveEnvConf: PYTORCH_CUDA_ALLOC_CONF when set, else
// PYTORCH_ALLOC_CONF), under both names.
Env expandableEnv()
{
    Env env;
    const alloc::EnvConf effective =
        alloc::effectiveEnvConf([](const char* n) -> const char* { return ::getenv(n); });
    for (const char* name : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
        std::string v = effective.text;
        static const std::regex old("(^|,)\\s*expandable_segments\\s*:[^,]*");
        v = std::regex_replace(v, old, "");
        if (!v.empty() && v.front() == ',') v.erase(0, 1);
        env.emplace_back(name,
                         v.empty() ? "expandable_segments:True" : v + ",expandable_segments:True");
    }
    return env;
}

std::vector<ArmSpec> chooseArms(const Args& a)
{
    std::vector<ArmSpec> all{
        {"baseline", study::Role::Baseline, {}},
        {"repeat", study::Role::Repeat, {}},
        {"no-caching", study::Role::Changed, {{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}}},
        {"expandable", study::Role::Changed, expandableEnv()}};
    for (const auto& text : a.getAll("arm")) {
        ArmSpec s = parseArm(text);
        for (const ArmSpec& e : all)
            if (e.name == s.name)
                throw UsageError("--arm " + s.name + ": an arm of that name exists");
        all.push_back(std::move(s));
    }
    const auto chosen = a.get("arms");
    if (!chosen) return all;
    std::set<std::string> names;
    std::string item;
    for (std::istringstream in(*chosen); std::getline(in, item, ',');) {
        if (std::none_of(all.begin(), all.end(), [&](const ArmSpec& s) { return s.name == item; }))
            throw UsageError(fmt::format("--arms: no arm '{}' (arms: baseline, repeat, no-caching, "
                                         "expandable and those of --arm)",
                                         item));
        names.insert(item);
    }
    std::vector<ArmSpec> out;
    for (ArmSpec& s : all)
        if (s.role != study::Role::Changed || names.count(s.name)) out.push_back(std::move(s));
    return out;
}

std::string substitute(std::string s, const std::string& run)
{
    for (size_t p = s.find("{run}"); p != std::string::npos; p = s.find("{run}", p + run.size()))
        s.replace(p, 5, run);
    return s;
}

// An absent or empty folder is made a study folder; anything else is refused before a run.
void prepareStudyFolder(const std::string& dir)
{
    std::error_code ec;
    if (fsys::exists(dir, ec)) {
        if (!fsys::is_directory(dir, ec))
            throw UsageError(fmt::format("{}: exists and is not a folder (-o names the study "
                                         "folder: a new or empty one)",
                                         dir));
        if (fsys::exists(fsys::path(dir) / study::kStudyFile, ec))
            throw UsageError(fmt::format("{}: holds a study already (fragscope ab --report {} "
                                         "prints it); give a new or empty folder",
                                         dir, dir));
        auto it = fsys::directory_iterator(dir, ec);
        if (!ec && it != fsys::directory_iterator())
            throw UsageError(fmt::format("{}: holds other files ({}…): not a study folder; give a "
                                         "new or empty folder",
                                         dir, it->path().filename().string()));
    }
    fsys::create_directories(fsys::path(dir) / "fragscope" / "logs", ec);
    if (ec)
        throw UsageError(fmt::format("{}: cannot create the study folder: {}", dir, ec.message()));
}

bool isFrameFile(const fsys::path& p)
{
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The run's video: --video (with {run} replaced), else the one video file in the run's folder,
// else the folder itself when it holds numbered frames. Empty with `why` when none.
std::string findVideo(const std::string& runDir, const std::string& pattern, std::string& why)
{
    std::error_code ec;
    if (!pattern.empty()) {
        const std::string p = substitute(pattern, runDir);
        if (fsys::exists(p, ec)) return fsys::absolute(p).string();
        why = fmt::format("wrote no video: {} does not exist", p);
        return {};
    }
    static const std::set<std::string> videoExt{".mp4", ".webm", ".mkv", ".avi", ".mov", ".m4v"};
    std::vector<std::string> videos;
    bool frames = false;
    for (const auto& e : fsys::directory_iterator(runDir, ec)) {
        if (!e.is_regular_file()) continue;
        std::string ext = e.path().extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
        if (videoExt.count(ext)) videos.push_back(e.path().string());
        frames = frames || isFrameFile(e.path());
    }
    if (videos.size() == 1) return videos.front();
    if (videos.size() > 1) {
        why = fmt::format("wrote {} videos in {}: --video PATH names the one to compare",
                          videos.size(), runDir);
        return {};
    }
    if (frames) return runDir;
    why = fmt::format("wrote no video in {} (a video file or numbered PNG/JPEG frames; --video "
                      "PATH names it, {{run}} standing for the run's folder)",
                      runDir);
    return {};
}

std::string selfExe()
{
    std::error_code ec;
    const auto p = fsys::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("fragscope") : p.string();
}

// The one progress line: which run, of how many, what it does and for how long.
class Line
{
public:
    explicit Line(size_t total) : total_(total), on_(Progress::enabled()) {}
    ~Line() { done(); }
    void show(size_t n, const std::string& run, const std::string& what, double seconds)
    {
        if (!on_) return;
        const auto now = std::chrono::steady_clock::now();
        if (drawn_ && now - last_ < std::chrono::milliseconds(200) && what == what_) return;
        drawn_ = true;
        last_ = now;
        what_ = what;
        fmt::print(stderr, "\rfragscope ab: run {}/{} {}: {} {:.1f} s\033[K", n, total_, run, what,
                   seconds);
    }
    void done()
    {
        if (on_ && drawn_) fmt::print(stderr, "\r\033[K");
        drawn_ = false;
    }

private:
    size_t total_;
    bool on_;
    bool drawn_ = false;
    std::string what_;
    std::chrono::steady_clock::time_point last_;
};

void writeThumbnails(const video::VideoAnalysis& v, const fsys::path& dir)
{
    std::error_code ec;
    fsys::create_directories(dir, ec);
    for (size_t i = 0; i < v.images.size(); ++i) {
        if (v.images[i].thumbnailJpeg.empty()) continue;
        std::ofstream out(dir / fmt::format("{:04d}.jpg", i), std::ios::binary);
        out.write(reinterpret_cast<const char*>(v.images[i].thumbnailJpeg.data()),
                  static_cast<std::streamsize>(v.images[i].thumbnailJpeg.size()));
    }
}

// Scores the run's video and compares it with the baseline's; the problem in run.error.
void measureRun(study::Run& run, const std::string& studyDir, const study::Run* base,
                const std::atomic<bool>& stop, const std::function<void()>& tick)
{
    const auto& api = video::module();
    video::AnalyzeOptions o;
    o.cancel = &stop;
    o.progress = [&](int64_t, int64_t) { tick(); };
    try {
        const video::VideoAnalysis v = api.analyzeVideo(run.video, o);
        run.frames = v.frames;
        if (base && v.frames != base->frames) {
            run.error = fmt::format("{} frames, the baseline's video has {}: frames cannot be "
                                    "aligned",
                                    v.frames, base->frames);
            return;
        }
        run.scores = v.scores;
        run.thumbnails = "fragscope/thumbs/" + run.folder;
        writeThumbnails(v, fsys::path(studyDir) / run.thumbnails);
        if (base) run.vsBaseline = api.compareVideos(run.video, base->video, &stop);
    } catch (const video::Cancelled&) {
        run.error = "interrupted while measuring";
        run.scores.clear();
    } catch (const std::exception& e) {
        run.error = e.what();
        run.scores.clear();
    }
}

// --record: the baseline's session, scored with its own video, gives its verdict and evidence
// rows for every collapse, printed beside the study's.
void addSessionVerdicts(study::Study& s, const std::string& dir, const settings::Settings& st)
{
    const study::Run* base = s.baseline();
    if (!s.recorded || !base || base->session.empty()) return;
    const std::string session = (fsys::path(dir) / base->session).string();
    try {
        if (!fsys::exists(session))
            throw std::runtime_error(base->session + " was not written (see fragscope/logs/" +
                                     base->folder + ".err)");
        video::AddVideoOptions o;
        o.session = session;
        o.video = base->video;
        o.replaceOthers = true;
        video::module().addVideo(o);
        const auto engine = analysis::Engine::open(session, st.loadOptions());
        for (study::CollapseJudgement& c : s.collapses) {
            const auto rep = engine->collapseReport(c.firstFrame);
            if (!rep) {
                c.sessionVerdict = "the recorded session has no collapse at this frame";
                continue;
            }
            c.sessionVerdict = rep->verdict.headline;
            for (size_t i : rep->verdict.evidence)
                if (i < rep->precursors.size() && c.sessionEvidence.size() < 5)
                    c.sessionEvidence.push_back(rep->precursors[i].description);
        }
    } catch (const std::exception& e) {
        for (study::CollapseJudgement& c : s.collapses)
            c.sessionVerdict = std::string("not available: ") + e.what();
    }
}
#endif // FRAGSCOPE_VIDEO

int runReport(const std::string& dir)
{
    const study::Study s = study::readStudy(dir);
    fmt::print("{}", study::studyText(s));
    return Ok;
}

int runAb(Args& a)
{
    if (const auto report = a.get("report")) {
        if (!a.rest().empty() || a.get("output"))
            throw UsageError("--report STUDY_DIR prints a study: no -o and no command");
        return runReport(*report);
    }
#if !FRAGSCOPE_VIDEO
    fmt::print(stderr, "fragscope ab: unavailable: {}.\n", noVideoReason());
    return Failure;
#else
    const auto out = a.get("output");
    if (!out || out->empty()) throw UsageError("ab needs -o STUDY_DIR");
    if (a.rest().empty())
        throw UsageError("ab needs a command after -- (fragscope ab -o study -- python gen.py "
                         "--out {run})");
    if (!a.positional().empty())
        throw UsageError("unexpected argument '" + a.positional()[0] +
                         "' (put the command after --)");
    const int64_t repeat = a.getInt("repeat", 1);
    if (repeat < 1 || repeat > 100) throw UsageError("--repeat: 1 to 100 runs per arm");
    const bool record = a.flag("record");
    if (record && !captureBuilt()) throw UsageError(fmt::format("--record: {}", noCaptureReason()));
    const std::vector<ArmSpec> specs = chooseArms(a);
    const settings::Settings settings = commandSettings(a);
    video::module(); // a missing video module is an error before any run
    prepareStudyFolder(*out);
    const std::string dir = fsys::absolute(*out).lexically_normal().string();

    study::Study s;
    s.fragscopeVersion = fragscopeVersion();
    s.created = utcNowIso();
    s.command = a.rest();
    s.video = a.get("video", "");
    s.repeat = static_cast<int>(repeat);
    s.recorded = record;
    s.rules = settings.activeRules();
    for (const ArmSpec& spec : specs)
        s.arms.push_back({spec.name, spec.role, spec.env, {}});

    const std::atomic<bool>& stop = capture::installStopSignals();
    const size_t total = specs.size() * static_cast<size_t>(repeat);
    Line line(total);
    size_t n = 0;
    bool anyFailed = false;
    // Interleaved (baseline-1, repeat-1, no-caching-1, …, baseline-2, …): a drift of the machine
    // over the study spreads over every arm.
    for (int r = 1; r <= repeat && !stop.load(); ++r)
        for (study::Arm& arm : s.arms) {
            if (stop.load()) break;
            ++n;
            study::Run run;
            run.index = r;
            run.folder = fmt::format("{}-{}", arm.name, r);
            const std::string runDir = (fsys::path(dir) / run.folder).string();
            fsys::create_directories(runDir);
            ChildOptions co;
            for (const auto& word : a.rest())
                co.argv.push_back(substitute(word, runDir));
            if (record) {
                run.session = run.folder + "/session.fragscope";
                co.argv.insert(co.argv.begin(),
                               {selfExe(), "record", "-o", (fsys::path(dir) / run.session).string(),
                                "--no-index", "--"});
            }
            co.env = arm.env;
            co.env.emplace_back("FRAGSCOPE_RUN_DIR", runDir);
            co.env.emplace_back("FRAGSCOPE_AB_ARM", arm.name);
            co.stdoutLog = fmt::format("{}/fragscope/logs/{}.out", dir, run.folder);
            co.stderrLog = fmt::format("{}/fragscope/logs/{}.err", dir, run.folder);
            co.tick = [&](double secs) { line.show(n, run.folder, "running", secs); };
            const ChildRun cr = runChild(co, stop);
            run.seconds = cr.seconds;
            run.exitStatus = cr.exitStatus;
            run.ran = cr.finished;
            if (!cr.finished) {
                run.error = "interrupted (Ctrl-C): the command was stopped";
            } else if (cr.exitStatus != 0) {
                run.error =
                    cr.exitStatus == 127
                        ? fmt::format("command not found: {} (exit status 127)", co.argv.front())
                        : fmt::format("the command failed: exit status {}", cr.exitStatus);
                run.stderrTail = cr.stderrTail;
            } else {
                std::string why;
                run.video = findVideo(runDir, s.video, why);
                if (run.video.empty()) {
                    run.error = why;
                } else {
                    const auto t0 = std::chrono::steady_clock::now();
                    measureRun(run, dir,
                               arm.role == study::Role::Baseline && r == 1 ? nullptr : s.baseline(),
                               stop, [&] {
                                   line.show(n, run.folder, "measuring",
                                             std::chrono::duration<double>(
                                                 std::chrono::steady_clock::now() - t0)
                                                 .count());
                               });
                }
            }
            if (!run.error.empty() && run.ran) {
                anyFailed = true;
                line.done();
                fmt::print(stderr, "fragscope ab: {}: {}\n", run.folder, run.error);
                for (const auto& l : run.stderrTail)
                    fmt::print(stderr, "  {}\n", l);
            }
            arm.runs.push_back(std::move(run));
        }
    line.done();
    s.interrupted = stop.load();
    study::judge(s);
    addSessionVerdicts(s, dir, settings);
    study::writeStudy(s, dir);
    fmt::print("{}", study::studyText(s));
    fmt::print("study written to {}/{}\n", dir, study::kStudyFile);
    if (s.interrupted) {
        fmt::print(stderr, "fragscope ab: interrupted: the study holds the runs that finished\n");
        return 130;
    }
    return anyFailed || !s.problem.empty() ? Failure : Ok;
#endif
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "ab",
    .synopsis = "-o STUDY_DIR [--repeat N] [--arm NAME:VAR=VALUE[,VAR=VALUE…]]… [--arms NAME,…] "
                "[--video PATH] [--record] -- CMD [ARGS…] | --report STUDY_DIR",
    .summary = "Is it the allocator? Rerun a generation with only the allocator changed and judge "
               "every collapse",
    .options = withSettingsOptions({
        {"output", "DIR", "the study folder, new or empty"},
        {"repeat", "N", "runs of every arm (default 1)"},
        {"arm", "NAME:VAR=VALUE[,…]",
         "one more arm: these variables set (repeatable); a comma starts\n"
         "a new variable only before VAR="},
        {"arms", "NAME,…",
         "the allocator arms to run (default: no-caching, expandable and\n"
         "every --arm); baseline and repeat always run"},
        {"video", "PATH",
         "the video each run writes ({run}: the run's folder); default: the\n"
         "one video file in the run's folder, else its numbered frames"},
        {"record", "", "record every run as a session in its folder (fragscope record)"},
        {"report", "DIR", "print the study in DIR again"},
        {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"},
    }),
    .details =
        "Arms: baseline (CMD as given), repeat (CMD again: the run-to-run noise), no-caching\n"
        "(PYTORCH_NO_CUDA_MEMORY_CACHING=1) and expandable (expandable_segments:True added to\n"
        "the allocator settings of the environment, in PYTORCH_CUDA_ALLOC_CONF and\n"
        "PYTORCH_ALLOC_CONF). Each run has its folder STUDY_DIR/ARM-N; {run} in CMD or --video\n"
        "stands for it (also $FRAGSCOPE_RUN_DIR). Runs are sequential; their output goes to\n"
        "STUDY_DIR/fragscope/logs. Every run's video is scored as `metrics compute` scores it,\n"
        "its frames compared with the baseline's (PSNR, SSIM) and every collapse of the\n"
        "baseline (the collapse rules, default warp_error_z > 6) judged: follows_allocator (bad\n"
        "in baseline and repeat, back to normal under an allocator arm: no rule broken, every\n"
        "video metric within the run's healthy spread, further from the baseline's frame than\n"
        "the repeat's noise floor), not_allocator (bad under every allocator arm),\n"
        "not_reproducible (not bad in the repeat) or undetermined. The study is written to\n"
        "STUDY_DIR/study.json and printed. Ctrl-C stops the running command's process group\n"
        "and writes the study of the runs that finished.\n"
        "Exit status: 0 every run compared; 1 a run failed (its exit status and last stderr\n"
        "lines are in the study, which goes on) or the baseline cannot be compared; 64 usage\n"
        "(STUDY_DIR not new or empty); 130 interrupted. See docs/ab.md.",
    .run = runAb,
    .order = 46,
});
