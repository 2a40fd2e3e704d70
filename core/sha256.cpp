#include "sha256.h"

#include "store/sqlite.h" // SessionError

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <openssl/evp.h>

namespace fs {

void Sha256::Free::operator()(evp_md_ctx_st* c) const
{
    EVP_MD_CTX_free(c);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new())
{
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("libcrypto: SHA-256 is not available");
}

void Sha256::update(const void* data, size_t n)
{
    if (n > 0 && EVP_DigestUpdate(ctx_.get(), data, n) != 1)
        throw std::runtime_error("libcrypto: SHA-256 update failed");
}

std::string Sha256::hex()
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), digest, &len) != 1)
        throw std::runtime_error("libcrypto: SHA-256 final failed");
    static const char* const kHex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
        out += kHex[digest[i] >> 4];
        out += kHex[digest[i] & 15];
    }
    return out;
}

std::string sha256File(const std::string& path)
{
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw SessionError(path, std::string("cannot read: ") + std::strerror(errno));
    Sha256 h;
    std::vector<char> buf(1 << 20);
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0)
        h.update(buf.data(), n);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw SessionError(path, "read error while hashing");
    return h.hex();
}

} // namespace fs
