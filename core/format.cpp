#include "format.h"

#include <ctime>
#include <fmt/format.h>

namespace fs {

std::string humanBytes(uint64_t b)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string signedHumanBytes(int64_t d)
{
    // The magnitude as unsigned: -INT64_MIN does not fit an int64_t.
    const uint64_t m = d < 0 ? uint64_t{0} - static_cast<uint64_t>(d) : static_cast<uint64_t>(d);
    return (d < 0 ? "-" : "+") + humanBytes(m);
}

double nsPerTimeUnit(std::string_view unit)
{
    if (unit == "ns") return 1;
    if (unit == "us") return 1e3;
    if (unit == "ms") return 1e6;
    if (unit == "s") return 1e9;
    if (unit == "min") return 60e9;
    if (unit == "h") return 3600e9;
    return 0;
}

std::string utcNowIso()
{
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

} // namespace fs
