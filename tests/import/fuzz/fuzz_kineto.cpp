// libFuzzer target: the streaming JSON reader walking a Kineto/Chrome trace the way the Kineto
// importer does (top level, traceEvents element by element, the fields it reads). Any
// ImportError is a correct answer; a crash, hang or sanitizer report is a bug.
#include "core/import/json_reader.h"

#include <cstdio>
#include <string>
#include <unistd.h>

namespace {

std::string tempPath()
{
    static const std::string p = "/tmp/fragscope-fuzz-kineto-" + std::to_string(getpid());
    return p;
}

void onEvent(const fs::import::JsonDoc& d)
{
    using fs::import::JsonDoc;
    const uint32_t root = d.root();
    if (root == JsonDoc::kNone) return;
    const uint32_t args = d.member(root, "args");
    int64_t v = 0;
    double x = 0;
    (void)d.str(d.member(root, "name"));
    (void)d.str(d.member(root, "cat"));
    (void)d.toNanosFromMicros(d.member(root, "ts"), v);
    (void)d.toNanosFromMicros(d.member(root, "dur"), v);
    for (const char* k :
         {"Device Type", "Device Id", "Bytes", "Addr", "Total Allocated", "stream", "correlation"})
        (void)d.toInt(d.member(args, k), v);
    (void)d.toDouble(d.member(args, "Bytes"), x);
    for (size_t i = 0; i < 3; ++i)
        (void)d.toInt(d.child(d.member(args, "grid"), i), v);
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
        fs::import::JsonReader j(r);
        fs::import::JsonDoc doc;
        auto events = [&] {
            j.expect('[', "'['");
            if (j.accept(']')) return;
            do {
                j.readValue(doc);
                onEvent(doc);
            } while (j.accept(','));
            j.expect(']', "']'");
        };
        if (j.peekToken() == '[') {
            events();
        } else {
            j.expect('{', "'{'");
            if (!j.accept('}')) {
                do {
                    const std::string key = j.readString();
                    j.expect(':', "':'");
                    if (key == "traceEvents")
                        events();
                    else
                        j.skipValue();
                } while (j.accept(','));
                j.expect('}', "'}'");
            }
        }
        j.expectEnd();
    } catch (const fs::import::ImportError&) {
    }
    return 0;
}
