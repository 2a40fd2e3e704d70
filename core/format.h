// Human-readable figures shared by the CLI and the analysis text output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fs {

// "512 B", "1.50 KiB", "78.80 GiB": binary units, two decimals above bytes.
std::string humanBytes(uint64_t bytes);

// A difference of bytes: "+1.50 KiB", "-78.80 GiB" ("+0 B" for none).
std::string signedHumanBytes(int64_t bytes);

// Nanoseconds per time unit: ns, us, ms, s, min, h; 0 for anything else. Every parser of a
// duration or a time with a unit (the CLI's TIME arguments, the settings file) uses it.
double nsPerTimeUnit(std::string_view unit);

// The current time as ISO 8601 in UTC ("2026-12-07T16:32:58Z"): when a video was scored, when a
// study was made.
std::string utcNowIso();

} // namespace fs
