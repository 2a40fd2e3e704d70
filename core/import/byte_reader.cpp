#include "byte_reader.h"

#include "core/store/foreign_input.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <zlib.h>

#include <fmt/format.h>

namespace fs::import {

namespace {
gzFile gzOf(void* p)
{
    return static_cast<gzFile>(p);
}
} // namespace

ByteReader::ByteReader(const std::string& path, size_t bufferSize) : path_(path), buf_(bufferSize)
{
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw ImportError(path, "is a directory, not a trace file");
    fileSize_ = std::filesystem::file_size(path, ec);
    if (ec) throw ImportError(path, "cannot read: " + ec.message());
    // Peek at the magic ourselves: gzdirect() is only reliable after the first read.
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        unsigned char m[2] = {0, 0};
        compressed_ = std::fread(m, 1, 2, f) == 2 && m[0] == 0x1f && m[1] == 0x8b;
        std::fclose(f);
    } else {
        throw ImportError(path, std::string("cannot open: ") + std::strerror(errno));
    }
    gz_ = gzopen(path.c_str(), "rb");
    if (!gz_) throw ImportError(path, std::string("cannot open: ") + std::strerror(errno));
    gzbuffer(gzOf(gz_), 1 << 18);
}

ByteReader::~ByteReader()
{
    if (gz_) gzclose(gzOf(gz_));
}

bool ByteReader::fill()
{
    if (eof_) return false;
    base_ += len_;
    pos_ = len_ = 0;
    const int n = gzread(gzOf(gz_), buf_.data(), static_cast<unsigned>(buf_.size()));
    if (n < 0) {
        int err = 0;
        const char* msg = gzerror(gzOf(gz_), &err);
        fail(fmt::format("corrupt compressed data ({})", msg ? msg : "zlib error"));
    }
    if (n == 0) {
        int err = 0;
        const char* msg = gzerror(gzOf(gz_), &err);
        if (err != Z_OK && err != Z_STREAM_END)
            fail(fmt::format("corrupt compressed data ({})", msg ? msg : "zlib error"));
        eof_ = true;
        return false;
    }
    len_ = static_cast<size_t>(n);
    return true;
}

bool ByteReader::readSlow(char* out, size_t n)
{
    while (n > 0) {
        if (pos_ == len_ && !fill()) return false;
        const size_t k = std::min(n, len_ - pos_);
        std::memcpy(out, buf_.data() + pos_, k);
        pos_ += k;
        out += k;
        n -= k;
    }
    return true;
}

bool ByteReader::readString(std::string& out, size_t n)
{
    // Grow in steps so that a hostile length does not allocate gigabytes up front.
    out.clear();
    while (n > 0) {
        if (pos_ == len_ && !fill()) return false;
        const size_t k = std::min(n, len_ - pos_);
        out.append(buf_.data() + pos_, k);
        pos_ += k;
        n -= k;
    }
    return true;
}

void ByteReader::fail(const std::string& problem) const
{
    failAt(offset(), problem);
}

void ByteReader::failAt(uint64_t off, const std::string& problem) const
{
    throw ImportError(
        path_, fmt::format("offset {}{}: {}", off, compressed_ ? " (uncompressed)" : "", problem));
}

std::string sniff(const std::string& path, size_t n)
{
    return store::fileHead(path, n);
}

} // namespace fs::import
