// `fragscope mcp`: a Model Context Protocol server (JSON-RPC 2.0, one message per line on stdin
// and stdout) whose tools are the CLI's analysis commands (docs/mcp.md). Each tool call runs this
// binary itself as `fragscope COMMAND ARGS… --json` in a child process and returns what it printed,
// so a tool's result is byte for byte the command's --json output (docs/json.md): one code path
// for the figures, and a command that fails or prints cannot break the protocol stream.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fs::cli::mcp {

// What a child run gave: exit status (128 + signal when killed), stdout and stderr.
struct ChildOutput
{
    int exitStatus = 0;
    std::string out;
    std::string err;
};

// Runs argv (argv[0] a path, no shell) with stdin from /dev/null and captures stdout and stderr.
ChildOutput runCapture(const std::vector<std::string>& argv);

class Server
{
public:
    // exe: the fragscope binary the tools run (/proc/self/exe).
    explicit Server(std::string exe);
    // One line from the client; the response line (no newline) or nothing for a notification.
    std::optional<std::string> handle(const std::string& line);
    // The tools/list result as JSON (for `fragscope mcp --list-tools`).
    std::string toolsListJson() const;

private:
    std::string exe_;
    std::string protocolVersion_; // negotiated by initialize
};

// The protocol revisions this server speaks, newest first.
const std::vector<std::string>& protocolVersions();

} // namespace fs::cli::mcp
