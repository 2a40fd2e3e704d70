// fragscope import INPUT... -o OUT.fragscope [--format F]: other tools' traces into a session.
#include "cli_settings.h"
#include "command.h"
#include "core/import/importer.h"
#include "core/progress.h"
#include "core/store/ingest.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;

namespace {

// A per-frame metrics table (CSV, or JSON without Chrome-trace fields): `fragscope metrics
// import` reads those; an import with one calls it on the new session.
bool looksLikeMetricsTable(const std::string& path)
{
    const std::string head = import::sniff(path, 4096);
    if (head.empty() || head.rfind("SQLite format 3", 0) == 0 ||
        static_cast<unsigned char>(head[0]) >= 0x80)
        return false;
    size_t i = 0;
    while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i])))
        ++i;
    if (i < head.size() && (head[i] == '{' || head[i] == '['))
        return head.find("traceEvents") == std::string::npos &&
               head.find("\"ph\"") == std::string::npos &&
               head.find("\"frame") != std::string::npos;
    std::string first = head.substr(i, head.find('\n', i) - i);
    std::transform(first.begin(), first.end(), first.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return first.find("frame") != std::string::npos &&
           first.find_first_of(",;\t") != std::string::npos;
}

int runImport(Args& a)
{
    if (a.positional().empty()) throw UsageError("import needs at least one INPUT file");
    const auto out = a.get("output");
    if (!out || out->empty()) throw UsageError("import needs -o OUT.fragscope");
    import::Format format = import::Format::Auto;
    const std::string fmtName = a.get("format", "auto");
    if (!import::parseFormat(fmtName, format))
        throw UsageError("unknown --format '" + fmtName +
                         "' (auto, pytorch-snapshot, kineto, nsys-sqlite)");
    for (const auto& in : a.positional())
        if (std::filesystem::absolute(in) == std::filesystem::absolute(*out))
            throw UsageError("the output would overwrite the input " + in);

    // Read every input's header first: bad input fails before any output file exists.
    std::vector<std::unique_ptr<import::Importer>> importers;
    std::vector<std::shared_ptr<Progress>> reading; // one per importer, until its emit ends
    std::vector<std::string> metricsTables;
    for (const auto& in : a.positional()) {
        if (looksLikeMetricsTable(in)) {
            metricsTables.push_back(in);
            continue;
        }
        auto progress = std::make_shared<Progress>(
            "reading " + std::filesystem::path(in).filename().string(), 0, "bytes");
        import::ImportOptions io;
        io.progress = [progress](uint64_t done, uint64_t) {
            progress->update(static_cast<int64_t>(done));
        };
        auto imp = import::makeImporter(format, in, io);
        imp->prepare();
        importers.push_back(std::move(imp));
        reading.push_back(std::move(progress));
    }

    if (importers.empty())
        throw UsageError(
            "import needs at least one trace input (a snapshot, Kineto trace or nsys export); "
            "a metrics table alone goes to `fragscope metrics import SESSION TABLE`");
    IngestOptions opts;
    opts.path = *out;
    opts.framePattern = commandSettings(a).framePattern; // frames are found while writing
    importers.front()->configure(opts);
    for (size_t i = 1; i < importers.size(); ++i) {
        IngestOptions other;
        importers[i]->configure(other);
        // One session holds one clock; allocations outside regions are expected as soon as one
        // input has no regions.
        opts.expectRegions = opts.expectRegions && other.expectRegions;
        opts.aliveAtEndIsAnomaly = opts.aliveAtEndIsAnomaly && other.aliveAtEndIsAnomaly;
        opts.addressViewAvailable = opts.addressViewAvailable && other.addressViewAvailable;
    }
    Ingest ingest(opts);
    try {
        ingest.begin();
        Progress progress("importing", 0, "events");
        ingest.setProgress([&](int64_t n) { progress.update(n); });
        for (size_t i = 0; i < importers.size(); ++i) {
            if (i > 0) {
                IngestOptions o;
                importers[i]->configure(o);
                ingest.addSource(o.sourceKind, o.sourcePath);
            }
            importers[i]->emit(ingest);
            reading[i]->finish();
        }
        ingest.end();
        progress.finish();
    } catch (...) {
        ingest.abort();
        throw;
    }
    // Per-frame metric tables go through `fragscope metrics import` (one parser for them); if
    // one is bad, the new session is removed so that no partial output is left.
    for (const auto& table : metricsTables) {
        const auto& cmds = commands();
        auto it = std::find_if(cmds.begin(), cmds.end(),
                               [](const Command* c) { return c->name == "metrics import"; });
        if (it == cmds.end())
            throw std::runtime_error("this build has no `metrics import` command for " + table);
        int rc = Failure;
        try {
            Args margs(**it, {*out, table});
            rc = (*it)->run(margs); // prints its own errors (bad rows with line numbers)
        } catch (...) {
            std::error_code ec;
            std::filesystem::remove(*out, ec);
            throw;
        }
        if (rc != Ok) {
            std::error_code ec;
            std::filesystem::remove(*out, ec);
            return rc;
        }
    }
    const IngestStats& st = ingest.stats();
    std::string warnings;
    for (const auto& imp : importers)
        for (const auto& w : imp->report().warnings)
            fmt::print(stderr, "warning: {}: {}\n", imp->path(), w);
    storeAnalysisIndex(*out, a);
    fmt::print("{}: {} events, {} allocations, {} regions, {} anomalies\n", *out, st.events,
               st.allocations, st.regions, st.anomalies);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "import",
    .synopsis = "INPUT... -o OUT.fragscope [--format auto|pytorch-snapshot|kineto|nsys-sqlite] "
                "[--quiet] [--index|--no-index]",
    .summary = "Import PyTorch allocator snapshots, Kineto traces or Nsight Systems SQLite exports",
    .options = withIndexOptions(
        {{"output", "OUT.fragscope", "session file to write, also -o (replaced if it exists)"},
         {"format", "F",
          "auto (default: detected from the content), pytorch-snapshot, kineto, nsys-sqlite"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"},
         {"settings", "FILE",
          "settings file whose frame_pattern finds the frames (default: the user's,\n"
          "docs/settings.md)"}}),
    .details = "Formats (docs/importers.md):\n"
               "  pytorch-snapshot  torch.cuda.memory._dump_snapshot() pickles; read as plain "
               "data, never\n"
               "                    executed. The trace is replayed from a reconstructed start "
               "state so the\n"
               "                    session ends in exactly the snapshot's final state.\n"
               "  kineto            torch.profiler Chrome-trace JSON (.json or .json.gz): [memory] "
               "events,\n"
               "                    kernels, 'frame N' annotations.\n"
               "  nsys-sqlite       `nsys export --type sqlite` files: memory usage, kernels, "
               "graphs, NVTX.\n"
               "  CSV/JSON tables of per-frame metrics given as extra inputs are attached through\n"
               "                    `fragscope metrics import`.\n"
               "Several inputs go into one session. A truncated, corrupt or hostile input gives "
               "one error\n"
               "naming the file and the offset or table, exit status 2, and no output file.",
    .run = runImport,
    .order = 30,
});
