// fragscope mark PID [TEXT]: a trigger for the flight recorder recording PID (record/attach
// --keep), or a plain marker in a whole recording.
#include "capture/protocol/control_client.h"
#include "capture/protocol/socket_dir.h"
#include "capture/recorder/flight_recorder.h"
#include "command.h"

#include <charconv>
#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;

namespace {

int runMark(Args& a)
{
    if (a.positional().empty() || a.positional().size() > 2)
        throw UsageError("usage: fragscope mark PID [TEXT]");
    const std::string& ps = a.positional()[0];
    int pid = 0;
    auto [p, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), pid);
    if (ec != std::errc() || p != ps.data() + ps.size() || pid <= 0)
        throw UsageError("PID must be a process id, not '" + ps + "'");
    const std::string text = a.positional().size() > 1 ? a.positional()[1] : std::string();
    if (text.size() > 1000) throw UsageError("TEXT is limited to 1000 characters");
    const std::string socket = proto::socketPath(proto::socketDir(), pid);
    proto::ControlClient client;
    std::string err;
    if (!client.connect(socket, 5000, err)) {
        fmt::print(stderr, "fragscope mark: pid {}: {}\n", pid, err);
        return Failure;
    }
    const std::string message =
        std::string(capture::kTriggerMarkPrefix) + (text.empty() ? "" : " " + text);
    if (!client.command(proto::MsgType::Mark, message, 5000, err)) {
        fmt::print(stderr, "fragscope mark: pid {}: {}\n", pid, err);
        return Failure;
    }
    fmt::print(stderr, "fragscope mark: marked pid {}{}\n", pid,
               text.empty() ? "" : fmt::format(" ({})", text));
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "mark",
    .synopsis = "PID [TEXT]",
    .summary = "Mark this moment in PID's recording (a flight recorder writes a window around it)",
    .options = {},
    .details =
        "Sends the marker \"fragscope.trigger TEXT\" to the agent (or `simulate --live`) of PID,\n"
        "which puts it in its event stream at the current time. A flight recorder (`record` or\n"
        "`attach --keep`) writes a window around it, as it does around an OOM; a whole\n"
        "recording keeps it as a marker on the timelines. See docs/capture.md \"Flight\n"
        "recording\".",
    .run = runMark,
    .order = 44,
    .needsCapture = true,
});
