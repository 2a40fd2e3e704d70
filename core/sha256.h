// SHA-256 (FIPS 180-4), for content hashes users can check with `sha256sum` (the video a
// session's frame metrics were computed from).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fs {

class Sha256
{
public:
    Sha256();
    void update(const void* data, size_t n);
    void update(std::string_view s) { update(s.data(), s.size()); }
    // The digest as 64 lower-case hex digits; the object is spent afterwards.
    std::string hex();

private:
    void block(const uint8_t* p);
    std::array<uint32_t, 8> h_;
    std::array<uint8_t, 64> buf_{};
    size_t used_ = 0;
    uint64_t total_ = 0;
};

// SHA-256 of a file's bytes (throws SessionError naming the file when it cannot be read).
std::string sha256File(const std::string& path);

} // namespace fs
