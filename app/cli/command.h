// Command registry of the `fragscope` CLI. Each command lives in its own cmd_<name>.cpp and
// registers itself with FRAGSCOPE_COMMAND; main.cpp dispatches and prints help.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs::cli {

// Exit codes shared by every command.
enum Exit : int { Ok = 0, Failure = 1, BadInput = 2, Usage = 64 };

class UsageError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

struct Option
{
    std::string name; // without the leading dashes
    std::string arg;  // empty for a flag
    std::string help;
};

class Args;

struct Command
{
    std::string name;     // may contain a space for sub-commands ("metrics import")
    std::string synopsis; // "FILE [--json]"
    std::string summary;  // one line for the command list
    std::vector<Option> options;
    std::string details; // free text after the options in --help
    int (*run)(Args&) = nullptr;
    int order = 100; // position in `fragscope --help`
    // Needs the CUPTI agent: unavailable, with a reason, in a build without capture
    // (fs::captureBuilt()).
    bool needsCapture = false;
    // Needs OpenCV: unavailable, with a reason, in a build without video metrics
    // (fs::videoBuilt()).
    bool needsVideo = false;
};

class Args
{
public:
    Args(const Command& cmd, std::vector<std::string> argv); // throws UsageError
    const std::vector<std::string>& positional() const { return positional_; }
    // Arguments after "--" (record, launch).
    const std::vector<std::string>& rest() const { return rest_; }
    bool flag(const std::string& name) const { return values_.count(name) != 0; }
    std::optional<std::string> get(const std::string& name) const;
    // Every value of a repeatable option, in command-line order.
    std::vector<std::string> getAll(const std::string& name) const;
    std::string get(const std::string& name, const std::string& fallback) const;
    int64_t getInt(const std::string& name, int64_t fallback) const;
    double getDouble(const std::string& name, double fallback) const;
    // Exactly n positional arguments, named for the error message.
    void expectPositional(size_t n, const std::string& what) const;

private:
    const Command& cmd_;
    std::vector<std::string> positional_;
    std::vector<std::string> rest_;
    std::map<std::string, std::string> values_;
    std::map<std::string, std::vector<std::string>> all_;
};

std::vector<const Command*>& commands();
struct Registrar
{
    explicit Registrar(Command c);
};
std::string helpText(const Command& c);

// Parses a byte count or event count with optional suffix (k, M, G).
int64_t parseCount(const std::string& s, const std::string& what);

#define FRAGSCOPE_CONCAT2(a, b) a##b
#define FRAGSCOPE_CONCAT(a, b) FRAGSCOPE_CONCAT2(a, b)
#define FRAGSCOPE_COMMAND(...)                                                                     \
    static const ::fs::cli::Registrar FRAGSCOPE_CONCAT(fragscopeCommand_,                          \
                                                       __LINE__)(::fs::cli::Command __VA_ARGS__)

} // namespace fs::cli
