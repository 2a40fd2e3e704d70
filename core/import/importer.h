// Importers turn other tools' traces into fragscope sessions through fs::Ingest.
// Use: detectFormat() -> makeImporter() -> prepare() (reads what must be known before the
// session exists; may parse the whole input) -> configure(IngestOptions&) -> Ingest::begin() ->
// emit(Ingest&) -> Ingest::end(). Bad input throws ImportError (a SessionError naming the file
// and the offset or table); the caller then calls Ingest::abort() so no partial file is left.
#pragma once

#include "byte_reader.h"
#include "core/store/ingest.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace fs::import {

enum class Format { Auto, PytorchSnapshot, Kineto, NsysSqlite };
std::string_view formatName(Format f);
bool parseFormat(std::string_view s, Format& out);
// Detects the format from the content (never the extension); throws ImportError when unknown.
Format detectFormat(const std::string& path);

struct ImportOptions
{
    // Progress: bytes of input read so far (0 total when unknown).
    std::function<void(uint64_t done, uint64_t total)> progress;
};

// What an import found, for the CLI's summary and the tests.
struct ImportReport
{
    std::map<std::string, int64_t> counts; // e.g. "trace.alloc", "memory_events", "kernels"
    std::vector<std::string> warnings;
};

class Importer
{
public:
    virtual ~Importer() = default;
    virtual Format format() const = 0;
    const std::string& path() const { return path_; }
    virtual void prepare() = 0;
    virtual void configure(IngestOptions& opts) const = 0;
    virtual void emit(Ingest& ingest) = 0;
    const ImportReport& report() const { return report_; }

protected:
    Importer(std::string path, ImportOptions opts) : path_(std::move(path)), opts_(std::move(opts))
    {
    }
    // Records a warning in the report and, once emit() runs, in the session's capture health.
    void warn(Ingest* ingest, const std::string& message);
    std::string path_;
    ImportOptions opts_;
    ImportReport report_;
};

std::unique_ptr<Importer> makeImporter(Format f, const std::string& path, ImportOptions opts = {});
std::unique_ptr<Importer> makePytorchSnapshotImporter(const std::string& path, ImportOptions opts);
std::unique_ptr<Importer> makeKinetoImporter(const std::string& path, ImportOptions opts);
std::unique_ptr<Importer> makeNsysImporter(const std::string& path, ImportOptions opts);

} // namespace fs::import
