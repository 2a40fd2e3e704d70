// Buffered sequential reader over a file that may be gzip-compressed (zlib reads plain files
// transparently). Tracks the byte offset (of the uncompressed stream) for error messages.
#pragma once

#include "core/store/sqlite.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fs::import {

// Bad input: what() is "FILE: offset N: problem" (a SessionError, so the CLI exits with 2).
class ImportError : public SessionError
{
public:
    using SessionError::SessionError;
};

class ByteReader
{
public:
    // Opens path; throws ImportError when it cannot be read.
    explicit ByteReader(const std::string& path, size_t bufferSize = 1 << 20);
    ~ByteReader();
    ByteReader(const ByteReader&) = delete;
    ByteReader& operator=(const ByteReader&) = delete;

    const std::string& path() const { return path_; }
    bool compressed() const { return compressed_; }
    // Offset of the next byte to be read, in the (uncompressed) stream.
    uint64_t offset() const { return base_ + pos_; }
    // Size of the file on disk (compressed size for gzip).
    uint64_t fileSize() const { return fileSize_; }

    // Next byte or -1 at the end.
    int get()
    {
        if (pos_ == len_ && !fill()) return -1;
        return static_cast<unsigned char>(buf_[pos_++]);
    }
    int peek()
    {
        if (pos_ == len_ && !fill()) return -1;
        return static_cast<unsigned char>(buf_[pos_]);
    }
    // Reads exactly n bytes into out or returns false (end of input).
    bool read(void* out, size_t n)
    {
        if (len_ - pos_ >= n) {
            std::memcpy(out, buf_.data() + pos_, n);
            pos_ += n;
            return true;
        }
        return readSlow(static_cast<char*>(out), n);
    }
    bool readString(std::string& out, size_t n);
    // Throws ImportError naming the file and the current offset.
    [[noreturn]] void fail(const std::string& problem) const;
    [[noreturn]] void failAt(uint64_t offset, const std::string& problem) const;

private:
    bool fill();
    bool readSlow(char* out, size_t n);
    std::string path_;
    void* gz_ = nullptr;
    std::vector<char> buf_;
    size_t pos_ = 0;
    size_t len_ = 0;
    uint64_t base_ = 0;
    uint64_t fileSize_ = 0;
    bool compressed_ = false;
    bool eof_ = false;
};

// First bytes of a file (decompressed when gzip), for format detection.
std::string sniff(const std::string& path, size_t n);

} // namespace fs::import
