// Internal to core/store: the fixed parts of SQLite's file format that the store reads itself
// (https://www.sqlite.org/fileformat2.html, "The Database Header"): Session::open checks a file's
// header before SQLite opens it lazily, and the page reader (table_scan.cpp) finds its pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace fs::store::format {

inline uint32_t be16(const uint8_t* p)
{
    return static_cast<uint32_t>(p[0]) << 8 | p[1];
}
inline uint32_t be32(const uint8_t* p)
{
    return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
           static_cast<uint32_t>(p[2]) << 8 | p[3];
}

constexpr size_t kHeaderBytes = 100;

struct Header
{
    uint32_t pageSize = 0;      // bytes (the stored 1 means 65,536)
    uint32_t reservedBytes = 0; // unused at each page's end: a page's usable size is the rest
    uint32_t changeCounter = 0, pages = 0, validFor = 0; // pages is valid when validFor matches
    bool wal = false;                                    // write-ahead log mode (versions 2)
};

// The header's fields from the file's first kHeaderBytes bytes; none when they do not start with
// SQLite's magic string.
inline std::optional<Header> parseHeader(const uint8_t* h)
{
    if (std::memcmp(h, "SQLite format 3", 16) != 0) return std::nullopt;
    Header r;
    const uint32_t ps = be16(h + 16);
    r.pageSize = ps == 1 ? 65536u : ps;
    r.wal = h[18] == 2 || h[19] == 2;
    r.reservedBytes = h[20];
    r.changeCounter = be32(h + 24);
    r.pages = be32(h + 28);
    r.validFor = be32(h + 92);
    return r;
}

} // namespace fs::store::format
