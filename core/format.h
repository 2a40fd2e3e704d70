// Human-readable figures shared by the CLI and the analysis text output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fs {

// "512 B", "1.50 KiB", "78.80 GiB": binary units, two decimals above bytes.
std::string humanBytes(uint64_t bytes);

// Nanoseconds per time unit: ns, us, ms, s, min, h; 0 for anything else. Every parser of a
// duration or a time with a unit (the CLI's TIME arguments, the settings file) uses it.
double nsPerTimeUnit(std::string_view unit);

} // namespace fs
