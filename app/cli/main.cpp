// `fragscope`: the command-line front end. Commands register themselves (command.h).
#include "command.h"
#include "core/pages.h"
#include "core/progress.h"
#include "core/store/session.h"
#include "core/store/sqlite.h"
#include "core/versions.h"

#include <QtGlobal>
#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;

namespace {

void printUsage()
{
    fmt::print("Usage: fragscope COMMAND [ARGS…]\n\n"
               "fragscope measures GPU memory fragmentation over long generation runs and links\n"
               "quality collapses in the generated frames to the allocator events before them.\n\n"
               "Commands:\n");
    auto list = commands();
    std::stable_sort(list.begin(), list.end(),
                     [](auto* a, auto* b) { return a->order < b->order; });
    for (const Command* c : list)
        fmt::print("  {:<18} {}{}\n", c->name, c->summary,
                   c->needsCapture && !captureBuilt() ? " (not in this build: no capture)"
                   : c->needsVideo && !videoBuilt()   ? " (not in this build: no OpenCV)"
                                                      : "");
    fmt::print("\nRun 'fragscope COMMAND --help' for a command's options.\n"
               "Other options: --version, --help.\n"
               "Exit status: 0 success, 1 failure, 2 bad input file, 64 usage error.\n");
}

void printVersion()
{
    fmt::print("fragscope {}\nsession format {}\nQt {}\nSQLite {}\nfmt {}\nCUPTI {}\ncapture {}\n"
               "video metrics {}\n",
               fragscopeVersion(), kFormatVersion, qVersion(), sqliteVersion(), fmtVersion(),
               cuptiVersion(), captureBuilt() ? "built" : "not built (FRAGSCOPE_CAPTURE=OFF)",
               videoBuilt() ? "built (OpenCV)" : "not built (FRAGSCOPE_VIDEO=OFF)");
}

} // namespace

int main(int argc, char** argv)
{
    keepFreedMemory();
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        if (args.size() >= 2 && args[0] == "help")
            args = {args[1], "--help"};
        else {
            printUsage();
            return args.empty() ? Usage : Ok;
        }
    }
    if (args[0] == "--version" || args[0] == "-V") {
        printVersion();
        return Ok;
    }
    // Longest matching command name (sub-commands such as "metrics import").
    const Command* cmd = nullptr;
    size_t words = 0;
    for (const Command* c : commands()) {
        size_t n = static_cast<size_t>(std::count(c->name.begin(), c->name.end(), ' ')) + 1;
        if (n > args.size() || n <= words) continue;
        std::string joined = args[0];
        for (size_t i = 1; i < n; ++i)
            joined += " " + args[i];
        if (joined == c->name) {
            cmd = c;
            words = n;
        }
    }
    if (!cmd) {
        fmt::print(stderr,
                   "fragscope: unknown command '{}'. Run 'fragscope --help' for the list.\n",
                   args[0]);
        return Usage;
    }
    std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(words), args.end());
    const auto dashdash = std::find(rest.begin(), rest.end(), "--");
    if (std::find_if(rest.begin(), dashdash,
                     [](const std::string& a) { return a == "--help" || a == "-h"; }) != dashdash) {
        fmt::print("{}", helpText(*cmd));
        return Ok;
    }
    if (cmd->needsCapture && !captureBuilt()) {
        fmt::print(stderr, "fragscope {}: unavailable: {}.\n", cmd->name, noCaptureReason());
        return Failure;
    }
    if (cmd->needsVideo && !videoBuilt()) {
        fmt::print(stderr, "fragscope {}: unavailable: {}.\n", cmd->name, noVideoReason());
        return Failure;
    }
    try {
        Args parsed(*cmd, rest);
        if (parsed.flag("quiet")) Progress::setMode(Progress::Mode::Never);
        return cmd->run(parsed);
    } catch (const UsageError& e) {
        fmt::print(stderr, "fragscope {}: {}\n", cmd->name, e.what());
        return Usage;
    } catch (const SessionError& e) {
        fmt::print(stderr, "fragscope {}: {}\n", cmd->name, e.what());
        return BadInput;
    } catch (const std::exception& e) {
        fmt::print(stderr, "fragscope {}: error: {}\n", cmd->name, e.what());
        return Failure;
    }
}
