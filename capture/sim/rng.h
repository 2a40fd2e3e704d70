// Deterministic random numbers for the simulator. Own generator and own distributions, because
// the standard library's distributions differ between implementations and the simulator must
// produce the same event stream for the same seed everywhere.
#pragma once

#include <cstdint>

namespace fs::sim {

// xoshiro256** seeded through splitmix64 (public-domain algorithms by Blackman and Vigna).
class Rng
{
public:
    explicit Rng(uint64_t seed)
    {
        uint64_t x = seed;
        for (auto& w : s_)
            w = splitmix(x);
    }

    uint64_t next()
    {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    // Uniform integer in [0, n); n > 0. The tiny modulo bias does not matter for a workload model.
    uint64_t below(uint64_t n) { return next() % n; }
    bool chance(double p) { return uniform() < p; }

    static uint64_t splitmix(uint64_t& x)
    {
        uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

} // namespace fs::sim
