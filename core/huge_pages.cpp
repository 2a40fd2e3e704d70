#include "huge_pages.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs {

namespace {

// Set only between the re-execution and preferHugePages() in the new image: "-" when the caller
// had no GLIBC_TUNABLES, else "=" and its value.
constexpr const char* kSaved = "FRAGSCOPE_SAVED_GLIBC_TUNABLES";
constexpr const char* kTunable = "glibc.malloc.hugetlb=1";

std::string& status()
{
    static std::string s = "not requested";
    return s;
}

bool sanitized()
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return true; // the sanitizer's allocator replaces malloc: the tunable means nothing
#else
    return false;
#endif
}

// The kernel's mode: the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled.
std::string thpMode()
{
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(f, line);
    const size_t a = line.find('['), b = line.find(']');
    return a == std::string::npos || b == std::string::npos || b < a
               ? std::string()
               : line.substr(a + 1, b - a - 1);
}

// Bytes in the regular files argv names (sessions, snapshots), stopping at kHugePagesFrom.
unsigned long long inputBytes(char** argv)
{
    unsigned long long sum = 0;
    for (char** a = argv + 1; *a && sum < kHugePagesFrom; ++a) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(*a, ec)) {
            const auto n = std::filesystem::file_size(*a, ec);
            if (!ec) sum += n;
        }
    }
    return sum;
}

} // namespace

void preferHugePages(char** argv, bool onlyForLargeInputs)
{
    if (const char* saved = std::getenv(kSaved)) {
        // The re-executed image: glibc has read the tunable; give the environment back.
        if (saved[0] == '=')
            ::setenv("GLIBC_TUNABLES", saved + 1, 1);
        else
            ::unsetenv("GLIBC_TUNABLES");
        ::unsetenv(kSaved);
        status() = "on (glibc.malloc.hugetlb=1)";
        return;
    }
    const char* given = std::getenv("GLIBC_TUNABLES");
    if (given && std::strstr(given, "glibc.malloc.hugetlb")) {
        status() = std::string("as given in GLIBC_TUNABLES (") + given + ")";
        return;
    }
    if (sanitized()) {
        status() = "off (sanitizer build)";
        return;
    }
    if (const char* v = std::getenv("FRAGSCOPE_HUGE_PAGES"); v && std::strcmp(v, "0") == 0) {
        status() = "off (FRAGSCOPE_HUGE_PAGES=0)";
        return;
    }
    if (onlyForLargeInputs && inputBytes(argv) < kHugePagesFrom) {
        status() = "off (input files under " + std::to_string(kHugePagesFrom >> 20) + " MiB)";
        return;
    }
    const std::string mode = thpMode();
    if (mode != "madvise") {
        status() = mode.empty()       ? "off (the kernel reports no transparent huge pages)"
                   : mode == "always" ? "on (the kernel gives every heap huge pages)"
                                      : "off (transparent_hugepage is " + mode + ")";
        return;
    }
    const std::string saved = given ? std::string("=") + given : std::string("-");
    const std::string tunables = given && *given ? std::string(given) + ":" + kTunable : kTunable;
    ::setenv(kSaved, saved.c_str(), 1);
    ::setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
    ::execv("/proc/self/exe", argv);
    // exec failed (no /proc): carry on as started, with the environment as it was.
    if (given)
        ::setenv("GLIBC_TUNABLES", given, 1);
    else
        ::unsetenv("GLIBC_TUNABLES");
    ::unsetenv(kSaved);
    status() = "off (re-execution failed)";
}

std::string hugePagesStatus()
{
    return status();
}

} // namespace fs
