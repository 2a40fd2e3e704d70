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

// The virtio balloon devices that report free memory to the hypervisor (feature bit 5,
// VIRTIO_BALLOON_F_REPORTING, set in the negotiated feature string sysfs shows: one '0'/'1' per
// bit, bit 0 first). Such a guest hands every freed 2 MiB block back to the host, so a huge page
// is nearly always one the host must back again: measured on such a 2-core guest, touching 1 GiB
// of fresh memory took 3.3-4.4 s in huge pages and 0.45-0.51 s in 4 KiB pages.
std::string reportingBalloon()
{
    std::error_code ec;
    for (const auto& d :
         std::filesystem::directory_iterator("/sys/bus/virtio/drivers/virtio_balloon", ec)) {
        std::ifstream f(d.path() / "features");
        std::string bits;
        if (f && std::getline(f, bits) && bits.size() > 5 && bits[5] == '1')
            return d.path().filename().string();
    }
    return {};
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
    const char* asked = std::getenv("FRAGSCOPE_HUGE_PAGES");
    if (asked && std::strcmp(asked, "0") == 0) {
        status() = "off (FRAGSCOPE_HUGE_PAGES=0)";
        return;
    }
    const bool forced = asked && std::strcmp(asked, "1") == 0;
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
    if (const std::string balloon = reportingBalloon(); !balloon.empty() && !forced) {
        status() = "off (" + balloon +
                   " reports free memory to the hypervisor: huge pages fault in slower there; "
                   "FRAGSCOPE_HUGE_PAGES=1 asks anyway)";
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
