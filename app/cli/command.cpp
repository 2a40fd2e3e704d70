#include "command.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <fmt/format.h>

namespace fs::cli {

std::vector<const Command*>& commands()
{
    static std::vector<const Command*> list;
    return list;
}

// The commands themselves, at stable addresses, freed at exit (LeakSanitizer stays quiet).
static std::deque<Command>& storage()
{
    static std::deque<Command> s;
    return s;
}

Registrar::Registrar(Command c)
{
    commands().push_back(&storage().emplace_back(std::move(c)));
}

Args::Args(const Command& cmd, std::vector<std::string> argv) : cmd_(cmd)
{
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a == "--") {
            rest_.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
            break;
        }
        if (a.size() > 2 && a.starts_with("--")) {
            std::string name = a.substr(2);
            std::optional<std::string> inlineValue;
            if (auto eq = name.find('='); eq != std::string::npos) {
                inlineValue = name.substr(eq + 1);
                name.resize(eq);
            }
            auto opt = std::find_if(cmd.options.begin(), cmd.options.end(),
                                    [&](const Option& o) { return o.name == name; });
            if (opt == cmd.options.end())
                throw UsageError(
                    fmt::format("unknown option --{} (see fragscope {} --help)", name, cmd.name));
            if (opt->arg.empty()) {
                if (inlineValue) throw UsageError(fmt::format("option --{} takes no value", name));
                values_[name] = "1";
            } else if (inlineValue) {
                values_[name] = *inlineValue;
                all_[name].push_back(*inlineValue);
            } else {
                if (i + 1 >= argv.size())
                    throw UsageError(fmt::format("option --{} needs a value ({})", name, opt->arg));
                values_[name] = argv[++i];
                all_[name].push_back(values_[name]);
            }
        } else if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
            // Short forms: -o FILE only.
            if (a == "-o") {
                if (i + 1 >= argv.size()) throw UsageError("option -o needs a value (FILE)");
                auto opt = std::find_if(cmd.options.begin(), cmd.options.end(),
                                        [&](const Option& o) { return o.name == "output"; });
                if (opt == cmd.options.end())
                    throw UsageError(fmt::format("fragscope {} has no -o option", cmd.name));
                values_["output"] = argv[++i];
            } else {
                throw UsageError(
                    fmt::format("unknown option {} (see fragscope {} --help)", a, cmd.name));
            }
        } else {
            positional_.push_back(a);
        }
    }
}

std::vector<std::string> Args::getAll(const std::string& name) const
{
    auto it = all_.find(name);
    return it == all_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> Args::get(const std::string& name) const
{
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::string Args::get(const std::string& name, const std::string& fallback) const
{
    return get(name).value_or(fallback);
}

int64_t Args::getInt(const std::string& name, int64_t fallback) const
{
    auto v = get(name);
    return v ? parseCount(*v, "--" + name) : fallback;
}

double Args::getDouble(const std::string& name, double fallback) const
{
    auto v = get(name);
    if (!v) return fallback;
    double d = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), d);
    if (ec != std::errc() || p != v->data() + v->size())
        throw UsageError(fmt::format("--{}: '{}' is not a number", name, *v));
    return d;
}

void Args::expectPositional(size_t n, const std::string& what) const
{
    if (positional_.size() < n)
        throw UsageError(
            fmt::format("missing {} (usage: fragscope {} {})", what, cmd_.name, cmd_.synopsis));
    if (positional_.size() > n)
        throw UsageError(fmt::format("unexpected argument '{}' (usage: fragscope {} {})",
                                     positional_[n], cmd_.name, cmd_.synopsis));
}

int64_t parseCount(const std::string& s, const std::string& what)
{
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p == s.data())
        throw UsageError(fmt::format("{}: '{}' is not a number", what, s));
    const std::string suffix(p, s.data() + s.size());
    int64_t mul = 1;
    if (suffix.empty())
        mul = 1;
    else if (suffix == "k" || suffix == "K")
        mul = 1000;
    else if (suffix == "M")
        mul = 1000 * 1000;
    else if (suffix == "G")
        mul = 1000 * 1000 * 1000;
    else
        throw UsageError(
            fmt::format("{}: unknown suffix '{}' in '{}' (use k, M or G)", what, suffix, s));
    if (v < 0) throw UsageError(fmt::format("{}: '{}' must not be negative", what, s));
    return v * mul;
}

std::string helpText(const Command& c)
{
    std::string out = fmt::format("Usage: fragscope {} {}\n\n{}\n", c.name, c.synopsis, c.summary);
    if (!c.options.empty()) {
        out += "\nOptions:\n";
        for (const auto& o : c.options) {
            std::string left = "--" + o.name + (o.arg.empty() ? "" : " " + o.arg);
            if (o.name == "output") left = "-o, " + left;
            // Continuation lines of a long help start under its first line.
            std::string help = o.help;
            for (size_t p = help.find('\n'); p != std::string::npos; p = help.find('\n', p + 1))
                help.insert(p + 1, std::string(2 + 26 + 1, ' '));
            out += fmt::format("  {:<26} {}\n", left, help);
        }
    }
    out += fmt::format("  {:<26} {}\n", "--help", "show this help");
    if (!c.details.empty()) out += "\n" + c.details + "\n";
    return out;
}

} // namespace fs::cli
