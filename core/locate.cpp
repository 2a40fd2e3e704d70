#include "locate.h"

#include <cstdlib>
#include <filesystem>

namespace fs {

namespace stdfs = std::filesystem;

std::string findRuntimeLibrary(const std::string& file, const char* envVar,
                               const std::vector<std::string>& more,
                               std::vector<std::string>* tried)
{
    std::vector<std::string> candidates;
    if (const char* p = envVar ? std::getenv(envVar) : nullptr; p && *p) candidates.emplace_back(p);
    std::error_code ec;
    const stdfs::path exe = stdfs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const stdfs::path bin = exe.parent_path();
        candidates.push_back((bin / file).string());
        candidates.push_back((bin.parent_path() / "lib" / "fragscope" / file).string());
        candidates.push_back((bin.parent_path() / "lib" / file).string());
    }
    candidates.insert(candidates.end(), more.begin(), more.end());
    if (tried) *tried = candidates;
    for (const auto& c : candidates)
        if (stdfs::exists(c, ec)) return stdfs::absolute(c, ec).string();
    return {};
}

} // namespace fs
