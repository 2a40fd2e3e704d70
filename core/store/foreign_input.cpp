#include "foreign_input.h"

#include <cctype>
#include <filesystem>
#include <zlib.h>

namespace fs::store {

InputKind inputKindOfHead(std::string_view head)
{
    if (head.empty()) return InputKind::Unknown;
    if (head.rfind("SQLite format 3", 0) == 0) return InputKind::Sqlite;
    const auto b0 = static_cast<unsigned char>(head[0]);
    // Pickles start with PROTO (0x80) from protocol 2 on; protocol 0/1 dicts start with '(' or '}'.
    if (b0 == 0x80 || ((b0 == '}' || b0 == ']') && head.size() > 1 &&
                       static_cast<unsigned char>(head[1]) >= 0x80))
        return InputKind::Pickle;
    size_t i = 0;
    while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i])))
        ++i;
    if (i < head.size() && (head[i] == '{' || head[i] == '[')) return InputKind::Json;
    return InputKind::Unknown;
}

std::string fileHead(const std::string& path, size_t n)
{
    std::string out;
    gzFile g = gzopen(path.c_str(), "rb");
    if (!g) return out;
    out.resize(n);
    const int got = gzread(g, out.data(), static_cast<unsigned>(n));
    gzclose(g);
    out.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return out;
}

std::string foreignInputProblem(const std::string& path, bool sqlite, bool nsysTables)
{
    // run.pickle -> run.fragscope, trace.json.gz -> trace.fragscope, in the current folder (the
    // trace's own may not be writable: a shared data set, a mounted run folder).
    std::filesystem::path out = std::filesystem::path(path).filename();
    if (out.extension() == ".gz") out.replace_extension();
    out.replace_extension(".fragscope");
    const std::string import = "run `fragscope import " + path + " -o " + out.string() +
                               "` (or open it directly with fragscope-gui)";
    if (sqlite)
        return nsysTables ? "an Nsight Systems SQLite export, not a fragscope session: " + import
                          : std::string();
    const std::string head = fileHead(path, 4096);
    switch (inputKindOfHead(head)) {
    case InputKind::Pickle:
        return "a PyTorch allocator snapshot (pickle), not a fragscope session: " + import;
    case InputKind::Json:
        if (head.find("traceEvents") != std::string::npos ||
            head.find("\"ph\"") != std::string::npos)
            return "a Kineto / Chrome trace (JSON), not a fragscope session: " + import;
        return "a JSON file, not a fragscope session: a Kineto trace is imported with `fragscope "
               "import " +
               path + " -o " + out.string() +
               "`, per-frame metrics are added to a session with `fragscope metrics import "
               "SESSION " +
               path + "`";
    case InputKind::Sqlite: // no SQLite header here: cannot happen
    case InputKind::Unknown:
        break;
    }
    return {};
}

} // namespace fs::store
