#include "open_input.h"

#include "importer.h"

#include "core/store/session.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs::import {

namespace {

constexpr const char* kKeyMeta = "import_source_key";

uint64_t fnv1a(const unsigned char* p, size_t n, uint64_t h = 1469598103934665603ull)
{
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

std::string env(const char* name)
{
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

enum class Existing { None, Ours, Stale, Foreign };

// What lies at a candidate place: nothing, our session of this very input, our (or a broken)
// file that may be replaced, or somebody else's session or file that must stay.
Existing inspect(const std::string& path, const std::string& key)
{
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(st)) return Existing::None;
    if (!std::filesystem::is_regular_file(st)) return Existing::Foreign;
    if (!isSessionFile(path)) return Existing::Foreign; // somebody's file: the cache is used
    try {
        // Only the key is read here; the viewer's own open checks the file's integrity.
        const Session s = Session::open(path, false);
        const std::string k = s.meta(kKeyMeta);
        if (k.empty()) return Existing::Foreign; // a session the user made another way
        return k == key ? Existing::Ours : Existing::Stale;
    } catch (const SessionError&) {
        return Existing::Stale; // our header but unreadable: an interrupted import
    }
}

bool folderWritable(const std::string& file)
{
    const std::filesystem::path dir = std::filesystem::path(file).parent_path();
    return ::access(dir.empty() ? "." : dir.c_str(), W_OK) == 0;
}

void checkCancel(const ViewImportOptions& o)
{
    if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw ImportCancelled();
}

} // namespace

bool isSessionFile(const std::string& path)
{
    unsigned char h[72] = {};
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    const size_t n = std::fread(h, 1, sizeof h, f);
    std::fclose(f);
    if (n < sizeof h || std::memcmp(h, "SQLite format 3", 16) != 0) return false;
    const uint32_t appId = (uint32_t{h[68]} << 24) | (uint32_t{h[69]} << 16) |
                           (uint32_t{h[70]} << 8) | uint32_t{h[71]};
    return appId == static_cast<uint32_t>(kApplicationId);
}

bool needsImportForViewing(const std::string& path)
{
    return !isSessionFile(path) && std::filesystem::path(path).extension() != kSessionExtension;
}

std::string SourceKey::text() const
{
    return fmt::format("{}:{}:{:016x}", size, mtimeNs, headHash);
}

SourceKey sourceKey(const std::string& path)
{
    struct stat st = {};
    if (::stat(path.c_str(), &st) != 0) throw ImportError(path, "cannot read the file");
    SourceKey k;
    k.size = static_cast<uint64_t>(st.st_size);
    k.mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw ImportError(path, "cannot read the file");
    std::vector<unsigned char> head(1 << 20);
    const size_t n = std::fread(head.data(), 1, head.size(), f);
    std::fclose(f);
    k.headHash = fnv1a(head.data(), n);
    return k;
}

std::string defaultCacheDir()
{
    if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/fragscope/imports";
    std::string home = env("HOME");
    if (home.empty()) home = ".";
    return home + "/.cache/fragscope/imports";
}

std::vector<std::string> sessionCandidates(const std::string& input, const std::string& cacheDir)
{
    namespace stdfs = std::filesystem;
    std::error_code ec;
    const stdfs::path abs = stdfs::absolute(input, ec);
    const std::string a = ec ? input : abs.string();
    const uint64_t h = fnv1a(reinterpret_cast<const unsigned char*>(a.data()), a.size());
    return {
        input + kSessionExtension,
        (stdfs::path(cacheDir) /
         fmt::format("{}-{:016x}{}", stdfs::path(input).filename().string(), h, kSessionExtension))
            .string()};
}

ViewImportResult importForViewing(const std::string& input, const ViewImportOptions& o)
{
    const std::string key = sourceKey(input).text();
    const auto places = sessionCandidates(input, o.cacheDir);
    std::vector<std::string> writable;
    for (const std::string& p : places) {
        switch (inspect(p, key)) {
        case Existing::Ours:
            return {p, true, {}};
        case Existing::None:
        case Existing::Stale:
            writable.push_back(p);
            break;
        case Existing::Foreign:
            break;
        }
    }
    checkCancel(o);

    ImportOptions io;
    io.progress = [&](uint64_t done, uint64_t total) {
        checkCancel(o);
        if (o.progress) o.progress(done, total);
    };
    auto imp = makeImporter(Format::Auto, input, io);
    imp->prepare();
    checkCancel(o);

    std::string lastError = "no place to write it";
    for (const std::string& out : writable) {
        if (out == places.front() && !folderWritable(out)) {
            lastError = "its folder is read-only";
            continue;
        }
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(out).parent_path(), ec);
        IngestOptions opts;
        imp->configure(opts);
        opts.path = out;
        if (!o.framePattern.empty()) opts.framePattern = o.framePattern;
        Ingest ingest(opts);
        try {
            ingest.begin();
        } catch (const SessionError& e) {
            ingest.abort();
            lastError = e.what();
            continue; // e.g. the folder refuses the file: try the next place
        }
        try {
            ingest.setProgress([&](int64_t) { checkCancel(o); });
            imp->emit(ingest);
            checkCancel(o);
            ingest.setMeta(kKeyMeta, key); // last: only a complete import carries it
            ingest.setMeta("import_source", input);
            ingest.end();
        } catch (...) {
            ingest.abort();
            throw;
        }
        return {out, false, imp->report().warnings};
    }
    throw ImportError(input, "cannot write its session (" + lastError + ")");
}

} // namespace fs::import
