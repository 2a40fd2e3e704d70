// SHA-256 (FIPS 180-4), for content hashes users can check with `sha256sum` (the video a
// session's frame metrics were computed from). OpenSSL's libcrypto computes it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st; // OpenSSL's EVP_MD_CTX, kept out of the header

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
    struct Free
    {
        void operator()(evp_md_ctx_st* c) const;
    };
    std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

// SHA-256 of a file's bytes (throws SessionError naming the file when it cannot be read).
std::string sha256File(const std::string& path);

} // namespace fs
