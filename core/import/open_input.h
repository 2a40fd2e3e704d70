// Opening a trace where a session opens (fragscope-gui run.pickle, File > Open, drag and drop):
// the input is imported once into a session file, beside the input or, where that folder is
// read-only, in the cache directory; opening the same unchanged input again reuses that session.
// "Unchanged" is keyed by size, modification time and a hash of the first MiB, stored in the
// session's meta table (import_source_key). Plain C++, no Qt; the GUI runs it on a worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace fs::import {

// Thrown by importForViewing when its cancel flag is raised; nothing is left on disk.
class ImportCancelled : public std::exception
{
public:
    const char* what() const noexcept override { return "import cancelled"; }
};

// A fragscope session file (SQLite with the session's application id), not a trace to import.
bool isSessionFile(const std::string& path);
// What a viewer imports before opening: anything that is not a session by content, except a file
// named *.fragscope (opened as a session, so a damaged one is reported as such).
bool needsImportForViewing(const std::string& path);

struct SourceKey
{
    uint64_t size = 0;
    int64_t mtimeNs = 0;
    uint64_t headHash = 0;    // FNV-1a 64 of the first MiB
    std::string text() const; // "size:mtime:hash", what the session's meta holds
};
// Throws SessionError naming the file when it cannot be read.
SourceKey sourceKey(const std::string& path);

// $XDG_CACHE_HOME/fragscope/imports, else $HOME/.cache/fragscope/imports.
std::string defaultCacheDir();

struct ViewImportOptions
{
    // Bytes of input read so far and the total (0 when unknown), from the importing thread.
    std::function<void(uint64_t done, uint64_t total)> progress;
    const std::atomic<bool>* cancel = nullptr;
    std::string framePattern; // empty: ingest's default
    std::string cacheDir = defaultCacheDir();
};

struct ViewImportResult
{
    std::string session;
    bool reused = false; // an earlier import of the same unchanged input
    std::vector<std::string> warnings;
};

// Candidate places for input's session, in order of preference: beside it (INPUT.fragscope),
// then cacheDir/NAME-HASH.fragscope (HASH of the absolute input path).
std::vector<std::string> sessionCandidates(const std::string& input, const std::string& cacheDir);

// Reuses or writes the session of input. Bad input throws ImportError (a SessionError naming
// the file and where it broke); a raised cancel flag throws ImportCancelled. A file at a
// candidate place that is a session this function did not write is never replaced.
ViewImportResult importForViewing(const std::string& input, const ViewImportOptions& o = {});

} // namespace fs::import
