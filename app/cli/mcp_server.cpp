#include "mcp_server.h"

#include "command.h"
#include "core/versions.h"

#include <QByteArray>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonValue>
#include <QString>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace fs::cli::mcp {

namespace {

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;

// A tool: one CLI command, its positional arguments (named as in the schema) and the options
// it requires. The other properties of its input schema are the command's own options
// (command.h), so an option added to a command appears here without a change.
struct Tool
{
    const char* name;
    const char* title;
    std::vector<const char*> positional;
    std::vector<const char*> required; // options the command refuses to run without
    std::vector<const char*> hidden;   // options that make no sense here
};

const std::vector<Tool>& tools()
{
    static const std::vector<Tool> t = {
        {"info", "Session summary and capture health", {"session"}, {}, {}},
        {"report", "Full analysis report", {"session"}, {}, {"ranks", "align"}},
        {"state", "Allocator state at one instant", {"session"}, {"at"}, {}},
        {"collapse", "Precursors of a quality collapse", {"session"}, {"frame"}, {}},
        {"graphs", "CUDA graphs and memory pools", {"session"}, {}, {}},
        {"whatif", "Replay under other allocator settings", {"session"}, {}, {}},
        {"compare", "Two sessions side by side", {"a", "b"}, {}, {}},
    };
    return t;
}

const Command* findCommand(const std::string& name)
{
    for (const Command* c : commands())
        if (c->name == name) return c;
    return nullptr;
}

// The schema property of a CLI option: "entropy-window" -> "entropy_window".
std::string propertyName(const std::string& option)
{
    std::string p = option;
    std::replace(p.begin(), p.end(), '-', '_');
    return p;
}

enum class Kind { Boolean, Integer, String, StringArray };

Kind optionKind(const Option& o)
{
    if (o.arg.empty()) return Kind::Boolean;
    if (o.arg == "N" || o.arg == "K" || o.arg == "D") return Kind::Integer;
    if (o.help.find("repeatable") != std::string::npos) return Kind::StringArray;
    return Kind::String;
}

bool isHidden(const Tool& t, const Option& o)
{
    if (o.name == "json" || o.name == "quiet") return true; // always --json; never a terminal
    return std::any_of(t.hidden.begin(), t.hidden.end(),
                       [&](const char* h) { return o.name == h; });
}

// Help text on one line.
QString oneLine(const std::string& s)
{
    QString out = QString::fromStdString(s);
    out.replace('\n', ' ');
    return out.simplified();
}

QString positionalHelp(const Tool& t, const std::string& p)
{
    if (t.positional.size() == 1)
        return "Path of the .fragscope session (relative paths: to the server's working "
               "directory).";
    return QString::fromStdString(
        fmt::format("Path of session {} (relative paths: to the server's working directory).",
                    p == "a" ? "A (the baseline)" : "B (compared against A)"));
}

QJsonObject inputSchema(const Tool& t, const Command& c)
{
    QJsonObject props;
    QJsonArray required;
    for (const char* p : t.positional) {
        props[p] = QJsonObject{{"type", "string"}, {"description", positionalHelp(t, p)}};
        required.append(p);
    }
    for (const Option& o : c.options) {
        if (isHidden(t, o)) continue;
        QJsonObject prop{{"description", oneLine(o.help)}};
        switch (optionKind(o)) {
        case Kind::Boolean:
            prop["type"] = "boolean";
            break;
        case Kind::Integer:
            prop["type"] = "integer";
            break;
        case Kind::String:
            prop["type"] = "string";
            break;
        case Kind::StringArray:
            prop["type"] = "array";
            prop["items"] = QJsonObject{{"type", "string"}};
            break;
        }
        props[QString::fromStdString(propertyName(o.name))] = prop;
        if (std::any_of(t.required.begin(), t.required.end(),
                        [&](const char* r) { return o.name == r; }))
            required.append(QString::fromStdString(propertyName(o.name)));
    }
    return QJsonObject{{"type", "object"},
                       {"properties", props},
                       {"required", required},
                       {"additionalProperties", false}};
}

QJsonObject toolDescription(const Tool& t, const Command& c)
{
    const QString desc =
        QString::fromStdString(fmt::format("{}. Returns exactly the JSON object that `fragscope {} "
                                           "... --json` prints (fields: docs/json.md).",
                                           c.summary, c.name));
    return QJsonObject{{"name", t.name},
                       {"title", t.title},
                       {"description", desc},
                       {"inputSchema", inputSchema(t, c)}};
}

QJsonArray toolList()
{
    QJsonArray list;
    for (const Tool& t : tools())
        if (const Command* c = findCommand(t.name)) list.append(toolDescription(t, *c));
    return list;
}

std::string compact(const QJsonObject& o)
{
    return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

std::string reply(const QJsonValue& id, const QJsonObject& result)
{
    return compact(QJsonObject{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
}

std::string error(const QJsonValue& id, int code, const std::string& message)
{
    return compact(QJsonObject{
        {"jsonrpc", "2.0"},
        {"id", id},
        {"error", QJsonObject{{"code", code}, {"message", QString::fromStdString(message)}}}});
}

QJsonObject textResult(const std::string& text, bool isError)
{
    return QJsonObject{{"content", QJsonArray{QJsonObject{{"type", "text"},
                                                          {"text", QString::fromStdString(text)}}}},
                       {"isError", isError}};
}

// The command line of a call, or a message saying which argument is wrong.
struct Built
{
    std::vector<std::string> argv;
    std::string problem;
};

Built buildArgv(const std::string& exe, const Tool& t, const Command& c, const QJsonObject& args)
{
    Built b;
    auto fail = [&](std::string why) {
        b.problem = std::move(why);
        return b;
    };
    for (auto it = args.begin(); it != args.end(); ++it) { // unknown names first
        const std::string key = it.key().toStdString();
        const bool positional = std::any_of(t.positional.begin(), t.positional.end(),
                                            [&](const char* p) { return key == p; });
        const bool option = std::any_of(c.options.begin(), c.options.end(), [&](const Option& o) {
            return !isHidden(t, o) && propertyName(o.name) == key;
        });
        if (!positional && !option)
            return fail(
                fmt::format("tool {}: unknown argument '{}' (see its inputSchema)", t.name, key));
    }
    b.argv = {exe, c.name};
    for (const char* p : t.positional) {
        const QJsonValue v = args.value(p);
        if (v.isUndefined())
            return fail(fmt::format("tool {}: argument '{}' is required", t.name, p));
        if (!v.isString() || v.toString().isEmpty())
            return fail(fmt::format("tool {}: argument '{}' must be a non-empty string (a session "
                                    "path)",
                                    t.name, p));
        b.argv.push_back(v.toString().toStdString());
    }
    for (const Option& o : c.options) {
        if (isHidden(t, o)) continue;
        const std::string key = propertyName(o.name);
        const QJsonValue v = args.value(QString::fromStdString(key));
        if (v.isUndefined() || v.isNull()) {
            if (std::any_of(t.required.begin(), t.required.end(),
                            [&](const char* r) { return o.name == r; }))
                return fail(fmt::format("tool {}: argument '{}' is required ({})", t.name, key,
                                        oneLine(o.help).toStdString()));
            continue;
        }
        const std::string flag = "--" + o.name;
        switch (optionKind(o)) {
        case Kind::Boolean:
            if (!v.isBool())
                return fail(fmt::format("tool {}: argument '{}' must be a boolean", t.name, key));
            if (v.toBool()) b.argv.push_back(flag);
            break;
        case Kind::Integer: {
            const double d = v.toDouble();
            if (!v.isDouble() || std::floor(d) != d || std::fabs(d) > 9.0e15)
                return fail(fmt::format("tool {}: argument '{}' must be an integer", t.name, key));
            b.argv.push_back(fmt::format("{}={}", flag, v.toInteger()));
            break;
        }
        case Kind::String:
            if (!v.isString())
                return fail(fmt::format("tool {}: argument '{}' must be a string", t.name, key));
            b.argv.push_back(flag + "=" + v.toString().toStdString());
            break;
        case Kind::StringArray: {
            QJsonArray a;
            if (v.isString())
                a.append(v);
            else if (v.isArray())
                a = v.toArray();
            else
                return fail(
                    fmt::format("tool {}: argument '{}' must be an array of strings", t.name, key));
            for (const QJsonValue& e : a) {
                if (!e.isString())
                    return fail(fmt::format("tool {}: argument '{}' must be an array of strings",
                                            t.name, key));
                b.argv.push_back(flag + "=" + e.toString().toStdString());
            }
            break;
        }
        }
    }
    b.argv.push_back("--json");
    return b;
}

std::string trimmed(std::string s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    return s;
}

} // namespace

const std::vector<std::string>& protocolVersions()
{
    static const std::vector<std::string> v = {"2025-11-25", "2025-06-18", "2025-03-26",
                                               "2024-11-05"};
    return v;
}

ChildOutput runCapture(const std::vector<std::string>& argv)
{
    ChildOutput r;
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        r.exitStatus = 126;
        r.err = std::string("cannot create a pipe: ") + std::strerror(errno);
        for (int fd : {out[0], out[1], err[0], err[1]})
            if (fd >= 0) ::close(fd);
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // The child must not read the protocol stream: stdin from /dev/null.
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    std::vector<char*> cargv;
    for (const auto& a : argv)
        cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
        ::close(out[0]);
        ::close(err[0]);
        r.exitStatus = 127;
        r.err = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc));
        return r;
    }
    // Both pipes at once: a child filling one while we block on the other would deadlock.
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    int open = 2;
    char buf[65536];
    while (open > 0) {
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                sinks[i]->append(buf, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    for (const pollfd& p : fds)
        if (p.fd >= 0) ::close(p.fd);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.exitStatus = WIFEXITED(status)     ? WEXITSTATUS(status)
                   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                         : 1;
    return r;
}

Server::Server(std::string exe) : exe_(std::move(exe)), protocolVersion_(protocolVersions()[0]) {}

std::string Server::toolsListJson() const
{
    return QJsonDocument(QJsonObject{{"tools", toolList()}})
        .toJson(QJsonDocument::Indented)
        .toStdString();
}

std::optional<std::string> Server::handle(const std::string& line)
{
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(line), &perr);
    if (perr.error != QJsonParseError::NoError)
        return error(QJsonValue::Null, kParseError,
                     fmt::format("Parse error: {} at offset {} of the line",
                                 perr.errorString().toStdString(), perr.offset));
    if (!doc.isObject())
        return error(QJsonValue::Null, kInvalidRequest,
                     "Invalid Request: a message is one JSON object (batches are not supported)");
    const QJsonObject msg = doc.object();
    const bool notification = !msg.contains("id");
    const QJsonValue id = msg.value("id");
    if (!msg.contains("method")) {
        // A response to a request of ours: this server sends none, so there is nothing to match.
        if (msg.contains("result") || msg.contains("error")) return std::nullopt;
        return error(id.isString() || id.isDouble() ? id : QJsonValue::Null, kInvalidRequest,
                     "Invalid Request: no \"method\"");
    }
    if (msg.value("jsonrpc").toString() != "2.0" || !msg.value("method").isString() ||
        (!notification && !id.isString() && !id.isDouble()))
        return notification
                   ? std::nullopt
                   : std::optional(error(id.isString() || id.isDouble() ? id : QJsonValue::Null,
                                         kInvalidRequest,
                                         "Invalid Request: needs \"jsonrpc\": \"2.0\", a "
                                         "string \"method\" and a string or number \"id\""));
    const std::string method = msg.value("method").toString().toStdString();
    if (notification) return std::nullopt; // notifications/initialized, cancelled, …: nothing to do
    const QJsonValue paramsValue = msg.value("params");
    if (!paramsValue.isUndefined() && !paramsValue.isObject())
        return error(id, kInvalidParams, "Invalid params: \"params\" must be an object");
    const QJsonObject params = paramsValue.toObject();

    if (method == "initialize") {
        const std::string asked = params.value("protocolVersion").toString().toStdString();
        const auto& known = protocolVersions();
        protocolVersion_ =
            std::find(known.begin(), known.end(), asked) != known.end() ? asked : known[0];
        return reply(
            id, QJsonObject{
                    {"protocolVersion", QString::fromStdString(protocolVersion_)},
                    {"capabilities", QJsonObject{{"tools", QJsonObject{{"listChanged", false}}}}},
                    {"serverInfo",
                     QJsonObject{{"name", "fragscope"},
                                 {"title", "fragscope GPU-memory fragmentation profiler"},
                                 {"version", QString::fromStdString(fragscopeVersion())}}},
                    {"instructions",
                     "Each tool analyses fragscope session files (.fragscope) and returns the "
                     "JSON of the matching `fragscope COMMAND --json` (fields: docs/json.md). "
                     "Start with info or report; state, collapse, graphs, whatif and compare "
                     "go deeper."}});
    }
    if (method == "ping") return reply(id, QJsonObject{});
    if (method == "tools/list") return reply(id, QJsonObject{{"tools", toolList()}});
    if (method != "tools/call")
        return error(id, kMethodNotFound, fmt::format("Method not found: {}", method));

    const QJsonValue name = params.value("name");
    if (!name.isString())
        return error(id, kInvalidParams, "Invalid params: tools/call needs a string \"name\"");
    const std::string toolName = name.toString().toStdString();
    const auto tool = std::find_if(tools().begin(), tools().end(),
                                   [&](const Tool& t) { return toolName == t.name; });
    const Command* cmd = tool == tools().end() ? nullptr : findCommand(tool->name);
    if (!cmd) {
        std::string names;
        for (const Tool& t : tools())
            names += (names.empty() ? "" : ", ") + std::string(t.name);
        return error(id, kInvalidParams,
                     fmt::format("Invalid params: unknown tool '{}' (tools: {})", toolName, names));
    }
    const QJsonValue argsValue = params.value("arguments");
    if (!argsValue.isUndefined() && !argsValue.isNull() && !argsValue.isObject())
        return error(id, kInvalidParams, "Invalid params: \"arguments\" must be an object");
    // Arguments that do not fit the schema are a tool error the model can read and correct.
    const Built b = buildArgv(exe_, *tool, *cmd, argsValue.toObject());
    if (!b.problem.empty()) return reply(id, textResult(b.problem, true));

    const auto t0 = std::chrono::steady_clock::now();
    const ChildOutput r = runCapture(b.argv);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "fragscope mcp: {} ({:.2f} s, exit status {})\n", toolName, secs,
               r.exitStatus);
    if (r.exitStatus != 0) {
        std::string text = trimmed(r.err);
        if (text.empty()) text = fmt::format("fragscope {} failed", cmd->name);
        text += fmt::format("\n(fragscope {} exited with status {}{})", cmd->name, r.exitStatus,
                            r.exitStatus == BadInput ? ": bad input file"
                            : r.exitStatus == Usage  ? ": bad arguments"
                                                     : "");
        return reply(id, textResult(text, true));
    }
    QJsonParseError oerr;
    const QJsonDocument out = QJsonDocument::fromJson(QByteArray::fromStdString(r.out), &oerr);
    if (oerr.error != QJsonParseError::NoError || !out.isObject())
        return reply(id, textResult(fmt::format("fragscope {} did not print one JSON object: {}",
                                                cmd->name, trimmed(r.out).substr(0, 200)),
                                    true));
    QJsonObject result = textResult(r.out, false);
    // structuredContent: from protocol revision 2025-06-18 on.
    if (protocolVersion_ >= "2025-06-18") result["structuredContent"] = out.object();
    return reply(id, result);
}

} // namespace fs::cli::mcp
