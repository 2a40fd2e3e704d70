// libFuzzer target: the safe pickle reader on arbitrary bytes, with the snapshot importer's
// compact keys, then a bounded walk over whatever it decoded. Any ImportError is a correct
// answer; a crash, hang or sanitizer report is a bug.
#include "core/import/pickle_reader.h"

#include <cstdio>
#include <string>
#include <unistd.h>

namespace {

std::string tempPath()
{
    static const std::string p = "/tmp/fragscope-fuzz-pickle-" + std::to_string(getpid());
    return p;
}

void walk(const fs::import::PickleDoc& d, fs::import::PValue v, int depth, long& budget)
{
    if (depth > 64 || --budget < 0) return;
    int64_t i = 0;
    uint64_t u = 0;
    double x = 0;
    (void)d.toI64(v, i);
    (void)d.toU64(v, u);
    (void)d.toDouble(v, x);
    (void)d.str(v);
    (void)d.size(v);
    d.forEachItem(v, [&](fs::import::PValue k, fs::import::PValue val) {
        (void)d.keyIndex(k);
        walk(d, val, depth + 1, budget);
    });
    if (v.type() != fs::import::PType::Dict)
        d.forEach(v, [&](fs::import::PValue c) { walk(d, c, depth + 1, budget); });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    FILE* f = std::fopen(tempPath().c_str(), "wb");
    if (!f) return 0;
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    try {
        fs::import::ByteReader r(tempPath(), 4096);
        fs::import::PickleOptions opts;
        opts.compactKeys = {"action",  "addr",   "size",  "stream",
                            "time_us", "frames", "state", "address"};
        auto doc = fs::import::PickleReader::read(r, opts);
        long budget = 100000;
        walk(*doc, doc->root(), 0, budget);
        (void)doc->get(doc->root(), "segments");
    } catch (const fs::import::ImportError&) {
    }
    return 0;
}
