#include "versions.h"

#include "fragscope_version.h"

#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <fmt/format.h>
#include <sqlite3.h>
#include <vector>

namespace fs {

std::string fragscopeVersion()
{
    return FRAGSCOPE_VERSION;
}
std::string sqliteVersion()
{
    return sqlite3_libversion();
}
std::string fmtVersion()
{
    return fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
}

bool captureBuilt()
{
    return FRAGSCOPE_CAPTURE;
}

const char* noCaptureReason()
{
    return "this fragscope was built without capture (FRAGSCOPE_CAPTURE=OFF: CUPTI was not found "
           "at build time). Install the CUDA Toolkit (or: apt-get install nvidia-cuda-toolkit "
           "libcupti-dev) and rebuild";
}

bool videoBuilt()
{
    return FRAGSCOPE_VIDEO;
}

const char* noVideoReason()
{
    return "this fragscope was built without video metrics (FRAGSCOPE_VIDEO=OFF: OpenCV was not "
           "found at build time). Install OpenCV (apt-get install libopencv-dev) and rebuild";
}

std::string findCupti()
{
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("FRAGSCOPE_CUPTI")) candidates.emplace_back(p);
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
        if (const char* p = std::getenv(var)) {
            candidates.push_back(std::string(p) + "/extras/CUPTI/lib64/libcupti.so");
            candidates.push_back(std::string(p) + "/lib64/libcupti.so");
        }
    }
    candidates.emplace_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
    candidates.emplace_back("/usr/local/cuda/lib64/libcupti.so");
    candidates.emplace_back("/usr/lib/x86_64-linux-gnu/libcupti.so");
    for (const auto& c : candidates) {
        std::error_code ec;
        if (std::filesystem::exists(c, ec)) return c;
    }
    return "libcupti.so"; // last resort: the dynamic linker's own search path
}

std::string cuptiVersion()
{
    // RTLD_NODELETE: libcupti's constructors allocate and keep the memory in its own globals; once
    // unmapped by dlclose that memory looks leaked (LeakSanitizer failed every --version).
    void* h = dlopen(findCupti().c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) return "not found";
    using Fn = int (*)(uint32_t*);
    auto fn = reinterpret_cast<Fn>(dlsym(h, "cuptiGetVersion"));
    uint32_t v = 0;
    std::string out = "unknown";
    if (fn && fn(&v) == 0) out = fmt::format("API {}", v);
    dlclose(h);
    return out;
}

} // namespace fs
