// fragscope ps [--json]: this user's attachable processes.
#include "capture/recorder/recorder.h"
#include "command.h"
#include "core/json.h"

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;

namespace {

int runPs(Args& a)
{
    if (!a.positional().empty()) throw UsageError("ps takes no arguments");
    const auto targets = capture::listTargets();
    if (a.flag("json")) {
        JsonWriter j;
        j.beginDocument();
        j.key("processes").beginArray();
        for (const auto& t : targets) {
            j.beginObject();
            j.field("pid", static_cast<int64_t>(t.pid));
            j.field("state", t.state);
            j.field("kind", t.kind);
            j.field("events_sent", t.eventsSent);
            j.field("dropped_records", t.dropped);
            j.field("launched_by_pid", static_cast<int64_t>(t.launchedBy));
            j.field("command_line", t.commandLine);
            j.field("socket_path", t.socketPath);
            if (!t.error.empty()) j.field("error", t.error);
            j.endObject();
        }
        j.endArray();
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }
    if (targets.empty()) {
        fmt::print("no attachable processes (start one with `fragscope launch -- CMD` or "
                   "`fragscope record -o FILE -- CMD`)\n");
        return Ok;
    }
    fmt::print("{:>8}  {:<11} {:<9} {:>12}  {}\n", "PID", "STATE", "KIND", "EVENTS", "COMMAND");
    for (const auto& t : targets)
        fmt::print("{:>8}  {:<11} {:<9} {:>12}  {}{}\n", t.pid, t.state,
                   t.kind.empty() ? "?" : t.kind, t.eventsSent, t.commandLine,
                   t.error.empty() ? "" : "  (" + t.error + ")");
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "ps",
    .synopsis = "[--json]",
    .summary = "List this user's processes that can be attached to (agent or simulate --live)",
    .options =
        {{"json", "",
          "print one JSON object: {schema_version, processes: [...]}\n(fields: docs/json.md)"}},
    .details =
        "Looks for control sockets in $XDG_RUNTIME_DIR/fragscope (else /tmp/fragscope-UID),\n"
        "asks each target for its state (idle, waiting, recording, disabled) and removes\n"
        "sockets left by processes that died.",
    .run = runPs,
    .order = 43,
    .needsCapture = true,
});
