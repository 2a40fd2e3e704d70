#include "format.h"

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

} // namespace fs
