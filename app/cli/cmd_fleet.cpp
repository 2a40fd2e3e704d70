// fragscope fleet PATH… -o OUT: many sessions analysed on a Dask cluster. The work is Python's
// (app/python/fragscope_fleet.py, built on Dask distributed): this command finds that
// script and Debian's interpreter and hands over to them, so that `fragscope fleet` is one
// command with the others (and its --help is theirs). docs/fleet.md.
#include "command.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>

using namespace fs::cli;
namespace stdfs = std::filesystem;

namespace {

std::string selfPath()
{
    std::error_code ec;
    const auto p = stdfs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
}

// The script: $FRAGSCOPE_FLEET_SCRIPT, else installed beside the binary
// (<prefix>/share/fragscope/python), else this build's source tree.
std::string fleetScript(const std::string& self)
{
    if (const char* env = std::getenv("FRAGSCOPE_FLEET_SCRIPT"); env && *env) return env;
    std::vector<stdfs::path> candidates;
    if (!self.empty())
        candidates.push_back(stdfs::path(self).parent_path().parent_path() / "share" / "fragscope" /
                             "python" / "fragscope_fleet.py");
#ifdef FRAGSCOPE_SOURCE_PYTHON_DIR
    candidates.push_back(stdfs::path(FRAGSCOPE_SOURCE_PYTHON_DIR) / "fragscope_fleet.py");
#endif
    for (const auto& c : candidates) {
        std::error_code ec;
        if (stdfs::is_regular_file(c, ec)) return c.string();
    }
    return {};
}

// Debian's python3-distributed is seen by Debian's interpreter only (a pyenv python3 earlier on
// PATH does not see it).
std::string python()
{
    if (const char* env = std::getenv("FRAGSCOPE_PYTHON"); env && *env) return env;
    return "/usr/bin/python3";
}

int runFleet(Args& a)
{
    if (a.positional().empty())
        throw UsageError("needs at least one PATH (a session, snapshot or folder)");
    if (!a.get("output")) throw UsageError("missing -o OUT.csv|OUT.json");
    const std::string self = selfPath();
    const std::string script = fleetScript(self);
    if (script.empty()) {
        fmt::print(stderr, "fragscope fleet: fragscope_fleet.py not found (looked beside the "
                           "binary in ../share/fragscope/python; set FRAGSCOPE_FLEET_SCRIPT)\n");
        return Failure;
    }
    // The options as given, in the script's spelling.
    std::vector<std::string> args = {python(), script};
    args.insert(args.end(), a.positional().begin(), a.positional().end());
    args.insert(args.end(), {"-o", *a.get("output")});
    for (const char* name : {"workers", "scheduler", "fragscope", "timeout"})
        if (auto v = a.get(name)) args.insert(args.end(), {std::string("--") + name, *v});
    for (const std::string& c : a.getAll("alloc-conf"))
        args.insert(args.end(), {"--alloc-conf", c});
    if (a.flag("quiet")) args.push_back("--quiet");
    if (!self.empty()) setenv("FRAGSCOPE_BIN", self.c_str(), 0);
    std::vector<char*> argv;
    for (std::string& s : args)
        argv.push_back(s.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    execv(argv[0], argv.data());
    fmt::print(stderr,
               "fragscope fleet: cannot run {}: {} (Debian: apt-get install python3 "
               "python3-distributed; or set FRAGSCOPE_PYTHON)\n",
               args[0], std::strerror(errno));
    return Failure;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "fleet",
    .synopsis = "PATH… -o OUT.csv|OUT.json [--workers N | --scheduler ADDRESS] [--alloc-conf "
                "CONF]… [--timeout S] [--quiet]",
    .summary = "Many sessions and snapshots analysed on a Dask cluster into one table and report",
    .options = {{"output", "OUT", "the table: .csv or .json (with the fleet report)"},
                {"workers", "N", "local cluster of N worker processes (default: the CPU count)"},
                {"scheduler", "ADDRESS",
                 "an existing Dask scheduler (tcp://host:8786); its workers must read the files "
                 "and run fragscope"},
                {"alloc-conf", "CONF",
                 "also replay each run under this PYTORCH_CUDA_ALLOC_CONF (repeatable)"},
                {"fragscope", "BIN", "the fragscope the workers run (default: this one)"},
                {"timeout", "S", "give up on one file after S seconds (a row with the error)"},
                {"quiet", "", "no progress lines on stderr"}},
    .details =
        "Each file is one Dask task that runs `fragscope report --json` (and `fragscope whatif\n"
        "--json` under the --alloc-conf settings) on a worker; snapshots and traces are imported\n"
        "first. Folders are searched for .fragscope, .pickle, .pkl, .pt.trace.json(.gz) and\n"
        ".sqlite files. The table has one row per file: devices, peak reserved, max F, OOMs and\n"
        "their causes, collapses and their verdicts, precursor kinds, per-setting peak reserved\n"
        "and OOMs; a file that fails is a row with its error, and a task rescheduled after its\n"
        "worker died says so. The fleet report: runs by outcome, the most common precursor\n"
        "kinds among collapsed runs, the setting that helps the most runs.\n"
        "Runs app/python/fragscope_fleet.py with /usr/bin/python3 (Debian's\n"
        "python3-distributed); FRAGSCOPE_PYTHON and FRAGSCOPE_FLEET_SCRIPT override them.\n"
        "Exit status: 0 every file analysed, 2 some failed (rows with errors), 1 the cluster\n"
        "failed, 64 usage error. Cluster set-up: docs/fleet.md.",
    .run = runFleet,
    .order = 77,
});
