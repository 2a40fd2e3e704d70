// Human-readable figures shared by the CLI and the analysis text output.
#pragma once

#include <cstdint>
#include <string>

namespace fs {

// "512 B", "1.50 KiB", "78.80 GiB": binary units, two decimals above bytes.
std::string humanBytes(uint64_t bytes);

} // namespace fs
