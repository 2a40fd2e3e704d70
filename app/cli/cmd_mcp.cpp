// fragscope mcp: a Model Context Protocol server on stdin/stdout for agents (docs/mcp.md). The
// protocol lives in mcp_server.cpp; this file reads the lines and writes the answers.
#include "command.h"
#include "mcp_server.h"

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <string>

using namespace fs;
using namespace fs::cli;

namespace {

int runMcp(Args& a)
{
    a.expectPositional(0, "");
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec)
        throw std::runtime_error("cannot find this program's path (/proc/self/exe): " +
                                 ec.message());
    mcp::Server server(exe.string());
    if (a.flag("list-tools")) {
        fmt::print("{}", server.toolsListJson());
        return Ok;
    }
    // stdout carries protocol messages only; anything else goes to stderr.
    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        if (const auto answer = server.handle(line)) {
            std::fwrite(answer->data(), 1, answer->size(), stdout);
            std::fputc('\n', stdout);
            std::fflush(stdout);
        }
    }
    return Ok; // the client closed stdin
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "mcp",
    .synopsis = "[--list-tools]",
    .summary = "Serve the analysis commands to agents: a Model Context Protocol server on stdio",
    .options = {{"list-tools", "",
                 "print the tools and their input schemas (the tools/list answer) and exit"}},
    .details =
        "Reads JSON-RPC 2.0 messages, one per line, on stdin and answers one per line on\n"
        "stdout (the MCP stdio transport; protocol revisions 2025-11-25, 2025-06-18,\n"
        "2025-03-26, 2024-11-05). Tools: info, report, state, collapse, graphs, whatif and\n"
        "compare. Each takes the session path(s) (\"session\"; compare: \"a\" and \"b\") and the\n"
        "command's options as arguments (--entropy-window becomes \"entropy_window\"), runs\n"
        "`fragscope COMMAND ... --json` as a child process and returns exactly what it prints:\n"
        "as text content, and parsed as structuredContent (revision 2025-06-18 on). A command\n"
        "that fails gives a result with isError true and its error message (which names the\n"
        "file). Logs go to stderr, one line per call. It exits 0 when stdin closes.\n"
        "Client configuration (e.g. an \"mcpServers\" entry): command \"fragscope\", args\n"
        "[\"mcp\"]. See docs/mcp.md.",
    .run = runMcp,
    .order = 90,
});
